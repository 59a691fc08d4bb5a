//! Fuzz target: the view's range mapping. A small array (0 to 4 dimensions, any chunking,
//! v2 or v3, optional transpose, sharding and compression, missing and fill-only chunks)
//! is written into an in-memory store through zarrfs's own encoder, and its flat file (C
//! or F order, little- or big-endian) is read at fuzzed offsets and lengths with `read_at`
//! and `read_in_place`. Every read must succeed and equal the same bytes of a reference
//! file computed element by element here.

use std::sync::Arc;

use arbitrary::Arbitrary;
use serde_json::{json, Value};
use zarrfs::codec::{CodecChain, UnitData, UnitRepr};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::read::array::Array;
use zarrfs::read::cache::UnitCache;
use zarrfs::read::readahead::Cursor;
use zarrfs::read::view::{Layout, Now, Order, View};
use zarrfs::store::{MemoryStore, Store};
use zarrfs_fuzz::{first_indices, CappedAlloc};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

#[derive(Arbitrary, Debug)]
struct Dim {
    /// Array extent: 0..=7.
    size: u8,
    /// Chunk extent: 1..=4.
    chunk: u8,
    /// With sharding: the inner chunk extent is the chunk extent / (divisor % 2 + 1) when
    /// that divides it.
    divisor: u8,
}

#[derive(Arbitrary, Debug)]
struct Read {
    offset: u16,
    len: u16,
    /// Read near the end of the u64 range instead.
    far: bool,
}

#[derive(Arbitrary, Debug)]
struct Case {
    v2: bool,
    dims: Vec<Dim>,
    dtype: u8,
    stored_big: bool,
    /// v2: order "F"; v3: a transpose codec.
    transpose: bool,
    rotate: u8,
    shard: bool,
    index_at_start: bool,
    compressor: u8,
    dot_separator: bool,
    fill: u8,
    /// Chunks absent from the store (bit per chunk, C order).
    missing: u64,
    /// Chunks written with only the fill value.
    fill_only: u64,
    file_order_f: bool,
    file_big: bool,
    cache_kib: u8,
    reads: Vec<Read>,
}

/// (v3 name, v2 typestring without byte order, size, swap unit size).
const DTYPES: [(&str, &str, usize, usize); 5] = [
    ("uint8", "u1", 1, 1),
    ("uint16", "u2", 2, 2),
    ("int32", "i4", 4, 4),
    ("float64", "f8", 8, 8),
    ("complex64", "c8", 8, 4),
];

/// One element's little-endian bytes for fill value `f`.
fn fill_bytes(dtype: usize, f: u8) -> Vec<u8> {
    match dtype {
        0 => vec![f],
        1 => u16::from(f).to_le_bytes().to_vec(),
        2 => i32::from(f).to_le_bytes().to_vec(),
        3 => f64::from(f).to_le_bytes().to_vec(),
        _ => [f32::from(f).to_le_bytes(), 0f32.to_le_bytes()].concat(),
    }
}

/// The value of the element at C-order index `i` of the array.
fn element(i: u64, size: usize) -> Vec<u8> {
    (0..size as u64)
        .map(|j| (i.wrapping_mul(31).wrapping_add(j * 7 + 3) & 0xff) as u8)
        .collect()
}

/// The C-order flat index of `idx` in `shape`.
fn flat(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter().zip(shape).fold(0, |acc, (i, s)| acc * s + i)
}

/// Unravel `e` over `shape`, slowest axis first in `axes`.
fn unravel(mut e: u64, shape: &[u64], axes: &[usize]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for &a in axes.iter().rev() {
        idx[a] = e % shape[a];
        e /= shape[a];
    }
    idx
}

fn metadata(
    case: &Case,
    dtype: usize,
    shape: &[u64],
    chunks: &[u64],
    inner: &[u64],
) -> (String, Value) {
    let (name, typestr, _, _) = DTYPES[dtype];
    let endian = if case.stored_big { "big" } else { "little" };
    let fill = if dtype == 4 {
        json!([case.fill, 0.0])
    } else {
        json!(case.fill)
    };
    let sep = if case.dot_separator { "." } else { "/" };
    if case.v2 {
        let e = if typestr.ends_with('1') {
            '|'
        } else if case.stored_big {
            '>'
        } else {
            '<'
        };
        let compressor = match case.compressor % 3 {
            0 => Value::Null,
            1 => json!({"id": "zlib", "level": 1}),
            _ => json!({"id": "zstd", "level": 1}),
        };
        let doc = json!({
            "zarr_format": 2,
            "shape": shape,
            "chunks": chunks,
            "dtype": format!("{e}{typestr}"),
            "order": if case.transpose { "F" } else { "C" },
            "compressor": compressor,
            "fill_value": fill,
            "filters": null,
            "dimension_separator": sep,
        });
        return (".zarray".into(), doc);
    }
    let n = shape.len();
    let mut order: Vec<usize> = (0..n).collect();
    if n > 0 {
        order.rotate_left(case.rotate as usize % n);
        if case.rotate & 0x80 != 0 {
            order.reverse();
        }
    }
    let mut codecs = vec![];
    if case.transpose {
        codecs.push(json!({"name": "transpose", "configuration": {"order": order}}));
    }
    codecs.push(json!({"name": "bytes", "configuration": {"endian": endian}}));
    match case.compressor % 3 {
        0 => {}
        1 => codecs.push(json!({"name": "gzip", "configuration": {"level": 1}})),
        _ => codecs.push(json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})),
    }
    if case.shard {
        codecs = vec![json!({
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": inner,
                "codecs": codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": if case.index_at_start { "start" } else { "end" },
            }
        })];
    }
    let doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": sep}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": {},
    });
    ("zarr.json".into(), doc)
}

fn run(case: Case) {
    if case.dims.len() > 4 || case.reads.len() > 32 {
        return;
    }
    let dtype = case.dtype as usize % if case.v2 { 4 } else { DTYPES.len() };
    let (_, _, item, unit) = DTYPES[dtype];
    let shape: Vec<u64> = case.dims.iter().map(|d| u64::from(d.size % 8)).collect();
    let chunks: Vec<u64> = case
        .dims
        .iter()
        .map(|d| u64::from(d.chunk % 4 + 1))
        .collect();
    let inner: Vec<u64> = case
        .dims
        .iter()
        .zip(&chunks)
        .map(|(d, c)| {
            let div = u64::from(d.divisor % 2 + 1);
            if c % div == 0 {
                c / div
            } else {
                *c
            }
        })
        .collect();
    let (key, doc) = metadata(&case, dtype, &shape, &chunks, &inner);

    // Parse the metadata the way a mount does.
    let mut store = MemoryStore::new();
    store.insert(key.clone(), doc.to_string().into_bytes());
    let h = Hierarchy::open(Arc::new(store.clone())).expect("hierarchy opens");
    let meta = match h.node("").expect("root node resolves") {
        Node::Array(meta) => meta,
        other => panic!("root is not an array: {other:?}"),
    };
    let fill = fill_bytes(dtype, case.fill);
    assert_eq!(meta.fill, zarrfs::metadata::FillValue::Fixed(fill.clone()));

    // Write every chunk that is not missing through zarrfs's encoder.
    let repr = UnitRepr {
        shape: chunks.clone(),
        dtype: meta.dtype.clone(),
        fill: meta.fill.clone(),
    };
    let chain = CodecChain::build(&meta.codecs, &repr).expect("codec chain builds");
    let grid: Vec<u64> = shape
        .iter()
        .zip(&chunks)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let chunk_elems: u64 = chunks.iter().product();
    let mut absent = std::collections::HashSet::new();
    let mut fill_only = std::collections::HashSet::new();
    for (n, idx) in first_indices(&grid, usize::MAX).into_iter().enumerate() {
        let bit = 1u64 << (n % 64);
        if case.missing & bit != 0 {
            absent.insert(idx);
            continue;
        }
        let only_fill = case.fill_only & bit != 0;
        let mut bytes = Vec::with_capacity(chunk_elems as usize * item);
        for p in 0..chunk_elems {
            let within = unravel(p, &chunks, &(0..chunks.len()).collect::<Vec<_>>());
            let global: Vec<u64> = idx
                .iter()
                .zip(&chunks)
                .zip(&within)
                .map(|((i, c), w)| i * c + w)
                .collect();
            if only_fill {
                bytes.extend_from_slice(&fill);
            } else if global.iter().zip(&shape).all(|(g, s)| g < s) {
                bytes.extend(element(flat(&global, &shape), item));
            } else {
                // Outside the array: must never show up in the file.
                bytes.extend(std::iter::repeat_n(0xab, item));
            }
        }
        if only_fill {
            fill_only.insert(idx.clone());
        }
        let encoded = chain.encode(UnitData::Fixed(bytes)).expect("chunk encodes");
        store.insert(meta.chunk_key(&idx), encoded);
    }

    // The reference file.
    let order = if case.file_order_f {
        Order::F
    } else {
        Order::C
    };
    let axes: Vec<usize> = match order {
        Order::C => (0..shape.len()).collect(),
        Order::F => (0..shape.len()).rev().collect(),
    };
    let elements: u64 = shape.iter().product();
    let mut reference = Vec::with_capacity(elements as usize * item);
    for e in 0..elements {
        let idx = unravel(e, &shape, &axes);
        let chunk: Vec<u64> = idx.iter().zip(&chunks).map(|(i, c)| i / c).collect();
        let mut value = if absent.contains(&chunk) || fill_only.contains(&chunk) {
            fill.clone()
        } else {
            element(flat(&idx, &shape), item)
        };
        if case.file_big {
            for part in value.chunks_mut(unit) {
                part.reverse();
            }
        }
        reference.extend(value);
    }

    let store: Arc<dyn Store> = Arc::new(store);
    let array = Arc::new(Array::open(meta, store).expect("array opens"));
    let cache = Arc::new(UnitCache::new(usize::from(case.cache_kib) << 10));
    let layout = Layout {
        order,
        big_endian: case.file_big,
    };
    let view = View::new(array, cache, layout).expect("view opens");
    let size = view.size();
    assert_eq!(size, reference.len() as u64, "file size");
    if std::env::var_os("ZARRFS_FUZZ_VERBOSE").is_some() {
        eprintln!(
            "view: v2 {} shape {shape:?} chunks {chunks:?} shard {} dtype {dtype} size {size} reads {}",
            case.v2,
            case.shard && !case.v2,
            case.reads.len()
        );
    }
    for read in &case.reads {
        let offset = if read.far {
            u64::MAX - u64::from(read.offset)
        } else {
            u64::from(read.offset) % (size + 9)
        };
        let len = usize::from(read.len % 2048);
        let expect: &[u8] = if offset >= size {
            &[]
        } else {
            let start = offset as usize;
            &reference[start..start + len.min(reference.len() - start)]
        };
        let mut buf = vec![0u8; len];
        let n = view
            .read_at(&Cursor::default(), offset, &mut buf)
            .expect("read_at succeeds");
        assert_eq!(&buf[..n], expect, "read_at({offset}, {len})");
        if let Some(slice) = view
            .read_in_place(&Cursor::default(), offset, len)
            .expect("read_in_place succeeds")
        {
            assert_eq!(slice.bytes(), expect, "read_in_place({offset}, {len})");
        }
        match view
            .read_now(&Cursor::default(), offset, &mut buf)
            .expect("read_now succeeds")
        {
            Now::InPlace(slice) => assert_eq!(slice.bytes(), expect, "read_now in place"),
            Now::Copied(n) => assert_eq!(&buf[..n], expect, "read_now({offset}, {len})"),
            Now::Later => {}
        }
    }
}

fn main() {
    afl::fuzz!(|case: Case| run(case));
}
