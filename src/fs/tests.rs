//! The filesystem core without a mount, over the demo hierarchy.

use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::hierarchy::Hierarchy;
use crate::read::view::Order;
use crate::store::fixtures::{v2_group_with_array_a, write_v2_array};
use crate::store::FolderStore;
use crate::Error;

pub(super) fn demo_fs(order: Order, big_endian: bool) -> (std::path::PathBuf, ZarrFs) {
    let dir = std::env::temp_dir().join(format!(
        "zarrfs-fs-{}-{:?}-{order:?}-{big_endian}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    crate::hierarchy::demo::write(&dir).unwrap();
    let fs = fs_over(&dir, order, big_endian);
    (dir, fs)
}

/// The filesystem over the store at `dir`, with a 1 MiB cache and one prefetch thread.
pub(super) fn fs_over(dir: &std::path::Path, order: Order, big_endian: bool) -> ZarrFs {
    fs_with_views(dir, order, big_endian, "raw")
}

fn fs_with_views(dir: &std::path::Path, order: Order, big_endian: bool, views: &str) -> ZarrFs {
    let store = Arc::new(FolderStore::open(dir).unwrap());
    let options = FsOptions {
        layout: Layout { order, big_endian },
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: views.parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    ZarrFs::new(Hierarchy::open(store).unwrap(), options, "t.zarr")
}

fn names(fs: &ZarrFs, ino: u64) -> Vec<String> {
    fs.readdir(ino)
        .unwrap()
        .iter()
        .map(|e| e.name.clone())
        .collect()
}

#[test]
fn lookup_readdir_getattr_and_errors() {
    let (dir, fs) = demo_fs(Order::C, false);
    assert_eq!(
        names(&fs, ROOT),
        [
            ".group.json",
            ".temperature.json",
            "legacy",
            "surface",
            "temperature"
        ]
    );
    let legacy = fs.lookup(ROOT, "legacy").unwrap();
    assert_eq!((legacy.kind, legacy.perm), (FileKind::Directory, 0o555));
    assert_eq!(
        names(&fs, legacy.ino),
        [".counts.json", ".group.json", "counts"]
    );
    let temp = fs.lookup(ROOT, "temperature").unwrap();
    assert_eq!(
        (temp.kind, temp.perm, temp.size),
        (FileKind::File, 0o444, 24 * 90 * 180 * 4)
    );
    // Stable inode numbers: lookup again and via readdir.
    assert_eq!(fs.lookup(ROOT, "temperature").unwrap().ino, temp.ino);
    let listed = fs.readdir(ROOT).unwrap();
    assert!(listed
        .iter()
        .any(|e| e.name == "temperature" && e.ino == temp.ino));
    assert_eq!(fs.parent(legacy.ino).unwrap(), ROOT);
    for missing in ["nope", ".nope.json", "..", "a/b"] {
        let err = fs.lookup(ROOT, missing).unwrap_err();
        assert_eq!(err.errno(), libc::ENOENT, "{missing}");
    }
    assert_eq!(fs.getattr(9999).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(
        fs.getxattr(temp.ino, "user.nope").unwrap_err().errno(),
        libc::ENODATA
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn reads_xattrs_and_sidecars() {
    let (dir, fs) = demo_fs(Order::F, true);
    let counts_dir = fs.lookup(ROOT, "legacy").unwrap().ino;
    let counts = fs.lookup(counts_dir, "counts").unwrap();
    fs.open(counts.ino).unwrap();
    // counts[i][j] = (100 i + j) * 7 % 1000, as the demo writes it; F order, big-endian.
    let all = fs
        .read(fs.open(counts.ino).unwrap(), 0, counts.size as usize + 10)
        .unwrap();
    assert_eq!(all.len(), 40_000);
    let at =
        |i: usize, j: usize| u32::from_be_bytes(all[(j * 100 + i) * 4..][..4].try_into().unwrap());
    for (i, j) in [(0, 0), (3, 7), (99, 99), (42, 1)] {
        assert_eq!(at(i, j), ((i * 100 + j) * 7 % 1000) as u32, "({i}, {j})");
    }
    // Reads at and past the end, and one that splits an element.
    assert!(fs
        .read(fs.open(counts.ino).unwrap(), 40_000, 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        fs.read(fs.open(counts.ino).unwrap(), 39_998, 10).unwrap(),
        all[39_998..]
    );
    assert_eq!(
        fs.read(fs.open(counts.ino).unwrap(), 4_001, 6).unwrap(),
        all[4_001..4_007]
    );
    let xattr = |name: &str| String::from_utf8(fs.getxattr(counts.ino, name).unwrap()).unwrap();
    assert_eq!(xattr("user.zarr.shape"), "100,100");
    assert_eq!(xattr("user.zarr.dtype"), ">u4");
    assert_eq!(xattr("user.zarr.order"), "F");
    assert_eq!(xattr("user.zarr.zarr_format"), "3");
    assert!(xattr("user.zarrfs.bytes_fetched").parse::<u64>().unwrap() > 0);
    let sidecar = fs.lookup(counts_dir, ".counts.json").unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&fs.read(fs.open(sidecar.ino).unwrap(), 0, 1 << 20).unwrap())
            .unwrap();
    assert_eq!(doc["shape"], serde_json::json!([100, 100]));
    assert_eq!(doc["file"]["dtype"], ">u4");
    assert_eq!(doc["attributes"]["description"], "a Zarr v2 array");
    let group = fs.lookup(counts_dir, ".group.json").unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&fs.read(fs.open(group.ino).unwrap(), 0, 1 << 20).unwrap()).unwrap();
    assert_eq!(doc["kind"], "implicit group");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn reads_inside_one_unit_are_served_in_place() {
    // uint16 (6, 5, 7), element value = C-order index. Chunks (2, 5, 7) are contiguous in
    // a C-order file, chunks (6, 5, 2) in an F-order one.
    let dir = std::env::temp_dir().join(format!("zarrfs-inplace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data: Vec<u8> = (0u16..210).flat_map(|v| v.to_le_bytes()).collect();
    for (name, chunks) in [("rows", [2, 5, 7]), ("cols", [6, 5, 2])] {
        let doc = serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [6, 5, 7], "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        });
        crate::hierarchy::demo::v3_array(&dir, name, doc, &data).unwrap();
    }
    for (order, contiguous) in [(Order::C, "rows"), (Order::F, "cols")] {
        for big_endian in [false, true] {
            let fs = fs_over(&dir, order, big_endian);
            for name in ["rows", "cols"] {
                let ino = fs.lookup(ROOT, name).unwrap().ino;
                let fh = fs.open(ino).unwrap();
                let whole = fs.read(fh, 0, 420).unwrap();
                // The file's element at file position e, from the C-order index.
                let value = |e: usize| {
                    let (i, j, k) = match order {
                        Order::C => (e / 35, e / 7 % 5, e % 7),
                        Order::F => (e % 6, e / 6 % 5, e / 30),
                    };
                    (i * 35 + j * 7 + k) as u16
                };
                let expect: Vec<u8> = (0..210)
                    .flat_map(|e| match big_endian {
                        false => value(e).to_le_bytes(),
                        true => value(e).to_be_bytes(),
                    })
                    .collect();
                assert_eq!(whole, expect, "{name} {order:?} {big_endian}");
                let mut in_place = 0;
                for offset in (0..430).step_by(6) {
                    for len in [2, 10, 70, 140, 500] {
                        let got = fs.read_in_place(fh, offset, len).unwrap();
                        if let Some(slice) = got {
                            in_place += 1;
                            let end = (offset as usize + len).min(420);
                            assert_eq!(slice.bytes(), &expect[offset as usize..end]);
                        }
                    }
                }
                // The second unit whole goes in place only where units are contiguous in
                // the file; a range across two units never does.
                let unit = if name == "rows" { 140 } else { 120 };
                let unit_whole = fs.read_in_place(fh, unit, unit as usize).unwrap();
                assert_eq!(unit_whole.is_some(), name == contiguous, "{name} {order:?}");
                assert!(fs.read_in_place(fh, unit - 10, 20).unwrap().is_none());
                assert!(in_place > 0, "{name} {order:?}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unusable_nodes_fail_alone_and_fill_chunks_are_not_materialized() {
    let dir = std::env::temp_dir().join(format!("zarrfs-badnodes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let doc = |dtype: serde_json::Value, shape: serde_json::Value, chunks: serde_json::Value| {
        serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 7, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        })
    };
    let data: Vec<u8> = (0u16..30).flat_map(|v| v.to_le_bytes()).collect();
    let small = doc(
        "uint16".into(),
        serde_json::json!([6, 5]),
        serde_json::json!([4, 4]),
    );
    crate::hierarchy::demo::v3_array(&dir, "good", small, &data).unwrap();
    let write = |name: &str, text: &str| {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("zarr.json"), text).unwrap();
    };
    write("bad_json", "{\"zarr_format\": 3, ");
    let huge = doc(
        "r8000000000".into(),
        serde_json::json!([4]),
        serde_json::json!([4]),
    );
    write("huge_dtype", &huge.to_string());
    std::fs::create_dir_all(dir.join("fifo")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("fifo/zarr.json").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // 4 GiB of uint32 fill value in 1 GiB chunks, none written.
    let big = doc(
        "uint32".into(),
        serde_json::json!([1u64 << 20, 1024]),
        serde_json::json!([1u64 << 18, 1024]),
    );
    write("empty", &big.to_string());
    // Chunks of 2^62 bytes: never written ones read as fill, a written one fails alone.
    let vast = doc(
        "uint32".into(),
        serde_json::json!([10, 12]),
        serde_json::json!([1u64 << 40, 1u64 << 20]),
    );
    write("vast", &vast.to_string());
    write("vast_written", &vast.to_string());
    std::fs::create_dir_all(dir.join("vast_written/c/0")).unwrap();
    std::fs::write(dir.join("vast_written/c/0/0"), [0u8; 16]).unwrap();

    let fs = fs_over(&dir, Order::C, false);
    let listed = names(&fs, ROOT);
    for name in ["bad_json", "huge_dtype", "fifo", "good", "empty"] {
        assert!(listed.contains(&name.to_string()), "{name} in {listed:?}");
    }
    for (name, key) in [
        ("bad_json", "bad_json/zarr.json"),
        ("huge_dtype", "huge_dtype/zarr.json"),
        ("fifo", "fifo/zarr.json"),
    ] {
        let attr = fs.lookup(ROOT, name).unwrap();
        assert_eq!(attr.kind, FileKind::File, "{name}");
        let err = fs.open(attr.ino).unwrap_err();
        assert_eq!(err.errno(), libc::EIO, "{name}: {err}");
        assert!(err.to_string().contains(key), "{name}: {err}");
    }
    let good = fs.lookup(ROOT, "good").unwrap();
    assert_eq!(fs.read(fs.open(good.ino).unwrap(), 0, 100).unwrap(), data);
    for offset in [60, 61, 1 << 40, u64::MAX - 10, u64::MAX] {
        assert!(
            fs.read(fs.open(good.ino).unwrap(), offset, 4096)
                .unwrap()
                .is_empty(),
            "{offset}"
        );
    }
    let empty = fs.lookup(ROOT, "empty").unwrap();
    assert_eq!(empty.size, 4 << 30);
    for offset in [
        0,
        (1 << 30) - 6,
        (3 << 30) + 12345 * 4,
        (4 << 30) - (1 << 20),
    ] {
        let got = fs
            .read(fs.open(empty.ino).unwrap(), offset, 1 << 20)
            .unwrap();
        assert_eq!(got.len(), 1 << 20);
        let fill = 7u32.to_le_bytes();
        let at = |i: usize| fill[(offset as usize + i) % 4];
        assert!(got.iter().enumerate().all(|(i, b)| *b == at(i)), "{offset}");
    }
    assert!(fs.cache.used() < 1 << 20, "cache holds {}", fs.cache.used());
    let vast = fs.lookup(ROOT, "vast").unwrap();
    assert_eq!(
        fs.read(fs.open(vast.ino).unwrap(), 0, 1000).unwrap(),
        7u32.to_le_bytes().repeat(120)
    );
    let written = fs.lookup(ROOT, "vast_written").unwrap();
    let err = fs.read(fs.open(written.ino).unwrap(), 0, 8).unwrap_err();
    assert!(err.to_string().contains("vast_written/c/0/0"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A read of the whole file `ino`.
fn whole(fs: &ZarrFs, ino: u64) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size;
    fs.read(fs.open(ino).unwrap(), 0, size as usize).unwrap()
}

#[test]
fn views_list_beside_the_raw_file_and_serve_its_bytes_behind_their_headers() {
    let (dir, _) = demo_fs(Order::C, false);
    for (order, big) in [(Order::C, false), (Order::F, true)] {
        let fs = fs_with_views(&dir, order, big, "all");
        let legacy = fs.lookup(ROOT, "legacy").unwrap().ino;
        let mut expected = vec![
            ".counts.json",
            ".group.json",
            "counts",
            "counts.hdr",
            "counts.mhd",
            "counts.nhdr",
            "counts.npy",
            "counts.tif",
            "counts.vrt",
        ];
        if order == Order::F {
            // TIFF pages are C order only.
            expected.retain(|n| *n != "counts.tif");
        }
        assert_eq!(names(&fs, legacy), expected, "{order:?}");
        let raw = fs.lookup(legacy, "counts").unwrap();
        let raw_bytes = whole(&fs, raw.ino);
        let npy = fs.lookup(legacy, "counts.npy").unwrap();
        let npy_bytes = whole(&fs, npy.ino);
        let header_len = npy.size as usize - raw_bytes.len();
        assert_eq!(header_len % 64, 0);
        assert_eq!(&npy_bytes[..6], b"\x93NUMPY");
        assert_eq!(&npy_bytes[header_len..], &raw_bytes[..]);
        let header = String::from_utf8_lossy(&npy_bytes[10..header_len]).into_owned();
        let fortran = if order == Order::F { "True" } else { "False" };
        let descr = if big { ">u4" } else { "<u4" };
        assert!(
            header.starts_with(&format!(
                "{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': (100, 100), }}"
            )),
            "{header}"
        );
        // Reads at any offset and length, across the header's end and past EOF.
        let mut rng = 0x2545f4914f6cdd1du64;
        for _ in 0..300 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let offset = rng % (npy.size + 100);
            let len = (rng >> 32) as usize % 5000;
            let got = fs.read(fs.open(npy.ino).unwrap(), offset, len).unwrap();
            let from = (offset as usize).min(npy_bytes.len());
            let to = (from + len).min(npy_bytes.len());
            assert_eq!(got, &npy_bytes[from..to], "read {offset}+{len}");
        }
        // Both files share one view: reading the .npy fetched nothing more.
        let fetched = |ino| fs.getxattr(ino, "user.zarrfs.bytes_fetched").unwrap();
        assert_eq!(fetched(raw.ino), fetched(npy.ino));
        let report = String::from_utf8(fs.getxattr(raw.ino, "user.zarrfs.views").unwrap()).unwrap();
        assert!(report.contains("npy: counts.npy"), "{report}");
        if order == Order::F {
            assert!(
                report.contains("tiff: absent (TIFF pages are C order"),
                "{report}"
            );
            assert_eq!(
                fs.lookup(legacy, "counts.tif").unwrap_err().errno(),
                libc::ENOENT
            );
        }
        let nhdr = fs.lookup(legacy, "counts.nhdr").unwrap();
        let text = String::from_utf8(whole(&fs, nhdr.ino)).unwrap();
        let endian = if big { "endian: big" } else { "endian: little" };
        assert!(
            text.contains("data file: counts\n") && text.contains(endian),
            "{text}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn views_without_raw_hide_it_and_real_nodes_win_over_view_names() {
    let (dir, _) = demo_fs(Order::C, false);
    // A group named like the view of an array: the group is shown, not the view.
    std::fs::create_dir(dir.join("temperature.npy")).unwrap();
    std::fs::write(
        dir.join("temperature.npy/zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    )
    .unwrap();
    let fs = fs_with_views(&dir, Order::C, false, "npy,tiff");
    let listed = names(&fs, ROOT);
    assert!(!listed.contains(&"temperature".to_string()), "{listed:?}");
    assert!(
        listed.contains(&"temperature.tif".to_string()),
        "{listed:?}"
    );
    assert_eq!(listed.iter().filter(|n| *n == "temperature.npy").count(), 1);
    let npy = fs.lookup(ROOT, "temperature.npy").unwrap();
    assert_eq!(npy.kind, FileKind::Directory);
    assert_eq!(
        fs.lookup(ROOT, "temperature").unwrap_err().errno(),
        libc::ENOENT
    );
    // The TIFF's first page, put together from its tiles, is the raw file's first plane.
    let tif = fs.lookup(ROOT, "temperature.tif").unwrap();
    let bytes = whole(&fs, tif.ino);
    assert_eq!(&bytes[..4], b"II*\0");
    let (rows, cols, item) = (90usize, 180usize, 4usize);
    let first = |tag: u16| tiff_values(&bytes, tag)[0].clone();
    let (tw, th) = (first(322)[0] as usize, first(323)[0] as usize);
    let across = cols.div_ceil(tw);
    let mut page = vec![0u8; rows * cols * item];
    for (t, &at) in first(324).iter().enumerate() {
        let (ty, tx) = (t / across, t % across);
        for r in 0..th {
            let y = ty * th + r;
            let x = tx * tw;
            if y >= rows {
                break;
            }
            let n = tw.min(cols - x) * item;
            let from = at as usize + r * tw * item;
            page[(y * cols + x) * item..][..n].copy_from_slice(&bytes[from..from + n]);
        }
    }
    let raw_fs = fs_over(&dir, Order::C, false);
    let raw = raw_fs.lookup(ROOT, "temperature").unwrap();
    assert_eq!(&page[..], &whole(&raw_fs, raw.ino)[..rows * cols * item]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The values of entry `tag` (SHORT, LONG or LONG8) in each IFD of the little-endian
/// TIFF or BigTIFF whose first bytes are `head`, IFD after IFD.
fn tiff_values(head: &[u8], tag: u16) -> Vec<Vec<u64>> {
    let uint = |at: usize, n: usize| {
        head[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b))
    };
    let big = head[2] == 43;
    let (count_len, entry_len, word) = if big { (8, 20, 8) } else { (2, 12, 4) };
    let mut ifd = uint(if big { 8 } else { 4 }, word) as usize;
    let mut out = Vec::new();
    while ifd != 0 {
        let n = uint(ifd, count_len) as usize;
        let mut values = Vec::new();
        for e in 0..n {
            let at = ifd + count_len + e * entry_len;
            if uint(at, 2) != u64::from(tag) {
                continue;
            }
            let size = match uint(at + 2, 2) {
                3 => 2,
                4 => 4,
                _ => 8,
            };
            let count = uint(at + 4, word) as usize;
            let base = if count * size <= word {
                at + 4 + word
            } else {
                uint(at + 4 + word, word) as usize
            };
            values = (0..count).map(|i| uint(base + i * size, size)).collect();
        }
        out.push(values);
        ifd = uint(ifd + count_len + n * entry_len, word) as usize;
    }
    out
}

#[test]
fn a_tiff_past_4_gib_is_bigtiff_and_its_data_reads_as_fill() {
    let mut store = crate::store::MemoryStore::new();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [3, 40000, 40000],
        "data_type": "uint8", "chunk_grid": {"name": "regular",
            "configuration": {"chunk_shape": [1, 4000, 4000]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 7,
        "codecs": [{"name": "bytes"}]
    });
    store.insert("huge/zarr.json", meta.to_string().into_bytes());
    store.insert(
        "zarr.json",
        br#"{"zarr_format": 3, "node_type": "group"}"#.to_vec(),
    );
    let options = FsOptions {
        layout: Layout::default(),
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "tiff".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(Hierarchy::open(Arc::new(store)).unwrap(), options, "t.zarr");
    assert_eq!(names(&fs, ROOT), [".group.json", ".huge.json", "huge.tif"]);
    let tif = fs.lookup(ROOT, "huge.tif").unwrap();
    // Chunks of 4000 x 4000: tiles of 1024 x 1024 (at most 1024 on a side), 40 x 40 a
    // page, those past the plane's 40,000 padded with zeros.
    let (tile, tiles) = (1024 * 1024u64, 3 * 40 * 40u64);
    let header_len = tif.size - tiles * tile;
    assert_eq!(header_len % 4096, 0);
    let head = fs.read(fs.open(tif.ino).unwrap(), 0, 16).unwrap();
    assert_eq!(&head[..8], &[b'I', b'I', 43, 0, 8, 0, 0, 0]);
    assert_eq!(u64::from_le_bytes(head[8..16].try_into().unwrap()), 16);
    // Three pages, their tiles one after another after the header.
    let header = fs
        .read(fs.open(tif.ino).unwrap(), 0, header_len as usize)
        .unwrap();
    let offsets: Vec<Vec<u64>> = tiff_values(&header, 324);
    assert_eq!(offsets.len(), 3);
    let all: Vec<u64> = offsets.concat();
    let want: Vec<u64> = (0..tiles).map(|t| header_len + t * tile).collect();
    assert!(all == want, "tile offsets");
    assert!(tiff_values(&header, 325)
        .concat()
        .iter()
        .all(|&n| n == tile));
    // The fill value inside the plane; the last tile's last rows are padding.
    let start = fs
        .read(fs.open(tif.ino).unwrap(), header_len, 4096)
        .unwrap();
    assert_eq!(start, vec![7u8; 4096]);
    let tail = fs
        .read(fs.open(tif.ino).unwrap(), tif.size - 4096, 8192)
        .unwrap();
    assert_eq!(tail, vec![0u8; 4096]);
}

#[test]
fn sequential_reads_hint_the_store_about_the_shards_and_chunks_to_come() {
    let (dir, _) = demo_fs(Order::C, false);
    let (store, fs) = counted_fs(&dir, 1 << 20, 1);
    for (group, name, prefix) in [
        ("surface", "elevation", "surface/elevation/c/"),
        ("", "temperature", "temperature/c/"),
    ] {
        let parent = if group.is_empty() {
            ROOT
        } else {
            fs.lookup(ROOT, group).unwrap().ino
        };
        let file = fs.lookup(parent, name).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut offset = 0;
        let fh = fs.open(file.ino).unwrap();
        while offset < file.size {
            offset += fs.read_into(fh, offset, &mut buf).unwrap() as u64;
        }
        // Hints are given on a thread of their own: wait for them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let hinted = loop {
            let hinted: Vec<String> = store
                .hints
                .lock()
                .iter()
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect();
            if !hinted.is_empty() || std::time::Instant::now() > deadline {
                break hinted;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(!hinted.is_empty(), "{name}: no hints");
        // A shard is hinted once however many of its inner chunks are queued (a chunk
        // may be hinted again when this small cache evicted it before it was read).
        if name == "elevation" {
            let mut unique = hinted.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), hinted.len(), "{name}: a shard hinted twice");
        }
        for key in &hinted {
            assert!(
                dir.join(key).is_file(),
                "{name}: hinted {key}, which is no stored value"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cache_size_suggested_for_a_working_set_keeps_it() {
    for kept in [1u64, 100 << 20, 256 << 20, 1 << 30, 5 << 30] {
        let size = cache_size_keeping(kept);
        assert!(cached_bytes(size as usize) as u64 >= kept, "{kept}");
    }
}

/// A folder store that counts the reads of each key and records the keys it is told
/// will be read.
struct Counted {
    inner: FolderStore,
    reads: parking_lot::Mutex<std::collections::HashMap<String, usize>>,
    hints: parking_lot::Mutex<Vec<String>>,
}

impl crate::store::Store for Counted {
    fn read(
        &self,
        key: &str,
        range: Option<crate::store::ByteRange>,
    ) -> crate::error::Result<Option<crate::store::Value>> {
        *self.reads.lock().entry(key.to_string()).or_default() += 1;
        self.inner.read(key, range)
    }
    fn list_dir(&self, prefix: &str) -> crate::error::Result<crate::store::Listing> {
        self.inner.list_dir(prefix)
    }
    fn head(&self, key: &str) -> crate::error::Result<Option<crate::store::Head>> {
        self.inner.head(key)
    }
    fn will_need(&self, key: &str) {
        self.hints.lock().push(key.to_string());
    }
    fn caps(&self) -> crate::store::Caps {
        self.inner.caps()
    }
}

/// The filesystem (raw files, C order) over a [`Counted`] store of the folder `dir`.
fn counted_fs(
    dir: &std::path::Path,
    cache_bytes: usize,
    prefetch_threads: usize,
) -> (Arc<Counted>, ZarrFs) {
    let store = Arc::new(Counted {
        inner: FolderStore::open(dir).unwrap(),
        reads: Default::default(),
        hints: Default::default(),
    });
    let options = FsOptions {
        layout: Layout::default(),
        cache_bytes,
        prefetch_threads,
        views: "raw".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(Hierarchy::open(store.clone()).unwrap(), options, "t.zarr");
    (store, fs)
}

/// Poll `ready` until it holds or 20 s pass (prefetch runs on threads of its own).
fn eventually(mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[test]
fn two_sequential_readers_of_one_array_each_keep_their_readahead() {
    // float32 (4 Mi,) in 64 chunks of 256 KiB, uncompressed: each chunk read is a decode.
    let dir = std::env::temp_dir().join(format!("zarrfs-readers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let n = 4u32 << 20;
    let data: Vec<u8> = (0..n).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let doc = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [n], "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [65536]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    crate::hierarchy::demo::v3_array(&dir, "a", doc, &data).unwrap();
    // Both readers' windows fit the cache.
    let (store, fs) = counted_fs(&dir, 256 << 20, 2);
    let ino = fs.lookup(ROOT, "a").unwrap().ino;
    let (a, b) = (fs.open(ino).unwrap(), fs.open(ino).unwrap());
    let half = data.len() as u64 / 2;
    let block = 64 << 10;
    // Interleaved: a from the start, b from the middle, 64 KiB at a time.
    for i in 0..8u64 {
        for (fh, start) in [(a, 0), (b, half)] {
            let at = start + i * block;
            let got = fs.read(fh, at, block as usize).unwrap();
            assert_eq!(got, data[at as usize..(at + block) as usize]);
        }
    }
    // Each reader's window runs ahead of it: the unit each reads next is decoded without
    // being asked for, and the read is answered from memory alone (with one cursor for
    // both, each read reset the other's window and nothing ran ahead).
    let mut buf = vec![0u8; block as usize];
    for (fh, start) in [(a, 0), (b, half)] {
        let next = start + 8 * block;
        let ready = eventually(|| !matches!(fs.read_now(fh, next, &mut buf), Ok(Now::Later)));
        assert!(ready, "nothing decoded ahead of the reader at {start}");
        let got = fs.read(fh, next, block as usize).unwrap();
        assert_eq!(got, data[next as usize..(next + block) as usize]);
    }
    // Both read on to the end of their halves: no unit is decoded twice.
    for (fh, start) in [(a, 0), (b, half)] {
        let mut at = start + 9 * block;
        while at < start + half {
            let got = fs.read(fh, at, block as usize).unwrap();
            assert_eq!(got, data[at as usize..(at + block) as usize]);
            at += block;
        }
    }
    let reads = store.reads.lock();
    let chunks: Vec<(&String, &usize)> = reads.iter().filter(|(k, _)| k.contains("/c/")).collect();
    assert_eq!(chunks.len(), 64, "chunks read: {chunks:?}");
    let twice: Vec<_> = chunks.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "read more than once: {twice:?}");
    drop(reads);
    fs.release(a);
    fs.release(b);
    assert_eq!(fs.open_count(), 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn forgotten_inodes_go_and_their_names_find_them_again_under_their_numbers() {
    let (dir, fs) = demo_fs(Order::C, false);
    let before = fs.inode_count();
    let first = fs.lookup(ROOT, "temperature").unwrap();
    assert_eq!(fs.lookup(ROOT, "temperature").unwrap().ino, first.ino);
    assert_eq!(fs.inode_count(), before + 1);
    // One of the kernel's two lookups dropped: the inode stays.
    fs.forget(first.ino, 1);
    assert!(fs.getattr(first.ino).is_ok());
    // An open file keeps its content past the forget of its inode.
    let fh = fs.open(first.ino).unwrap();
    fs.forget(first.ino, 1);
    assert!(matches!(fs.getattr(first.ino), Err(Error::NotFound(_))));
    assert_eq!(fs.inode_count(), before);
    assert_eq!(fs.read(fh, 0, 4).unwrap().len(), 4);
    fs.release(fh);
    let again = fs.lookup(ROOT, "temperature").unwrap();
    assert_eq!(again, first, "the same number, generation and size");
    // The root is never forgotten.
    fs.forget(ROOT, 10);
    assert!(fs.getattr(ROOT).is_ok());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_format_from_one_file_and_one_registry_line_builds_a_file_of_two_arrays() {
    let dir = std::env::temp_dir().join(format!("zarrfs-concat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("pair")).unwrap();
    std::fs::write(dir.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    std::fs::write(dir.join("pair/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    std::fs::write(dir.join("pair/.zattrs"), r#"{"title": "two arrays"}"#).unwrap();
    let a: Vec<u8> = [1i16, -2, 300]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let b = vec![7u8, 8, 9, 10];
    write_v2_array(&dir.join("pair/a"), "<i2", 3, &a);
    write_v2_array(&dir.join("pair/b"), "|u1", 4, &b);
    // A group with one array has no such file.
    write_v2_array(&dir.join("single/only"), "|u1", 2, &[1, 2]);
    std::fs::write(dir.join("single/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();

    let fs = fs_with_views(&dir, Order::C, false, "raw,concat");
    let listed = names(&fs, ROOT);
    assert!(listed.contains(&"pair.cat".to_string()), "{listed:?}");
    assert!(!listed.contains(&"single.cat".to_string()), "{listed:?}");
    assert_eq!(
        fs.lookup(ROOT, "single.cat").unwrap_err().errno(),
        libc::ENOENT
    );
    let cat = fs.lookup(ROOT, "pair.cat").unwrap();
    let mut expected = b"CAT two arrays\n".to_vec();
    expected.extend_from_slice(&a);
    expected.extend_from_slice(&b);
    expected.extend_from_slice(&a);
    assert_eq!(cat.size, expected.len() as u64);
    let fh = fs.open(cat.ino).unwrap();
    assert_eq!(fs.read(fh, 0, 4096).unwrap(), expected);
    // Every offset and length, across the pieces' edges and past the end.
    for offset in 0..=expected.len() as u64 + 2 {
        for len in 0..=expected.len() + 2 {
            let got = fs.read(fh, offset, len).unwrap();
            let from = (offset as usize).min(expected.len());
            let to = (from + len).min(expected.len());
            assert_eq!(got, &expected[from..to], "read {offset}+{len}");
        }
    }
    fs.release(fh);
    // The arrays' bytes come from their raw files' shared views.
    let group = fs.lookup(ROOT, "pair").unwrap().ino;
    let raw_a = fs.lookup(group, "a").unwrap().ino;
    assert_eq!(whole(&fs, raw_a), a);
    // Without the format listed, no such file.
    let plain = fs_over(&dir, Order::C, false);
    assert!(!names(&plain, ROOT).contains(&"pair.cat".to_string()));
    assert_eq!(
        plain.lookup(ROOT, "pair.cat").unwrap_err().errno(),
        libc::ENOENT
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_read_again_after_a_change_is_a_new_inode_and_the_old_keeps_its_bytes() {
    let dir = std::env::temp_dir().join(format!("zarrfs-reread-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    write_v2_array(&dir.join("g/a"), "|u1", 3, &[1, 2, 3]);
    std::fs::write(dir.join("g/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    // Under an interval of an hour: only `zarrfs refresh` reads the store again.
    let store = Arc::new(FolderStore::open(&dir).unwrap());
    let hierarchy = Hierarchy::open(store)
        .unwrap()
        .with_refresh(Some(std::time::Duration::from_secs(3600)));
    let options = FsOptions {
        layout: Layout {
            order: Order::C,
            big_endian: false,
        },
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "raw".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(hierarchy, options, "t.zarr");
    let group = fs.lookup(ROOT, "g").unwrap();
    let old = fs.lookup(group.ino, "a").unwrap();
    assert_eq!(old.size, 3);
    let fh = fs.open(old.ino).unwrap();
    // The array grows by a chunk in the store; `zarrfs refresh` of the group.
    let zarray = std::fs::read_to_string(dir.join("g/a/.zarray")).unwrap();
    std::fs::write(
        dir.join("g/a/.zarray"),
        zarray.replace("\"shape\": [3]", "\"shape\": [5]"),
    )
    .unwrap();
    std::fs::write(dir.join("g/a/1"), [4, 5, 6]).unwrap();
    fs.refresh(group.ino).unwrap();
    // The group is the same directory; its array another file.
    assert_eq!(fs.lookup(ROOT, "g").unwrap().ino, group.ino);
    let new = fs.lookup(group.ino, "a").unwrap();
    assert_ne!(new.ino, old.ino);
    assert_eq!(new.size, 5);
    let listed: Vec<u64> = fs
        .readdir(group.ino)
        .unwrap()
        .iter()
        .map(|e| e.ino)
        .collect();
    assert!(listed.contains(&new.ino), "{listed:?}");
    // The old inode, still held by the kernel, and its open file show the first reading.
    assert_eq!(fs.getattr(old.ino).unwrap().size, 3);
    assert_eq!(fs.read(fh, 0, 16).unwrap(), [1, 2, 3]);
    let fh2 = fs.open(new.ino).unwrap();
    assert_eq!(fs.read(fh2, 0, 16).unwrap(), [1, 2, 3, 4, 5]);
    fs.release(fh);
    fs.release(fh2);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_read_that_runs_into_an_unreadable_chunk_gives_the_bytes_before_its_first_one() {
    let dir = std::env::temp_dir().join(format!("zarrfs-badchunk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A 6 x 5 uint16 array of 2 x 2 chunks whose element (r, c) is 5r + c.
    let doc = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [6, 5], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    let data: Vec<u8> = (0u16..30).flat_map(|v| v.to_le_bytes()).collect();
    crate::hierarchy::demo::v3_array(&dir, "a", doc, &data).unwrap();
    // Two chunks cut short: rows 2-3 of columns 0-1, and rows 0-1 of column 4.
    let bad = [(1u64, 0u64), (0, 2)];
    for (r, c) in bad {
        std::fs::write(dir.join(format!("a/c/{r}/{c}")), [1u8, 2, 3]).unwrap();
    }
    for order in [Order::C, Order::F] {
        let fs = fs_over(&dir, order, false);
        let ino = fs.lookup(ROOT, "a").unwrap().ino;
        let fh = fs.open(ino).unwrap();
        // Element i of the file: its (row, column).
        let at = |i: u64| match order {
            Order::C => (i / 5, i % 5),
            Order::F => (i % 6, i / 6),
        };
        let file: Vec<u8> = (0..30)
            .flat_map(|i| {
                let (r, c) = at(i);
                (5 * r as u16 + c as u16).to_le_bytes()
            })
            .collect();
        let unreadable = |byte: u64| {
            let (r, c) = at(byte / 2);
            bad.contains(&(r / 2, c / 2))
        };
        for offset in 0..60u64 {
            for len in [1usize, 2, 3, 7, 20, 60] {
                let end = (offset + len as u64).min(60);
                let first_bad = (offset..end).find(|&b| unreadable(b));
                let mut buf = vec![0u8; len];
                let what = format!("{order:?}: {len} bytes at {offset}");
                match (fs.read_into(fh, offset, &mut buf), first_bad) {
                    (Ok(n), None) => {
                        assert_eq!(n as u64, end - offset, "{what}");
                        assert_eq!(&buf[..n], &file[offset as usize..end as usize], "{what}");
                    }
                    (Err(Partial { read, error }), Some(b)) => {
                        assert_eq!(read as u64, b - offset, "{what}");
                        assert_eq!(&buf[..read], &file[offset as usize..b as usize], "{what}");
                        assert_eq!(error.errno(), libc::EIO, "{what}: {error}");
                        assert!(error.to_string().contains("a/c/"), "{what}: {error}");
                    }
                    (got, want) => panic!("{what}: {got:?}, first bad byte {want:?}"),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The demo hierarchy with its `.npy` views, read again at every look (a refresh
/// interval of zero) or never (`None`).
pub(super) fn demo_refreshing(
    refresh: Option<std::time::Duration>,
) -> (std::path::PathBuf, ZarrFs) {
    let (dir, _) = demo_fs(Order::C, false);
    let store = Arc::new(FolderStore::open(&dir).unwrap());
    let options = FsOptions {
        layout: Layout {
            order: Order::C,
            big_endian: false,
        },
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "raw,npy".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let hierarchy = Hierarchy::open(store).unwrap().with_refresh(refresh);
    (dir, ZarrFs::new(hierarchy, options, "t.zarr"))
}

#[test]
fn unchanged_nodes_keep_their_numbers_across_forgets_and_readings_again() {
    let names = [
        "surface",
        "temperature",
        "temperature.npy",
        ".temperature.json",
        ".group.json",
    ];
    for refresh in [None, Some(std::time::Duration::ZERO)] {
        let (dir, fs) = demo_refreshing(refresh);
        let first: Vec<Attr> = names.iter().map(|n| fs.lookup(ROOT, n).unwrap()).collect();
        let numbers: HashSet<u64> = first.iter().map(|a| a.ino).collect();
        assert_eq!(numbers.len(), names.len(), "{first:?}");
        assert!(!numbers.contains(&ROOT));
        let listed = fs.readdir(ROOT).unwrap();
        for (name, attr) in names.iter().zip(&first) {
            let entry = listed.iter().find(|e| e.name == *name).unwrap();
            assert_eq!(entry.ino, attr.ino, "{name} listed");
        }
        // The kernel forgets them all; looked up again, each has its number back.
        for attr in &first {
            assert!(fs.forget(attr.ino, 1));
        }
        for (name, attr) in names.iter().zip(&first) {
            assert_eq!(&fs.lookup(ROOT, name).unwrap(), attr, "{name}, {refresh:?}");
        }
        // Read again (at every look under the interval of zero; `zarrfs refresh` here),
        // nothing changed in the store: the same numbers.
        fs.refresh(ROOT).unwrap();
        for (name, attr) in names.iter().zip(&first) {
            let found = fs.lookup_entry(ROOT, name).unwrap();
            assert_eq!(&found.attr, attr, "{name} read again, {refresh:?}");
            // A file's number stands for the new reading; a directory is one inode.
            assert_eq!(found.renewed, attr.kind == FileKind::File, "{name}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_number_renewed_shows_its_new_reading_and_an_open_file_keeps_another_inode() {
    let dir = v2_group_with_array_a("renew");
    let store = Arc::new(FolderStore::open(&dir).unwrap());
    // Every look reads the store again.
    let hierarchy = Hierarchy::open(store)
        .unwrap()
        .with_refresh(Some(std::time::Duration::ZERO));
    let options = FsOptions {
        layout: Layout {
            order: Order::C,
            big_endian: false,
        },
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "raw".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    let fs = ZarrFs::new(hierarchy, options, "t.zarr");
    let first = fs.lookup(ROOT, "a").unwrap();
    let fh = fs.open(first.ino).unwrap();
    assert_eq!(fs.read(fh, 0, 16).unwrap(), [1, 2, 3]);
    // The chunk is rewritten under unchanged metadata while a file is open on the
    // first reading: the next reading is another inode (the kernel's pages of the
    // first stay the first's), and the first stays for its open file.
    std::fs::write(dir.join("a/0"), [4, 5, 6]).unwrap();
    let second = fs.lookup_entry(ROOT, "a").unwrap();
    assert_ne!(second.attr.ino, first.ino);
    assert!(!second.renewed);
    let fh2 = fs.open(second.attr.ino).unwrap();
    assert_eq!(fs.read(fh2, 0, 16).unwrap(), [4, 5, 6]);
    assert_eq!(fs.getattr(first.ino).unwrap(), first);
    fs.release(fh);
    fs.release(fh2);
    // Nothing open: the next reading keeps the number, and shows what the store holds.
    std::fs::write(dir.join("a/0"), [7, 8, 9]).unwrap();
    let third = fs.lookup_entry(ROOT, "a").unwrap();
    assert_eq!((third.attr.ino, third.renewed), (second.attr.ino, true));
    let fh3 = fs.open(third.attr.ino).unwrap();
    assert_eq!(fs.read(fh3, 0, 16).unwrap(), [7, 8, 9]);
    fs.release(fh3);
    // Rewritten metadata (another fill value) is another version of the node: another
    // number, though nothing is open.
    let zarray = std::fs::read_to_string(dir.join("a/.zarray")).unwrap();
    let rewritten = zarray.replace("\"fill_value\": 0", "\"fill_value\": 17");
    assert_ne!(rewritten, zarray);
    std::fs::write(dir.join("a/.zarray"), rewritten).unwrap();
    let fourth = fs.lookup_entry(ROOT, "a").unwrap();
    assert!(![first.ino, second.attr.ino].contains(&fourth.attr.ino));
    assert!(!fourth.renewed);
    // The first reading's inode is still held by the kernel: it keeps its size.
    assert_eq!(fs.getattr(first.ino).unwrap().size, 3);
    let _ = std::fs::remove_dir_all(dir);
}

/// The filesystem over the folder `dir`, refreshed every `interval`.
fn refreshing_fs(dir: &std::path::Path, interval: std::time::Duration) -> ZarrFs {
    let store = Arc::new(FolderStore::open(dir).unwrap());
    let hierarchy = Hierarchy::open(store).unwrap().with_refresh(Some(interval));
    let options = FsOptions {
        layout: Layout {
            order: Order::C,
            big_endian: false,
        },
        cache_bytes: 1 << 20,
        prefetch_threads: 1,
        views: "raw".parse().unwrap(),
        staging: None,
        write_wait: Default::default(),
        commit_message: None,
        new_defaults: Default::default(),
    };
    ZarrFs::new(hierarchy, options, "t.zarr")
}

#[test]
fn the_kernel_keeps_a_name_no_longer_than_the_reading_it_came_from() {
    let dir = v2_group_with_array_a("entry-ttl");
    std::fs::create_dir_all(dir.join("g")).unwrap();
    std::fs::write(dir.join("g/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    let interval = std::time::Duration::from_secs(3600);
    let fs = refreshing_fs(&dir, interval);
    // Read once (the sidecar's lookup reads the node), then looked up by another name
    // a while later: the same reading, with that much less of the interval left.
    let sidecar = fs.lookup(ROOT, ".a.json").unwrap();
    let read = std::time::Instant::now();
    assert!(fs.entry_ttl(sidecar.ino) <= interval);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let a = fs.lookup(ROOT, "a").unwrap();
    assert!(
        fs.entry_ttl(a.ino) <= interval - read.elapsed(),
        "{:?} of {interval:?} after {:?}",
        fs.entry_ttl(a.ino),
        read.elapsed()
    );
    let g = fs.lookup(ROOT, "g").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(fs.entry_ttl(g.ino) < interval);
    // Attributes of an inode never change: they keep the whole interval.
    assert_eq!(fs.attr_ttl(), interval);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_listing_made_again_from_the_hierarchy_is_as_old_as_the_hierarchy_s_listing() {
    let dir = v2_group_with_array_a("listing-age");
    let interval = std::time::Duration::from_millis(400);
    let fs = refreshing_fs(&dir, interval);
    assert_eq!(names(&fs, ROOT), [".a.json", ".group.json", "a"]);
    let listed = std::time::Instant::now();
    // Half an interval later the kernel forgets a file of the listing, which makes it
    // again, from the hierarchy's listing read at first.
    std::thread::sleep(interval / 2);
    let a = fs.lookup(ROOT, "a").unwrap();
    fs.forget(a.ino, 1);
    assert_eq!(names(&fs, ROOT), [".a.json", ".group.json", "a"]);
    write_v2_array(&dir.join("b"), "|u1", 1, &[9]);
    // Once the first listing is older than the interval, a listing shows the new array.
    while listed.elapsed() <= interval {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        names(&fs, ROOT),
        [".a.json", ".b.json", ".group.json", "a", "b"]
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_listed_array_is_sized_from_its_metadata_and_nothing_is_built_until_it_is_opened() {
    let (dir, fs) = demo_fs(Order::C, false);
    let temp = fs.lookup(ROOT, "temperature").unwrap();
    assert_eq!(temp.size, 24 * 90 * 180 * 4);
    assert!(fs.flats.lock().is_empty(), "a lookup builds no view");
    let entry = fs.entry(temp.ino).unwrap();
    assert!(entry.content.lock().is_none(), "nor keeps any content");
    // The first open builds the view; its size is the one the lookup gave.
    let fh = fs.open(temp.ino).unwrap();
    assert_eq!(fs.flats.lock().len(), 1);
    assert_eq!(fs.getattr(temp.ino).unwrap().size, temp.size);
    assert_eq!(whole(&fs, temp.ino).len() as u64, temp.size);
    fs.release(fh);
    // A sidecar is sized from its text, which is not kept until it is opened; the size
    // is the length of what the open then reads.
    let side = fs.lookup(ROOT, ".temperature.json").unwrap();
    let entry = fs.entry(side.ino).unwrap();
    assert!(
        entry.content.lock().is_none(),
        "a sidecar's lookup keeps no text"
    );
    assert_eq!(fs.getattr(side.ino).unwrap().size, side.size);
    let text = whole(&fs, side.ino);
    assert!(text.starts_with(b"{"), "{}", String::from_utf8_lossy(&text));
    assert_eq!(text.len() as u64, side.size);
    // The security and ACL attributes `ls -l` asks for are none, as the user ones are
    // there.
    for name in ["security.selinux", "system.posix_acl_access"] {
        assert!(
            matches!(fs.getxattr(temp.ino, name), Err(Error::NoAttribute)),
            "{name}"
        );
    }
    assert_eq!(fs.getxattr(temp.ino, "user.zarr.kind").unwrap(), b"array");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_array_whose_codecs_cannot_be_built_lists_with_size_zero_and_fails_its_open() {
    let dir = std::env::temp_dir().join(format!("zarrfs-badcodec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("odd")).unwrap();
    let doc = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [6], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "no_such_codec", "configuration": {}}]
    });
    std::fs::write(dir.join("odd/zarr.json"), doc.to_string()).unwrap();
    std::fs::write(
        dir.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    )
    .unwrap();
    let fs = fs_over(&dir, Order::C, false);
    let odd = fs.lookup(ROOT, "odd").unwrap();
    assert_eq!((odd.kind, odd.size), (FileKind::File, 0));
    assert!(fs.open(odd.ino).is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_lookup_given_back_keeps_the_inode_as_the_listing_left_it() {
    let (dir, fs) = demo_fs(Order::C, false);
    let listed = fs.readdir(ROOT).unwrap();
    let temp = listed.iter().find(|e| e.name == "temperature").unwrap().ino;
    let count = fs.inode_count();
    let found = fs.lookup_entry(ROOT, "temperature").unwrap();
    assert_eq!(found.attr.ino, temp);
    fs.unhold(temp);
    // Still there with no lookup held, and the listing still names it.
    assert_eq!(fs.inode_count(), count);
    assert!(fs.getattr(temp).is_ok());
    assert!(Arc::ptr_eq(&listed, &fs.readdir(ROOT).unwrap()));
    // A second give-back takes nothing below zero: a held lookup is still counted once.
    fs.unhold(temp);
    fs.lookup(ROOT, "temperature").unwrap();
    assert!(fs.forget(temp, 1), "one lookup held, one forgotten: gone");
    let _ = std::fs::remove_dir_all(dir);
}
