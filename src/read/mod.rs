//! The read path of one array. Its unit of decode is the *unit*: a chunk, or an inner
//! chunk of a shard when the array is read by inner chunk. `array.rs` fetches and decodes
//! unit (i, j, ...); `geometry.rs` maps file elements to units (one type for every such
//! question); `cache.rs` keeps decoded units within a byte budget; `decoding.rs` runs at
//! most a core's worth of decodes at once; `view.rs` is the flat view, mapping a byte
//! range of the file to unit regions and copying them
//! (`view/stream.rs` streams a whole file for `cat`); `readahead.rs` follows each
//! reader's sequential reading; `prefetch.rs` decodes ahead of readers; `text.rs` writes
//! variable-length arrays as JSON lines; `scope.rs` names one version of an array in
//! caches.

pub mod array;
pub mod cache;
pub mod decoding;
pub mod geometry;
pub mod prefetch;
pub mod readahead;
pub mod recent;
pub mod scope;
pub mod text;
pub mod view;
