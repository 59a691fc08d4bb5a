//! The size limits every layer checks what a store or a request says against, before
//! anything is allocated for it. A bottom module: it imports nothing of zarrfs, so the
//! store, the metadata parsers and the codecs share one set without importing each other.

/// Upper bound on any decoded chunk or intermediate buffer of unknown size (4 GiB).
pub const MAX_BUFFER: usize = 4 << 30;

/// Upper bound on the elements of a decoded variable-length chunk (each costs a few
/// dozen bytes of bookkeeping besides its value).
pub const MAX_VAR_ELEMENTS: usize = 1 << 24;

/// The largest element zarrfs accepts, in bytes (4 MiB: a structured element with a
/// 1024 x 1024 float32 sub-array). Every size a parser reads is checked against it with
/// overflow-checked arithmetic before anything is built from it, so that the sizes of
/// accepted types (and the arithmetic on them) stay small.
pub const MAX_ITEM: usize = 4 << 20;

/// The most dimensions an array may have (numpy's limit).
pub const MAX_RANK: usize = 64;

/// The largest value (or range of one) a store hands out: the largest chunk zarrfs decodes
/// ([`MAX_BUFFER`]) and then some for the codecs' overhead. Larger values are refused
/// before anything is allocated for them.
pub const MAX_VALUE: u64 = MAX_BUFFER as u64 + (64 << 20);
