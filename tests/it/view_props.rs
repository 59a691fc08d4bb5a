//! Property tests of the flat view: for any small array (rank 0-4, zero-length axes, edge
//! chunks, missing chunks), data type, stored byte order, chunk memory order and
//! compressor, and for any file layout (C or F order, little- or big-endian), every
//! `View::read_at` (and every answer of `View::read_in_place`) over any `(offset, length)`,
//! past EOF and near 2^64 included, equals the slice of a reference flat array that this
//! test computes by itself: element order and byte swapping are done here, not by zarrfs.
//! Arrays are built with the public API only (an in-memory store, `ArrayMetadata`,
//! chunks encoded by `CodecChain`), through a chunk cache that is sometimes too small to
//! hold even one chunk, with or without the prefetch threads a mount uses.
//!
//! 10,000 cases per run by default (`PROPTEST_CASES` changes it).

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use zarrfs::codec::{CodecChain, UnitData, UnitRepr};
use zarrfs::metadata::dtype::Field;
use zarrfs::metadata::{ArrayMetadata, ChunkKeyEncoding, CodecSpec, DataType, FillValue, Format};
use zarrfs::read::array::Array;
use zarrfs::read::cache::UnitCache;
use zarrfs::read::prefetch::Prefetcher;
use zarrfs::read::readahead::Cursor;
use zarrfs::read::view::{Layout, Now, Order, View};
use zarrfs::store::MemoryStore;

/// The data types under test, with their byte-swap units as this test knows them:
/// `(offset, length)` of every multi-byte scalar inside one element.
fn data_types() -> Vec<(DataType, Vec<(usize, usize)>)> {
    let field = |name: &str, dtype, offset, shape: Vec<usize>| Field {
        name: name.into(),
        dtype,
        offset,
        shape,
    };
    vec![
        (DataType::UInt(1), vec![]),
        (DataType::Int(2), vec![(0, 2)]),
        (DataType::Float(4), vec![(0, 4)]),
        (DataType::Int(8), vec![(0, 8)]),
        (DataType::Complex(16), vec![(0, 8), (8, 8)]),
        (DataType::Raw(5), vec![]),
        (DataType::Utf32(3), vec![(0, 4), (4, 4), (8, 4)]),
        // 11 bytes: i2 at 0, u1 at 2, f4 at 3 (unaligned), a sub-array of two i2 at 7.
        (
            DataType::Struct(vec![
                field("a", DataType::Int(2), 0, vec![]),
                field("b", DataType::UInt(1), 2, vec![]),
                field("c", DataType::Float(4), 3, vec![]),
                field("d", DataType::Int(2), 7, vec![2]),
            ]),
            vec![(0, 2), (3, 4), (7, 2), (9, 2)],
        ),
    ]
}

/// A deterministic byte stream (splitmix64) for element values, fill values and junk.
fn bytes_from(seed: u64, n: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// The little-endian bytes of element `c_index` (its C-order position in the array).
fn element(seed: u64, c_index: u64, item: usize) -> Vec<u8> {
    bytes_from(seed ^ c_index.wrapping_mul(0xa076_1d64_78bd_642f), item)
}

/// Row-major position of `idx` in `shape`.
fn c_index(idx: &[u64], shape: &[u64]) -> u64 {
    idx.iter().zip(shape).fold(0, |acc, (i, s)| acc * s + i)
}

/// Every index of `shape`, in C order (the last axis fastest).
fn all_indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let total: u64 = shape.iter().product();
    (0..total)
        .map(|mut k| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = k % shape[d];
                k /= shape[d];
            }
            idx
        })
        .collect()
}

/// One generated array and how it is stored.
#[derive(Debug, Clone)]
struct Case {
    shape: Vec<u64>,
    chunks: Vec<u64>,
    dtype: usize,
    stored_big: bool,
    /// Chunks stored with their axes permuted (the `transpose` codec).
    transpose: Option<Vec<usize>>,
    /// 0 none, 1 zstd, 2 gzip.
    compressor: u8,
    v2_keys: bool,
    value_seed: u64,
    fill_seed: u64,
    /// Percent of chunks never written.
    missing_percent: u8,
    missing_seed: u64,
    /// 0: a few bytes (every unit evicted at once), 1: about one chunk, 2: 1 MiB.
    cache: u8,
    layouts: Vec<(bool, bool)>,
    /// Views decode ahead on the prefetch threads, as in a mount.
    prefetch: bool,
    /// (which view, offset kind (see `check`), raw offset, raw length, in place?)
    reads: Vec<(usize, u8, u64, u16, bool)>,
}

impl Case {
    /// The number of chunks along each dimension.
    fn grid(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunks)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }
}

fn case() -> impl Strategy<Value = Case> {
    (0usize..=4).prop_flat_map(|rank| {
        let dim = prop_oneof![1 => Just(0u64), 20 => 1u64..=6];
        let shape = proptest::collection::vec(dim, rank);
        let chunks = proptest::collection::vec(1u64..=7, rank);
        let transpose = prop_oneof![
            Just(None),
            Just((0..rank).collect::<Vec<usize>>())
                .prop_shuffle()
                .prop_map(Some),
        ];
        let layouts = proptest::collection::vec((any::<bool>(), any::<bool>()), 1..=2);
        let reads = proptest::collection::vec(
            (
                0usize..2,
                0u8..12,
                any::<u64>(),
                any::<u16>(),
                any::<bool>(),
            ),
            1..=10,
        );
        (
            (
                shape,
                chunks,
                0..data_types().len(),
                any::<bool>(),
                transpose,
            ),
            (0u8..3, any::<bool>(), any::<u64>(), any::<u64>()),
            (
                0u8..=100,
                any::<u64>(),
                0u8..3,
                layouts,
                reads,
                any::<bool>(),
            ),
        )
            .prop_map(
                |(
                    (shape, chunks, dtype, stored_big, transpose),
                    (compressor, v2_keys, value_seed, fill_seed),
                    (missing_percent, missing_seed, cache, layouts, reads, prefetch),
                )| Case {
                    shape,
                    chunks,
                    dtype,
                    stored_big,
                    transpose,
                    compressor,
                    v2_keys,
                    value_seed,
                    fill_seed,
                    missing_percent,
                    missing_seed,
                    cache,
                    layouts,
                    prefetch,
                    reads,
                },
            )
    })
}

/// The array of `case` in a memory store, and which chunks were written.
fn build(case: &Case) -> (Arc<Array>, Vec<bool>) {
    let (dtype, _) = data_types().swap_remove(case.dtype);
    let item = dtype.size().unwrap();
    let fill = FillValue::Fixed(bytes_from(case.fill_seed, item));
    let mut codecs = Vec::new();
    if let Some(order) = &case.transpose {
        codecs.push(CodecSpec::new("transpose", json!({ "order": order })));
    }
    let endian = if case.stored_big { "big" } else { "little" };
    codecs.push(CodecSpec::new("bytes", json!({ "endian": endian })));
    match case.compressor {
        1 => codecs.push(CodecSpec::new(
            "zstd",
            json!({"level": 1, "checksum": false}),
        )),
        2 => codecs.push(CodecSpec::new("gzip", json!({"level": 1}))),
        _ => {}
    }
    let meta = ArrayMetadata {
        format: Format::V3,
        meta_key: "arr/zarr.json".into(),
        shape: case.shape.clone(),
        chunk_shape: case.chunks.clone(),
        dtype: dtype.clone(),
        fill: fill.clone(),
        fill_json: Value::Null,
        data_prefix: "arr/".into(),
        key_encoding: if case.v2_keys {
            ChunkKeyEncoding::V2('.')
        } else {
            ChunkKeyEncoding::Default('/')
        },
        codecs: codecs.clone(),
        attributes: Map::new(),
        dimension_names: None,
        dtype_json: Value::Null,
        version: zarrfs::store::Version::Unknown,
    };
    let repr = UnitRepr {
        shape: case.chunks.clone(),
        dtype,
        fill,
    };
    let chain = CodecChain::build(&codecs, &repr).unwrap();
    let grid = case.grid();
    let mut store = MemoryStore::new();
    let mut present = Vec::new();
    for (k, cidx) in all_indices(&grid).into_iter().enumerate() {
        let roll = bytes_from(case.missing_seed ^ k as u64, 1)[0] as u32 * 100 / 256;
        let written = roll >= case.missing_percent as u32;
        present.push(written);
        if !written {
            continue;
        }
        // The chunk in C order; elements past the array's edge hold junk.
        let mut buf = Vec::new();
        for pos in all_indices(&case.chunks) {
            let global: Vec<u64> = pos
                .iter()
                .zip(&cidx)
                .zip(&case.chunks)
                .map(|((p, c), n)| c * n + p)
                .collect();
            if global.iter().zip(&case.shape).all(|(g, s)| g < s) {
                buf.extend(element(
                    case.value_seed,
                    c_index(&global, &case.shape),
                    item,
                ));
            } else {
                buf.extend(bytes_from(!case.value_seed ^ buf.len() as u64, item));
            }
        }
        let encoded = chain.encode(UnitData::Fixed(buf)).unwrap();
        store.insert(meta.chunk_key(&cidx), encoded);
    }
    let array = Array::open(Arc::new(meta), Arc::new(store)).unwrap();
    (Arc::new(array), present)
}

/// The expected file of `case` in `layout`, computed without zarrfs.
fn reference(case: &Case, present: &[bool], f_order: bool, big: bool) -> Vec<u8> {
    let (dtype, swap) = data_types().swap_remove(case.dtype);
    let item = dtype.size().unwrap();
    let fill = bytes_from(case.fill_seed, item);
    let grid = case.grid();
    // F order is C order over the reversed axes.
    let file_shape: Vec<u64> = if f_order {
        case.shape.iter().rev().copied().collect()
    } else {
        case.shape.clone()
    };
    let mut out = Vec::new();
    for file_idx in all_indices(&file_shape) {
        let idx: Vec<u64> = if f_order {
            file_idx.iter().rev().copied().collect()
        } else {
            file_idx
        };
        let cidx: Vec<u64> = idx.iter().zip(&case.chunks).map(|(i, c)| i / c).collect();
        let mut e = if present[c_index(&cidx, &grid) as usize] {
            element(case.value_seed, c_index(&idx, &case.shape), item)
        } else {
            fill.clone()
        };
        if big {
            for &(o, l) in &swap {
                e[o..o + l].reverse();
            }
        }
        out.extend(e);
    }
    out
}

/// Prefetch threads shared by every case.
fn prefetcher() -> Arc<Prefetcher> {
    static PREFETCHER: OnceLock<Arc<Prefetcher>> = OnceLock::new();
    PREFETCHER.get_or_init(|| Prefetcher::new(2)).clone()
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let (array, present) = build(case);
    let unit = array.unit_bytes().max(1);
    let budget = match case.cache {
        0 => 7,
        1 => unit + unit / 2,
        _ => 1 << 20,
    };
    let cache = Arc::new(UnitCache::new(budget));
    let mut views = Vec::new();
    for &(f_order, big_endian) in &case.layouts {
        let order = if f_order { Order::F } else { Order::C };
        let mut view =
            View::new(array.clone(), cache.clone(), Layout { order, big_endian }).unwrap();
        if case.prefetch {
            view = view.with_prefetch(prefetcher());
        }
        let expected = reference(case, &present, f_order, big_endian);
        prop_assert_eq!(view.size(), expected.len() as u64);
        views.push((view, expected));
    }
    for &(which, kind, raw, raw_len, in_place) in &case.reads {
        let (view, expected) = &views[which % views.len()];
        let size = expected.len() as u64;
        let item = size
            .checked_div(view.array().meta.shape.iter().product())
            .unwrap_or(1)
            .max(1);
        let elements = size / item;
        let (offset, len) = match kind {
            // Whole elements inside the file (what read_in_place can answer).
            0..=5 => (
                raw % elements.max(1) * item,
                ((1 + raw_len as u64 % elements.max(1)) * item) as usize,
            ),
            // Anywhere inside, splitting elements.
            6..=8 => (
                raw % size.max(1),
                1 + raw_len as usize % size.max(1) as usize,
            ),
            // Up to and past EOF.
            9 => (raw % (size + 24), raw_len as usize % (size as usize + 24)),
            10 => (u64::MAX - raw % 16, raw_len as usize % 64),
            _ => ((1u64 << 63) + raw % 16, raw_len as usize % 64),
        };
        let want: &[u8] = if offset < size {
            let end = offset.saturating_add(len as u64).min(size);
            &expected[offset as usize..end as usize]
        } else {
            &[]
        };
        if in_place {
            if let Some(slice) = view.read_in_place(&Cursor::default(), offset, len).unwrap() {
                prop_assert_eq!(slice.bytes(), want, "read_in_place({}, {})", offset, len);
            }
        }
        let mut buf = vec![0xa5u8; len];
        let n = view.read_at(&Cursor::default(), offset, &mut buf).unwrap();
        prop_assert_eq!(n, want.len(), "read_at({}, {}) length", offset, len);
        prop_assert_eq!(&buf[..n], want, "read_at({}, {})", offset, len);
        // What the cache holds now may answer the same read at once: right, or not at all.
        let mut now = vec![0x5au8; len];
        match view.read_now(&Cursor::default(), offset, &mut now).unwrap() {
            Now::InPlace(slice) => prop_assert_eq!(slice.bytes(), want, "read_now in place"),
            Now::Copied(n) => prop_assert_eq!(&now[..n], want, "read_now({}, {})", offset, len),
            Now::Later => {}
        }
    }
    // A last whole-file read, after the reads above may have evicted units.
    for (view, expected) in &views {
        let mut buf = vec![0u8; expected.len() + 3];
        let n = view.read_at(&Cursor::default(), 0, &mut buf).unwrap();
        prop_assert_eq!(&buf[..n], &expected[..], "whole file");
        // Streamed, written in place from the units and assembled, by a writer that
        // takes a few bytes at a time.
        for min_piece in [0, usize::MAX] {
            let mut out = Trickle::default();
            view.write_pieces(&mut out, 7 + case.value_seed as usize % 64, min_piece)
                .unwrap();
            prop_assert_eq!(&out.bytes, expected, "streamed, min_piece {}", min_piece);
        }
    }
    Ok(())
}

/// A writer that takes at most 5 bytes per write, from at most two slices.
#[derive(Default)]
struct Trickle {
    bytes: Vec<u8>,
}

impl std::io::Write for Trickle {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(5);
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice]) -> std::io::Result<usize> {
        let mut left = 5;
        for b in bufs.iter().take(2) {
            let n = b.len().min(left);
            self.bytes.extend_from_slice(&b[..n]);
            left -= n;
        }
        Ok(5 - left)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reads_equal_the_reference_flat_array(case in case()) {
        check(&case)?;
    }
}

/// A float32 array of `shape` in `chunks`, every chunk stored (uncompressed,
/// `stored_big`-endian, values from `seed`).
fn plain_case(shape: Vec<u64>, chunks: Vec<u64>, stored_big: bool, seed: u64) -> Case {
    Case {
        shape,
        chunks,
        dtype: 2,
        stored_big,
        transpose: None,
        compressor: 0,
        v2_keys: false,
        value_seed: seed,
        fill_seed: seed + 1,
        missing_percent: 0,
        missing_seed: 0,
        cache: 2,
        layouts: vec![(false, false)],
        prefetch: false,
        reads: vec![],
    }
}

/// A C-order little-endian view of [`plain_case`], and its expected bytes.
fn plain_view(shape: Vec<u64>, chunks: Vec<u64>, stored_big: bool, seed: u64) -> (View, Vec<u8>) {
    let case = plain_case(shape, chunks, stored_big, seed);
    let (array, present) = build(&case);
    assert!(present.iter().all(|p| *p));
    let view = View::new(array, Arc::new(UnitCache::new(1 << 20)), Layout::default()).unwrap();
    let expected = reference(&case, &present, false, false);
    (view, expected)
}

/// `read_in_place` does answer where a read lies contiguously in one stored chunk (so the
/// property above compares its answers, not only its refusals).
#[test]
fn read_in_place_answers_a_read_inside_one_chunk() {
    let (view, expected) = plain_view(vec![4, 6], vec![2, 6], true, 7);
    // Elements 6..12 are the second row, inside chunk (0, 0).
    let slice = view
        .read_in_place(&Cursor::default(), 24, 24)
        .unwrap()
        .expect("an in-place answer for one row of one chunk");
    assert_eq!(slice.bytes(), &expected[24..48]);
}

/// `read_now` answers only from decoded units: nothing before a read, the bytes of the
/// chunks a read decoded (in place inside one chunk, copied across two), and nothing for
/// a range that needs a chunk not decoded yet.
#[test]
fn read_now_answers_from_decoded_units_only() {
    let (view, expected) = plain_view(vec![6, 6], vec![2, 3], false, 3);
    let mut buf = vec![0u8; 24];
    assert!(matches!(
        view.read_now(&Cursor::default(), 0, &mut buf).unwrap(),
        Now::Later
    ));
    // Element 0 decodes chunk (0, 0) and nothing else.
    let mut one = vec![0u8; 4];
    assert_eq!(view.read_at(&Cursor::default(), 0, &mut one).unwrap(), 4);
    // Elements 1..3 of row 0 lie in chunk (0, 0); elements 6..8 start row 1 there too.
    let mut part = vec![0u8; 8];
    match view.read_now(&Cursor::default(), 4, &mut part).unwrap() {
        Now::Copied(n) => assert_eq!(&part[..n], &expected[4..12]),
        Now::InPlace(slice) => assert_eq!(slice.bytes(), &expected[4..12]),
        Now::Later => panic!("a range inside a decoded chunk was not answered"),
    }
    // Row 0 whole needs chunk (0, 1) as well.
    assert!(matches!(
        view.read_now(&Cursor::default(), 0, &mut buf).unwrap(),
        Now::Later
    ));
    assert_eq!(view.read_at(&Cursor::default(), 12, &mut one).unwrap(), 4);
    match view.read_now(&Cursor::default(), 0, &mut buf).unwrap() {
        Now::Copied(n) => assert_eq!(&buf[..n], &expected[..24]),
        _ => panic!("row 0 spans two decoded chunks: copied"),
    }
}

/// A front-to-back read cycles through one layer of units along the slowest file axis
/// that a unit spans more than one element of: a cache that holds the layer fetches each
/// chunk once; one that holds only the units of one file row fetches each chunk once per
/// element of that span, as `sequential_working_set` says.
#[test]
fn a_front_to_back_read_cycles_through_the_working_set_it_reports() {
    let case = |chunks: Vec<u64>| plain_case(vec![4, 6, 12], chunks, false, 5);
    // (chunks, order, units in the layer, span, units one file row touches, fetches of
    // each chunk with a cache of that row)
    let cases = [
        (vec![2, 3, 4], Order::C, 2 * 3, 2, 3, 2),
        (vec![2, 3, 4], Order::F, 2 * 2, 4, 2, 4),
        // The slowest axis is one element per unit: the layer is along the next one, and
        // it is one row of units.
        (vec![1, 2, 4], Order::C, 3, 2, 3, 1),
        (vec![1, 1, 12], Order::F, 6 * 4, 12, 4, 12),
    ];
    for (chunks, order, layer_units, span, row_units, cycles) in cases {
        let (array, _) = build(&case(chunks.clone()));
        let unit = array.unit_bytes();
        let layout = Layout {
            order,
            big_endian: false,
        };
        let fetched = |cache_units: usize| {
            let cache = Arc::new(UnitCache::new(cache_units * unit));
            let view = View::new(array.clone(), cache, layout).unwrap();
            let before = array.bytes_fetched();
            // One file row (along the fastest file axis) per read.
            let item = view.size() / (4 * 6 * 12);
            let row = item * if order == Order::C { 12 } else { 4 };
            let mut buf = vec![0u8; row as usize];
            let mut offset = 0;
            while offset < view.size() {
                offset += view.read_at(&Cursor::default(), offset, &mut buf).unwrap() as u64;
            }
            (
                view.sequential_working_set(),
                array.bytes_fetched() - before,
            )
        };
        let what = format!("{chunks:?} in {order:?} order");
        let (reported, once) = fetched(layer_units);
        assert_eq!(reported, ((layer_units * unit) as u64, span), "{what}");
        let stored = case(chunks.clone()).grid().iter().product::<u64>() * unit as u64;
        assert_eq!(once, stored, "{what}: a cache of the layer");
        let (_, cycled) = fetched(row_units);
        assert_eq!(
            cycled,
            cycles * stored,
            "{what}: a cache of one row of units"
        );
    }
}
