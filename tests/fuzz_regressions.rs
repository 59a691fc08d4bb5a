//! Regression tests for crashes of the fuzz targets (fuzz/, run by scripts/fuzz.sh): each
//! crashing input is written out here as JSON and bytes and run the way its target runs it.
//!
//! Like the fuzz targets, this test binary allocates through an allocator that refuses to
//! hold more than 1 GiB at once, so that an infallible allocation of a size taken from the
//! store aborts the binary (a loud failure) instead of passing on a machine with memory to
//! spare; fallible allocations (`try_reserve`) get an error, as on a machine under a
//! memory limit.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use zarrfs::codec::{CodecChain, UnitData, UnitRepr};
use zarrfs::metadata::{CodecSpec, DataType, FillValue};

const MEMORY_LIMIT: usize = 1 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);

struct CappedAlloc;

fn claim(size: usize) -> bool {
    LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
        live.checked_add(size).filter(|n| *n <= MEMORY_LIMIT)
    })
    .is_ok()
}

// SAFETY: every call is forwarded to `System`; only the byte count is tracked.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !claim(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(layout);
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !claim(new_size - old) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            LIVE.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

/// The codec_chain target's steps: a chain for a chunk of `shape` and `dtype` from v3
/// codec entries, then the decode of `chunk`.
fn decode(
    dtype: DataType,
    fill: FillValue,
    shape: &[u64],
    codecs: Value,
    chunk: &[u8],
) -> zarrfs::Result<UnitData> {
    let specs: Vec<CodecSpec> = codecs
        .as_array()
        .expect("codecs are a list")
        .iter()
        .map(|c| CodecSpec::from_v3(c, "test").expect("codec entry"))
        .collect();
    let repr = UnitRepr {
        shape: shape.to_vec(),
        dtype,
        fill,
    };
    let chain = CodecChain::build(&specs, &repr).expect("chain builds");
    chain.decode(chunk.to_vec())
}

fn decode_uint8(shape: &[u64], codecs: Value, chunk: &[u8]) -> zarrfs::Result<UnitData> {
    decode(
        DataType::UInt(1),
        FillValue::Fixed(vec![0]),
        shape,
        codecs,
        chunk,
    )
}

/// A chunk of 2^31 bytes: legitimate by metadata (under the 4 GiB chunk limit), larger
/// than this binary may allocate.
const BIG: [u64; 1] = [1 << 31];

#[test]
fn zstd_frame_whose_header_claims_two_gib_fails_without_allocating_them() {
    let codecs = json!([{"name": "bytes"}, {"name": "zstd"}]);
    // Magic, a single-segment frame header with an 8-byte content size of 2^31, and one
    // empty raw block marked last: the frame claims 2 GiB and holds nothing.
    let frame = b"\x28\xb5\x2f\xfd\xe0\x00\x00\x00\x80\x00\x00\x00\x00\x01\x00\x00";
    let err = decode_uint8(&BIG, codecs.clone(), frame).expect_err("a lying frame fails");
    assert!(err.to_string().contains("zstd"), "{err}");
    // The same chain still decodes an honest frame.
    let good = zstd::bulk::compress(&[7u8; 4096], 3).unwrap();
    let data = decode_uint8(&[4096], codecs, &good).unwrap();
    assert_eq!(data, UnitData::Fixed(vec![7u8; 4096]));
}

#[test]
fn lz4_size_prefix_claiming_two_gib_fails_without_allocating_them() {
    let codecs = json!([{"name": "bytes"}, {"name": "numcodecs.lz4"}]);
    // numcodecs' LZ4: a little-endian i32 size prefix (0x7d000000, just under LZ4's
    // largest block), then a block holding one literal.
    let block = b"\x00\x00\x00\x7d\x10\x41";
    let err = decode_uint8(&BIG, codecs.clone(), block).expect_err("a lying prefix fails");
    assert!(err.to_string().contains("lz4"), "{err}");
    // Honest blocks still decode, up to LZ4's best ratio (16 MiB of one byte: 255-fold).
    for n in [4096usize, 16 << 20] {
        let mut good = (n as i32).to_le_bytes().to_vec();
        good.extend(lz4::block::compress(&vec![9u8; n], None, false).unwrap());
        let data = decode_uint8(&[n as u64], codecs.clone(), &good).unwrap();
        assert_eq!(data, UnitData::Fixed(vec![9u8; n]));
    }
}

#[test]
fn blosc_header_claiming_two_gib_fails_without_allocating_them() {
    let codecs = json!([{"name": "bytes"}, {"name": "blosc"}]);
    // Blosc 1 header: version 2, format 1, flags 1 (byte shuffle), typesize 1,
    // nbytes 0x7fff0000, blocksize 65536, cbytes 20 (the whole buffer), then one block
    // start: valid as far as blosc_cbuffer_validate looks, and 2 GiB by its claim.
    let mut chunk = vec![2u8, 1, 1, 1];
    for v in [0x7fff_0000u32, 0x1_0000, 20] {
        chunk.extend(v.to_le_bytes());
    }
    chunk.extend([0u8; 4]);
    let err = decode_uint8(&BIG, codecs.clone(), &chunk).expect_err("a lying header fails");
    assert!(err.to_string().contains("blosc"), "{err}");
    // An honest chunk, compressed by c-blosc through the chain's encoder.
    let specs: Vec<CodecSpec> = codecs
        .as_array()
        .expect("codecs are a list")
        .iter()
        .map(|c| CodecSpec::from_v3(c, "test").expect("codec entry"))
        .collect();
    let repr = UnitRepr {
        shape: vec![4096],
        dtype: DataType::UInt(1),
        fill: FillValue::Fixed(vec![0]),
    };
    let chain = CodecChain::build(&specs, &repr).expect("chain builds");
    let good = chain
        .encode(UnitData::Fixed(vec![5u8; 4096]))
        .expect("blosc encodes");
    let data = decode_uint8(&[4096], codecs, &good).unwrap();
    assert_eq!(data, UnitData::Fixed(vec![5u8; 4096]));
}

#[test]
fn vlen_chunk_claiming_half_a_billion_elements_fails_without_reserving_them() {
    // A string chunk of 2^29 elements (8 bytes each by the metadata size rule: 4 GiB, the
    // largest allowed); its numcodecs vlen header names that count and holds nothing.
    let codecs = json!([{"name": "vlen-utf8"}]);
    let fill = FillValue::Var(Some(Vec::new()));
    let header = (1u32 << 29).to_le_bytes();
    let err = decode(
        DataType::String,
        fill.clone(),
        &[1 << 29],
        codecs.clone(),
        &header,
    )
    .expect_err("a count the chunk cannot hold fails");
    assert!(err.to_string().contains("vlen"), "{err}");
    // An honest chunk: 2 elements, "ab" and "".
    let good = b"\x02\x00\x00\x00\x02\x00\x00\x00ab\x00\x00\x00\x00";
    let data = decode(DataType::String, fill, &[2], codecs, good).unwrap();
    assert_eq!(
        data,
        UnitData::Var(vec![Some(b"ab".to_vec()), Some(Vec::new())])
    );
}

#[test]
fn whole_shard_of_empty_inner_chunks_larger_than_memory_fails_instead_of_aborting() {
    // A transpose before the sharding codec makes the chain decode whole shards. The
    // shard (2 GiB) holds two inner chunks, both empty (index entries all 0xff): decoding
    // it materializes 2 GiB of fill value, more than this binary may hold.
    let codecs = json!([
        {"name": "transpose", "configuration": {"order": [0]}},
        {"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1u64 << 30],
            "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        }},
    ]);
    let err = decode_uint8(&BIG, codecs.clone(), &[0xff; 32])
        .expect_err("a shard larger than memory fails");
    assert!(err.to_string().contains("out of memory"), "{err}");
    // The same layout for a small shard decodes to fill value.
    let small = json!([
        {"name": "transpose", "configuration": {"order": [0]}},
        {"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4],
            "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        }},
    ]);
    let fill = FillValue::Fixed(vec![3]);
    let data = decode(DataType::UInt(1), fill, &[8], small, &[0xff; 32]).unwrap();
    assert_eq!(data, UnitData::Fixed(vec![3; 8]));
}

#[test]
fn categorize_labels_cost_what_the_metadata_spells_not_the_declared_width() {
    // 300 labels for text of 2^20 characters: padded to the declared width they would
    // take 1.2 GiB, from 2 KiB of metadata.
    let fill = FillValue::Fixed(vec![0; 16]);
    let mut labels = vec![json!("a"), json!("bc")];
    labels.resize(300, json!(""));
    let codecs = |dtype: &str| {
        json!([
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "numcodecs.categorize",
             "configuration": {"dtype": dtype, "labels": labels, "astype": "|u1"}},
        ])
    };
    let chunk = [1u8, 2, 0, 1];
    // The declared width does not match the array's 4-character elements: an error.
    let wide = decode(
        DataType::Utf32(4),
        fill.clone(),
        &[4],
        codecs("<U1048576"),
        &chunk,
    );
    assert!(wide.is_err(), "{wide:?}");
    // The same labels at the array's width decode.
    let data = decode(DataType::Utf32(4), fill, &[4], codecs("<U4"), &chunk).unwrap();
    let text = |s: &str| -> Vec<u8> {
        let mut e: Vec<u8> = s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        e.resize(16, 0);
        e
    };
    let expected = [text("a"), text("bc"), text(""), text("a")].concat();
    assert_eq!(data, UnitData::Fixed(expected));
}

#[test]
fn stat_of_a_text_array_of_billions_of_missing_chunks_fails_at_once() {
    // Found as a hang of the metadata target: `lookup` of a vlen-utf8 array of shape
    // (55555555555555, 6) in chunks of (2, 4), none stored, rendered fill lines chunk by
    // chunk until the text limit, minutes later.
    use std::sync::Arc;
    use zarrfs::fs::{FsOptions, ZarrFs, ROOT};
    use zarrfs::hierarchy::Hierarchy;
    use zarrfs::store::MemoryStore;

    let mut store = MemoryStore::new();
    store.insert(".zgroup", br#"{"zarr_format": 2}"#.to_vec());
    let zarray = json!({
        "chunks": [2, 4], "compressor": null, "dtype": "|O", "fill_value": null,
        "filters": [{"id": "vlen-utf8"}], "order": "C", "shape": [55555555555555u64, 6],
        "zarr_format": 2
    });
    store.insert("big/.zarray", zarray.to_string().into_bytes());
    let h = Hierarchy::open(Arc::new(store)).expect("open");
    let options = FsOptions {
        layout: zarrfs::read::view::Layout::default(),
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: Default::default(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(h, options, "store.zarr");
    let started = std::time::Instant::now();
    // The node is listed (a file whose reads fail), as every node that cannot be shown.
    let attr = fs.lookup(ROOT, "big").expect("lookup");
    let err = fs
        .open(attr.ino)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("text view"), "open: {err:?}");
    println!("failed in {:?}", started.elapsed());
}
