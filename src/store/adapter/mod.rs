//! Adapters: stores that wrap a source and read through it. The disk cache of fetched
//! values, and the coalescing of neighbouring byte ranges of one object into one request.

pub mod disk_cache;
pub mod spans;
