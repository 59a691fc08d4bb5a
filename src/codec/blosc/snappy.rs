//! Blosc buffers compressed with snappy. The c-blosc that `blosc-src` builds has no
//! snappy (it would need the C++ runtime), yet writers whose libblosc has it use it
//! (GDAL with Debian's libblosc). Here the frame is walked and every stream decompressed
//! with the pure-Rust `snap`; the decompressed blocks, still shuffled, go into an
//! equivalent frame whose streams are all stored raw under blosclz's compressor bits,
//! with the same shuffle flags. The caller hands that frame to c-blosc, which copies the
//! raw streams and undoes the byte or bit shuffle: no shuffle is written here.
//!
//! The frame of c-blosc 1.x (format version 2), as its `blosc_d` reads it: a 16-byte
//! header (version, versionlz, flags, typesize, then nbytes, blocksize and cbytes as u32
//! little-endian); one i32 start offset per block; at each start, one stream per split,
//! each an i32 compressed size and the data. A stream whose compressed size equals its
//! decoded size is stored raw. A block has `typesize` splits unless the flags' "don't
//! split" bit is set, it is the leftover last block, `typesize` is over 16 or a split
//! would be under 128 bytes; otherwise one. A frame flagged memcpyed holds the data as
//! it is, whatever its compressor bits say, and c-blosc reads it without help.

use crate::error::{corrupt, Error, Result};

const HEADER_LEN: usize = blosc_src::BLOSC_MIN_HEADER_LENGTH as usize;
const FORMAT_VERSION: u8 = blosc_src::BLOSC_VERSION_FORMAT as u8;
/// Flags: byte shuffle, plain copy, bit shuffle, a bit c-blosc 1.x leaves for later
/// formats (it refuses frames that set it), don't split.
const BYTE_SHUFFLE: u8 = blosc_src::BLOSC_DOSHUFFLE as u8;
const MEMCPYED: u8 = blosc_src::BLOSC_MEMCPYED as u8;
const BIT_SHUFFLE: u8 = blosc_src::BLOSC_DOBITSHUFFLE as u8;
const FUTURE: u8 = 0x08;
const DONT_SPLIT: u8 = 0x10;
/// The compressor's format is the flags' top three bits.
const COMPRESSOR_SHIFT: u8 = 5;
const SNAPPY: u8 = blosc_src::BLOSC_SNAPPY_FORMAT as u8;
const SNAPPY_VERSION: u8 = blosc_src::BLOSC_SNAPPY_VERSION_FORMAT as u8;
const BLOSCLZ: u8 = blosc_src::BLOSC_BLOSCLZ_FORMAT as u8;
const BLOSCLZ_VERSION: u8 = blosc_src::BLOSC_BLOSCLZ_VERSION_FORMAT as u8;
const MAX_BLOCKSIZE: usize = blosc_src::BLOSC_MAX_BLOCKSIZE as usize;
/// `MAX_SPLITS` and `MIN_BUFFERSIZE` of c-blosc's blosc.c, which its split rule uses.
const MAX_SPLITS: usize = 16;
const MIN_BUFFERSIZE: usize = 128;

/// Whether c-blosc needs this buffer re-framed: its streams are snappy's (a plain copy
/// is read by c-blosc whatever the compressor).
pub fn is_snappy(bytes: &[u8]) -> bool {
    bytes
        .get(2)
        .is_some_and(|flags| flags >> COMPRESSOR_SHIFT == SNAPPY && flags & MEMCPYED == 0)
}

/// The frame c-blosc decompresses to what the snappy frame `bytes` holds: every stream
/// decompressed and stored raw, under blosclz, with the same shuffle. `size` is the
/// decoded size the header declares, already checked against the caller's limit; the
/// new frame is `size` plus 16 bytes plus 8 per block (each block's offset and stream
/// size take 8 bytes of `bytes` too, so it is bounded by the two lengths).
pub fn reframe(bytes: &[u8], size: usize) -> Result<Vec<u8>> {
    let &[version, versionlz, flags, typesize, ..] = bytes else {
        return Err(corrupt("blosc snappy: shorter than the 16-byte header"));
    };
    let typesize = usize::from(typesize);
    if version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "blosc: format version {version} (only {FORMAT_VERSION} is read)"
        )));
    }
    if flags >> COMPRESSOR_SHIFT != SNAPPY || flags & MEMCPYED != 0 {
        return Err(Error::Internal(format!(
            "blosc: flags {flags:#04x} are not those of snappy streams"
        )));
    }
    if versionlz != SNAPPY_VERSION {
        return Err(corrupt(format!(
            "blosc snappy: stream format version {versionlz} (only {SNAPPY_VERSION} is read)"
        )));
    }
    if flags & FUTURE != 0 {
        return Err(corrupt(format!(
            "blosc: flags {flags:#04x} from a later format"
        )));
    }
    if typesize == 0 {
        return Err(corrupt("blosc snappy: typesize 0"));
    }
    let field = |at: usize, what: &str| {
        u32_at(bytes, at)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| corrupt(format!("blosc snappy: no {what} in the header")))
    };
    let nbytes = field(4, "decoded size")?;
    let blocksize = field(8, "block size")?;
    let cbytes = field(12, "compressed size")?;
    if nbytes != size {
        return Err(corrupt(format!(
            "blosc snappy: header declares {nbytes} bytes, not {size}"
        )));
    }
    if cbytes != bytes.len() {
        return Err(corrupt(format!(
            "blosc snappy: header declares {cbytes} compressed bytes, the buffer has {}",
            bytes.len()
        )));
    }
    if blocksize == 0 || blocksize > size || blocksize > MAX_BLOCKSIZE {
        return Err(corrupt(format!(
            "blosc snappy: block size {blocksize} for {size} bytes"
        )));
    }
    let leftover = size % blocksize;
    let nblocks = size / blocksize + usize::from(leftover > 0);
    // The offsets of the blocks must lie in the buffer (checked as c-blosc checks them).
    let starts_end = nblocks
        .checked_mul(4)
        .and_then(|n| n.checked_add(HEADER_LEN))
        .filter(|end| *end <= bytes.len())
        .ok_or_else(|| {
            corrupt(format!(
                "blosc snappy: the offsets of {nblocks} blocks do not fit in {} bytes",
                bytes.len()
            ))
        })?;
    // The new frame: the header, the offsets, then per block a raw stream (its size and
    // its bytes); c-blosc reads sizes and offsets as int32.
    let frame_len = nblocks
        .checked_mul(4)
        .and_then(|n| n.checked_add(starts_end))
        .and_then(|n| n.checked_add(size))
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            corrupt(format!(
                "blosc snappy: {size} bytes in {nblocks} blocks is too large"
            ))
        })?;
    let frame_len = frame_len as usize;
    let mut frame: Vec<u8> = Vec::new();
    frame
        .try_reserve_exact(frame_len)
        .map_err(|_| corrupt(format!("blosc snappy: out of memory for {frame_len} bytes")))?;
    frame.resize(frame_len, 0);

    let header = HeaderOut {
        flags: (flags & (BYTE_SHUFFLE | BIT_SHUFFLE)) | DONT_SPLIT | (BLOSCLZ << COMPRESSOR_SHIFT),
        typesize: typesize as u8,
        nbytes: size as u32,
        blocksize: blocksize as u32,
        cbytes: frame_len as u32,
    };
    // Every value written below is at most `frame_len`, which fits an i32.
    let (head, rest) = frame.split_at_mut(HEADER_LEN);
    head.copy_from_slice(&header.bytes());
    let (offsets, mut streams) = rest.split_at_mut(starts_end - HEADER_LEN);
    let mut decoder = snap::raw::Decoder::new();
    let mut slot = starts_end;
    for (block, offset) in offsets.chunks_exact_mut(4).enumerate() {
        let leftover_block = block + 1 == nblocks && leftover > 0;
        let bsize = if leftover_block { leftover } else { blocksize };
        // The raw stream: the block's offset in the new frame, its size, its bytes.
        offset.copy_from_slice(&(slot as u32).to_le_bytes());
        let (stream, after) = std::mem::take(&mut streams).split_at_mut(4 + bsize);
        streams = after;
        let (stream_size, out) = stream.split_at_mut(4);
        stream_size.copy_from_slice(&(bsize as u32).to_le_bytes());
        let start = int32_at(bytes, HEADER_LEN + 4 * block, block, "its offset")?;
        let split = flags & DONT_SPLIT == 0
            && typesize <= MAX_SPLITS
            && bsize / typesize >= MIN_BUFFERSIZE
            && !leftover_block;
        let nsplits = if split { typesize } else { 1 };
        decode_block(bytes, start, out, nsplits, block, &mut decoder)?;
        slot += 4 + bsize;
    }
    Ok(frame)
}

/// The header of the new frame.
struct HeaderOut {
    flags: u8,
    typesize: u8,
    nbytes: u32,
    blocksize: u32,
    cbytes: u32,
}

impl HeaderOut {
    fn bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        out[..4].copy_from_slice(&[FORMAT_VERSION, BLOSCLZ_VERSION, self.flags, self.typesize]);
        out[4..8].copy_from_slice(&self.nbytes.to_le_bytes());
        out[8..12].copy_from_slice(&self.blocksize.to_le_bytes());
        out[12..].copy_from_slice(&self.cbytes.to_le_bytes());
        out
    }
}

/// Decodes the `nsplits` streams of block `block`, starting at `at` in `bytes`, into
/// `out` (the block's size), in order.
fn decode_block(
    bytes: &[u8],
    mut at: usize,
    out: &mut [u8],
    nsplits: usize,
    block: usize,
    decoder: &mut snap::raw::Decoder,
) -> Result<()> {
    let neblock = out.len() / nsplits;
    if neblock == 0 || !out.len().is_multiple_of(nsplits) {
        return Err(corrupt(format!(
            "blosc snappy: block {block} of {} bytes does not split into {nsplits} streams",
            out.len()
        )));
    }
    for part in out.chunks_exact_mut(neblock) {
        let csize = int32_at(bytes, at, block, "a stream's size")?;
        // `int32_at` read 4 bytes at `at`, so `at + 4` is within the buffer.
        let begin = at + 4;
        let stream = begin
            .checked_add(csize)
            .and_then(|end| bytes.get(begin..end))
            .ok_or_else(|| {
                corrupt(format!(
                    "blosc snappy: block {block}: a stream of {csize} bytes at byte {begin} \
                     runs past the end of the {}-byte buffer",
                    bytes.len()
                ))
            })?;
        if csize == neblock {
            part.copy_from_slice(stream);
        } else {
            let bad = |e: snap::Error| corrupt(format!("blosc snappy: block {block}: {e}"));
            let declared = snap::raw::decompress_len(stream).map_err(bad)?;
            if declared != neblock {
                return Err(corrupt(format!(
                    "blosc snappy: block {block}: a stream decodes to {declared} bytes, \
                     not {neblock}"
                )));
            }
            let n = decoder.decompress(stream, part).map_err(bad)?;
            if n != neblock {
                return Err(corrupt(format!(
                    "blosc snappy: block {block}: a stream decoded to {n} bytes, not {neblock}"
                )));
            }
        }
        // The stream lies in the buffer: this is its end, at most the buffer's length.
        at = begin + stream.len();
    }
    Ok(())
}

/// The little-endian u32 at `at`, if the buffer holds it.
fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let four: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(four))
}

/// The non-negative i32 at `at`: an offset or a size in block `block`.
fn int32_at(bytes: &[u8], at: usize, block: usize, what: &str) -> Result<usize> {
    let value = u32_at(bytes, at).ok_or_else(|| {
        corrupt(format!(
            "blosc snappy: block {block}: {what} at byte {at} lies past the end of the \
             {}-byte buffer",
            bytes.len()
        ))
    })?;
    i32::try_from(value)
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| corrupt(format!("blosc snappy: block {block}: {what} is negative")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::blosc::Blosc;
    use crate::codec::{BytesToBytes, UnitRepr};
    use crate::metadata::{CodecSpec, DataType, FillValue};
    use serde_json::json;

    /// Snappy frames are decoded by the codec, whatever its configuration says.
    fn codec() -> Blosc {
        let repr = UnitRepr {
            shape: vec![1],
            dtype: DataType::Float(4),
            fill: FillValue::Fixed(vec![0; 4]),
        };
        let spec = CodecSpec::new("blosc", json!({"cname": "snappy", "shuffle": 1}));
        Blosc::build(&spec, &repr).unwrap()
    }

    fn decode(frame: &[u8]) -> Result<Vec<u8>> {
        codec().decode(frame.to_vec(), 1 << 20)
    }

    /// Compressible data: a slowly growing counter of `typesize`-byte elements.
    fn counting(len: usize, typesize: usize) -> Vec<u8> {
        (0..len)
            .map(|i| ((i / typesize) / 16 + i % typesize) as u8)
            .collect()
    }

    /// Incompressible data from a fixed xorshift.
    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// `block` shuffled as c-blosc shuffles one block (`code` is c-blosc's shuffle
    /// code): c-blosc compresses it with lz4 as a single block, and the lz4 crate undoes
    /// only the compression. `block` is at least 128 bytes and a whole number of
    /// elements, so c-blosc neither copies it nor cuts it into more blocks.
    fn shuffled_by_cblosc(block: &[u8], typesize: usize, code: u32) -> Vec<u8> {
        let room = block.len() * 2 + 64;
        let mut out = vec![0u8; room];
        let cname = c"lz4";
        // SAFETY: `out` has `room` bytes, well over the input plus c-blosc's overhead.
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                5,
                code as libc::c_int,
                typesize,
                block.len(),
                block.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                room,
                cname.as_ptr(),
                block.len(),
                1,
            )
        };
        assert!(n > 0);
        out.truncate(n as usize);
        let flags = out[2];
        assert_eq!(flags & MEMCPYED, 0, "c-blosc copied the block");
        assert_eq!(u32_at(&out, 8).unwrap() as usize, block.len(), "one block");
        let nsplits = if flags & DONT_SPLIT == 0 { typesize } else { 1 };
        let neblock = block.len() / nsplits;
        let mut at = u32_at(&out, 16).unwrap() as usize;
        let mut shuffled = Vec::new();
        for _ in 0..nsplits {
            let csize = u32_at(&out, at).unwrap() as usize;
            let stream = &out[at + 4..at + 4 + csize];
            if csize == neblock {
                shuffled.extend_from_slice(stream);
            } else {
                shuffled.extend(lz4::block::decompress(stream, Some(neblock as i32)).unwrap());
            }
            at += 4 + csize;
        }
        assert_eq!(at, out.len());
        shuffled
    }

    /// How a test frame is written.
    #[derive(Clone, Copy)]
    struct Layout {
        typesize: usize,
        /// c-blosc's shuffle code: 0 none, 1 byte, 2 bit.
        shuffle: u32,
        blocksize: usize,
        /// Set the "don't split" flag (c-blosc's writer also sets it when a split would
        /// be too small).
        dont_split: bool,
        /// Store every stream raw instead of compressed.
        raw: bool,
    }

    /// A blosc frame of `data` with snappy streams, written as c-blosc's writer would.
    fn snappy_frame(data: &[u8], l: Layout) -> Vec<u8> {
        let split =
            !l.dont_split && l.typesize <= MAX_SPLITS && l.blocksize / l.typesize >= MIN_BUFFERSIZE;
        let shuffle_flag = match l.shuffle {
            0 => 0,
            1 => BYTE_SHUFFLE,
            _ => BIT_SHUFFLE,
        };
        let flags =
            shuffle_flag | if split { 0 } else { DONT_SPLIT } | (SNAPPY << COMPRESSOR_SHIFT);
        let blocks: Vec<&[u8]> = data.chunks(l.blocksize).collect();
        let mut body = Vec::new();
        let mut starts = Vec::new();
        let head = HEADER_LEN + 4 * blocks.len();
        let mut encoder = snap::raw::Encoder::new();
        for block in &blocks {
            starts.push((head + body.len()) as u32);
            let leftover = block.len() < l.blocksize;
            let shuffled = if l.shuffle == 0 {
                block.to_vec()
            } else {
                shuffled_by_cblosc(block, l.typesize, l.shuffle)
            };
            let nsplits = if split && !leftover { l.typesize } else { 1 };
            for part in shuffled.chunks(shuffled.len() / nsplits) {
                let packed = encoder.compress_vec(part).unwrap();
                // c-blosc's writer keeps a stream as snappy wrote it unless it has
                // exactly the size of the raw one.
                let stream = if l.raw || packed.len() == part.len() {
                    part
                } else {
                    &packed[..]
                };
                body.extend_from_slice(&(stream.len() as u32).to_le_bytes());
                body.extend_from_slice(stream);
            }
        }
        let mut frame = vec![FORMAT_VERSION, SNAPPY_VERSION, flags, l.typesize as u8];
        frame.extend_from_slice(&(data.len() as u32).to_le_bytes());
        frame.extend_from_slice(&(l.blocksize as u32).to_le_bytes());
        frame.extend_from_slice(&((head + body.len()) as u32).to_le_bytes());
        for start in starts {
            frame.extend_from_slice(&start.to_le_bytes());
        }
        frame.extend_from_slice(&body);
        frame
    }

    /// `frame` with its header's compressed size set to its length.
    fn sized(mut frame: Vec<u8>) -> Vec<u8> {
        let len = frame.len() as u32;
        frame[12..16].copy_from_slice(&len.to_le_bytes());
        frame
    }

    const PLAIN: Layout = Layout {
        typesize: 4,
        shuffle: 0,
        blocksize: 1024,
        dont_split: false,
        raw: false,
    };

    #[test]
    fn test_frames_are_shuffled_by_c_blosc() {
        // The helper's byte shuffle is the transpose of the elements' bytes.
        let block = noise(512);
        let shuffled = shuffled_by_cblosc(&block, 4, 1);
        for (i, byte) in block.iter().enumerate() {
            assert_eq!(shuffled[(i % 4) * 128 + i / 4], *byte);
        }
        assert_ne!(shuffled_by_cblosc(&block, 4, 2), block);
    }

    #[test]
    fn no_shuffle_split_and_not() {
        let data = counting(4096, 4);
        for dont_split in [false, true] {
            let frame = snappy_frame(
                &data,
                Layout {
                    dont_split,
                    ..PLAIN
                },
            );
            assert!(is_snappy(&frame));
            assert!(frame.len() < data.len() / 2, "snappy compressed nothing");
            assert_eq!(decode(&frame).unwrap(), data, "dont_split {dont_split}");
        }
        // One-byte elements, one block.
        let data = counting(700, 1);
        let frame = snappy_frame(
            &data,
            Layout {
                typesize: 1,
                blocksize: 700,
                ..PLAIN
            },
        );
        assert_eq!(decode(&frame).unwrap(), data);
    }

    #[test]
    fn byte_shuffle_split_and_not() {
        let data = noise(4096);
        for dont_split in [false, true] {
            let layout = Layout {
                shuffle: 1,
                dont_split,
                ..PLAIN
            };
            let frame = snappy_frame(&data, layout);
            assert_eq!(frame[2] & DONT_SPLIT != 0, dont_split);
            assert_eq!(decode(&frame).unwrap(), data, "dont_split {dont_split}");
        }
        // Eight-byte elements, split in eight.
        let layout = Layout {
            typesize: 8,
            shuffle: 1,
            blocksize: 2048,
            ..PLAIN
        };
        let frame = snappy_frame(&data, layout);
        assert_eq!(frame[2] & DONT_SPLIT, 0);
        assert_eq!(decode(&frame).unwrap(), data);
    }

    #[test]
    fn bit_shuffle() {
        let data = noise(3072);
        for typesize in [2, 4, 8] {
            for dont_split in [false, true] {
                let layout = Layout {
                    typesize,
                    shuffle: 2,
                    dont_split,
                    ..PLAIN
                };
                let frame = snappy_frame(&data, layout);
                assert_eq!(decode(&frame).unwrap(), data, "typesize {typesize}");
            }
        }
    }

    #[test]
    fn leftover_last_block() {
        // Two whole blocks split in four, then a leftover of 200 bytes in one stream.
        let data = counting(2248, 4);
        for shuffle in [0, 1, 2] {
            let layout = Layout { shuffle, ..PLAIN };
            let frame = snappy_frame(&data, layout);
            assert_eq!(frame[2] & DONT_SPLIT, 0);
            assert_eq!(decode(&frame).unwrap(), data, "shuffle {shuffle}");
        }
        let data = noise(2248);
        let frame = snappy_frame(
            &data,
            Layout {
                shuffle: 2,
                ..PLAIN
            },
        );
        assert_eq!(decode(&frame).unwrap(), data);
    }

    #[test]
    fn raw_streams() {
        let data = counting(2248, 4);
        for shuffle in [0, 1, 2] {
            for dont_split in [false, true] {
                let layout = Layout {
                    shuffle,
                    dont_split,
                    raw: true,
                    ..PLAIN
                };
                let frame = snappy_frame(&data, layout);
                assert!(frame.len() > data.len());
                assert_eq!(decode(&frame).unwrap(), data);
            }
        }
    }

    #[test]
    fn a_copied_frame_is_left_to_c_blosc() {
        // GDAL's chunks under 128 bytes: flagged memcpyed, the snappy bits set.
        let data = counting(64, 4);
        let mut frame = vec![FORMAT_VERSION, SNAPPY_VERSION, 0x56, 4];
        for v in [64u32, 64, 80] {
            frame.extend_from_slice(&v.to_le_bytes());
        }
        frame.extend_from_slice(&data);
        assert!(!is_snappy(&frame));
        assert_eq!(decode(&frame).unwrap(), data);
    }

    #[test]
    fn snappy_is_not_written() {
        assert!(matches!(
            codec().encode(vec![0; 256]),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn corrupt_frames_fail() {
        let data = counting(2248, 4);
        let good = snappy_frame(
            &data,
            Layout {
                shuffle: 1,
                ..PLAIN
            },
        );
        let size = data.len();
        assert_eq!(
            reframe(&good, size).map(|f| f.len()).unwrap(),
            16 + 3 * 8 + size
        );
        let fails = |frame: Vec<u8>, why: &str| {
            assert!(reframe(&frame, size).is_err(), "{why}: reframed");
            assert!(decode(&frame).is_err(), "{why}: decoded");
        };
        // Truncated, with the header's compressed size still the old one and then
        // matching the truncation.
        for len in [0, 3, 15, 16, 20, 27, 40, good.len() / 2, good.len() - 1] {
            fails(good[..len].to_vec(), "truncated");
            if len >= 16 {
                fails(sized(good[..len].to_vec()), "truncated, resized");
            }
        }
        // The header.
        let with = |at: usize, byte: u8| {
            let mut f = good.clone();
            f[at] = byte;
            f
        };
        fails(with(0, 1), "format version 1");
        fails(with(1, 2), "snappy version 2");
        fails(with(2, good[2] | FUTURE), "future flag");
        fails(with(3, 0), "typesize 0");
        let field = |at: usize, v: u32| {
            let mut f = good.clone();
            f[at..at + 4].copy_from_slice(&v.to_le_bytes());
            f
        };
        fails(field(8, 0), "block size 0");
        fails(field(8, size as u32 + 1), "block size past the data");
        fails(field(8, u32::MAX), "block size negative");
        fails(field(8, 1), "a block per byte: offsets past the end");
        assert!(reframe(&good, size - 1).is_err());
        // Offsets out of range, negative, or pointing at garbage.
        let last = good.len() as u32;
        for (v, why) in [
            (last, "offset at the end"),
            (last - 3, "offset in the last bytes"),
            (u32::MAX, "offset -1"),
            (1 << 31, "offset i32::MIN"),
            (u32::MAX / 2, "huge offset"),
        ] {
            fails(field(16, v), why);
            fails(field(24, v), why);
        }
        // A stream size past the end, negative or different from the stream.
        let first = u32_at(&good, 16).unwrap() as usize;
        fails(field(first, last), "stream size past the end");
        fails(field(first, u32::MAX), "stream size -1");
        fails(field(first, 256), "stream size taken as raw");
        let csize = u32_at(&good, first).unwrap();
        fails(field(first, csize - 1), "stream size one short");
        // A bad snappy stream: its declared length (256, two bytes), then its first
        // tag (a copy before the start).
        fails(with(first + 4, good[first + 4] ^ 0x01), "snappy length");
        fails(with(first + 6, 0xff), "snappy tag");
        fails(field(first, 0), "empty snappy stream");
    }

    #[test]
    fn no_byte_or_cut_panics() {
        let data = counting(1300, 4);
        let good = snappy_frame(
            &data,
            Layout {
                shuffle: 2,
                blocksize: 512,
                ..PLAIN
            },
        );
        let size = data.len();
        for at in 0..good.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut f = good.clone();
                f[at] ^= flip;
                // Either the frame decodes (to whatever) or it fails: no panic.
                let _ = decode(&f);
                let _ = reframe(&f, size);
            }
        }
        for len in 0..good.len() {
            let _ = reframe(&sized(good[..len.max(16)].to_vec()), size);
            let _ = decode(&good[..len]);
        }
    }
}
