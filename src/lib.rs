//! zarrfs: read Zarr hierarchies (v2, v3 and the 2020 v3 draft) and serve every array as
//! a flat file of its elements, through a FUSE mount or the `cat` / `inspect` commands.

pub mod array;
pub mod cache;
pub mod codec;
pub mod demo;
pub mod error;
pub mod fs;
pub mod fuse;
pub mod hierarchy;
pub mod inspect;
pub mod io_mode;
pub mod materialize;
pub mod memory;
pub mod metadata;
pub mod mount;
pub mod mount_failure;
pub mod pool;
pub mod prefetch;
pub mod region;
pub mod shard_spans;
pub mod store;
pub mod view;

pub use error::{Error, Result};
