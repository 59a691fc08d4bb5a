//! zarrfs: read Zarr hierarchies (v2, v3 and the 2020 v3 draft) and serve every array as
//! a flat file of its elements, through a FUSE mount, over HTTP and WebDAV, or the `cat` /
//! `inspect` commands.
//!
//! The modules are layers, each using only those below it: `cli` → the fronts `daemon`
//! (FUSE) and `serve` (HTTP, WebDAV) → `fs` → `write` → `formats` → `read` → `hierarchy` →
//! `codec` → `metadata` → `store`, with `process` (logs, heap) under the fronts and `error`,
//! `json`, `limits` and `pool` beneath them all.

pub mod cli;
pub mod codec;
#[cfg(feature = "fuse")]
pub mod daemon;
pub mod error;
pub mod formats;
pub mod fs;
pub mod hierarchy;
pub mod json;
pub mod limits;
pub mod metadata;
pub mod pool;
pub mod process;
pub mod read;
#[cfg(feature = "serve")]
pub mod serve;
pub mod store;
pub mod write;

pub use error::{Error, Result};
