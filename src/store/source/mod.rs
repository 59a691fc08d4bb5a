//! Sources: where bytes are. A local folder, memory (tests and fuzz targets), a blob (one
//! file or object read by ranges, for archives), and object storage and web servers on
//! shared per-bucket or per-host sources (`remote/`).

pub mod blob;
pub mod folder;
mod folder_root;
mod folder_write;
pub mod memory;
#[cfg(feature = "remote")]
pub mod remote;
