//! The read path of one array: `array.rs` fetches and decodes chunk (i, j, ...);
//! `geometry.rs` maps file elements to read units (one type for every such question);
//! `cache.rs` keeps decoded chunks within a byte budget; `view.rs` maps a byte range of
//! the flat file to chunk regions and copies them (`view/stream.rs` streams a whole file
//! for `cat`); `prefetch.rs` decodes ahead of readers; `scope.rs` names one version of
//! an array in caches.

pub mod array;
pub mod cache;
pub mod geometry;
pub mod prefetch;
pub mod readahead;
pub mod scope;
pub mod text;
pub mod view;
