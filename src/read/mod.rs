//! The read path of one array: `array.rs` fetches and decodes chunk (i, j, ...);
//! `cache.rs` keeps decoded chunks within a byte budget; `view.rs` maps a byte range of
//! the flat file to chunk regions and copies them (`view/stream.rs` streams a whole file
//! for `cat`); `prefetch.rs` decodes ahead of readers.

pub mod array;
pub mod cache;
pub mod prefetch;
pub mod view;
