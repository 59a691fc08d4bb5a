//! End-to-end tests of the file views (`--views`, issue 11), mounting for real (root and
//! /dev/fuse required; a missing prerequisite or reader fails): every view of the v3 and
//! v2 fixture stores read by the formats' own readers (numpy, tifffile, libtiff's tools,
//! GDAL, SimpleITK, pynrrd; `scripts/check_views.py`) and compared with zarr-python's
//! bytes; the headed views' bytes at random ranges against `zarrfs cat --as`; `zarrfs
//! header` against the mounted header files; a BigTIFF of 4.8e9 bytes of fill value; the
//! default listing unchanged.

use crate::common;

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::fixtures::{arrays_of, is_unsupported};
use common::mount::{pread_full, Lcg, Mount};
use common::{assert_no_failures, sha256, zarrfs, CliRun, Manifest, TempDir};
use serde_json::Value;

/// The kinds of `--views` and the suffix each adds to the array's file name.
const KINDS: [(&str, &str); 7] = [
    ("raw", ""),
    ("npy", ".npy"),
    ("tiff", ".tif"),
    ("envi", ".hdr"),
    ("mhd", ".mhd"),
    ("nrrd", ".nhdr"),
    ("vrt", ".vrt"),
];

fn repo() -> PathBuf {
    crate::common::repo()
}

/// The readers' Python (`target/venv-views`: Debian's Python with GDAL, plus tifffile,
/// SimpleITK and pynrrd), or `$ZARRFS_VIEWS_PYTHON`.
fn views_python() -> PathBuf {
    common::venv_python("ZARRFS_VIEWS_PYTHON", "venv-views")
}

/// zarr-python 3's Python (`target/venv-zarr3`), which writes the BigTIFF store.
fn zarr_python() -> PathBuf {
    common::venv_python("ZARRFS_ZARR_PYTHON", "venv-zarr3")
}

fn check_views_script() -> PathBuf {
    repo().join("scripts/check_views.py")
}

/// Mounts the v3 and v2 stores with `args`, runs `check_views.py check` over them and
/// asserts it passed with at least `minimum` arrays for each named reader.
fn readers_agree(args: &[&str], order: &str, endian: &str, views: &str, minimum: &[(&str, u64)]) {
    // A missing tool fails loudly, before anything is mounted.
    for tool in ["tiffinfo", "tiffdump"] {
        common::require_tool(tool, "install libtiff-tools (scripts/test.sh does)");
    }
    let m = Manifest::load();
    let mut all_args: Vec<&str> = args.to_vec();
    all_args.extend(["--views", views]);
    let mounts: Vec<(&str, Mount)> = ["v3", "v2"]
        .into_iter()
        .map(|store| (store, Mount::new(&m.store_dir(store), &all_args)))
        .collect();
    let mut command = Command::new(views_python());
    command
        .arg(check_views_script())
        .arg("check")
        .arg(m.dir.join("manifest.json"))
        .args(["--order", order, "--endian", endian, "--views", views]);
    for (store, mount) in &mounts {
        command
            .arg("--mount")
            .arg(format!("{store}={}", mount.mountpoint.to_string_lossy()));
        for entry in arrays_of(&m, store)
            .into_iter()
            .filter(|e| is_unsupported(e))
        {
            command
                .arg("--eio")
                .arg(format!("{store}:{}", entry["path"].as_str().unwrap_or("")));
        }
    }
    let run = CliRun::run(&mut command);
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    println!("check_views.py {args:?} --views {views}:\n{stdout}");
    let logs: String = mounts.iter().map(|(_, mount)| mount.log()).collect();
    assert!(
        run.success(),
        "check_views.py failed: {run}\n{stdout}\ndaemon logs: {}",
        common::tail(&logs, 3000)
    );
    let counts = &common::last_json(&stdout)["counts"];
    for (reader, least) in minimum {
        let n = counts[*reader].as_u64().unwrap_or(0);
        assert!(
            n >= *least,
            "{reader} checked {n} arrays, want at least {least}: {counts}"
        );
    }
}

/// The minimum number of arrays each reader must have checked over the v3 and v2 stores
/// with every view in C order (the rules allow: numpy 262 arrays, TIFF 190, ENVI 194 of
/// which 177 GDAL can read, MetaImage and NRRD 199, SimpleITK's NRRD 184, VRT 194).
const C_MINIMUMS: [(&str, u64); 16] = [
    ("raw file", 250),
    ("xattr user.zarrfs.views", 255),
    ("numpy np.load", 250),
    ("numpy mmap_mode='r'", 250),
    ("tifffile", 180),
    ("tiffinfo", 180),
    ("tiffdump", 180),
    ("GDAL GTiff", 180),
    ("ENVI header fields", 185),
    ("GDAL ENVI", 170),
    ("MetaImage header fields", 190),
    ("SimpleITK .mhd", 190),
    ("NRRD header fields", 190),
    ("pynrrd .nhdr", 190),
    ("SimpleITK .nhdr", 175),
    ("GDAL VRT", 185),
];

#[test]
fn readers_read_every_view_of_a_c_order_mount() {
    readers_agree(&[], "C", "little", "all", &C_MINIMUMS);
}

#[test]
fn readers_read_every_view_of_an_f_order_mount() {
    let minimum: Vec<(&str, u64)> = C_MINIMUMS
        .iter()
        .copied()
        .filter(|(r, _)| !r.starts_with("tiff") && *r != "GDAL GTiff")
        .collect();
    readers_agree(
        &["--order", "F"],
        "F",
        "little",
        "npy,envi,mhd,nrrd,vrt",
        &minimum,
    );
}

#[test]
fn readers_read_every_view_of_a_big_endian_mount() {
    readers_agree(&["--endian", "big"], "C", "big", "all", &C_MINIMUMS);
}

/// `zarrfs` with `args`, run to the end.
fn zarrfs_run<S: AsRef<OsStr>>(args: &[S]) -> CliRun {
    CliRun::run(Command::new(zarrfs()).args(args))
}

/// Where the header of a headed view ends: the data (`nbytes` of them) is its tail.
fn boundary(len: u64, nbytes: u64) -> u64 {
    len.saturating_sub(nbytes)
}

/// 1,000 random ranges of `file` (a fifth across the header/data boundary, a tenth at or
/// past the end) equal the same slice of `want`; the failures.
fn random_ranges(file: &Path, want: &[u8], nbytes: u64, rng: &mut Lcg) -> Vec<String> {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("open {}: {e}", file.display()));
    let len = want.len() as u64;
    let edge = boundary(len, nbytes);
    let mut failures = Vec::new();
    for i in 0..1000 {
        let (offset, length) = match i % 10 {
            0 | 1 => (edge.saturating_sub(rng.next(80)), 1 + rng.next(200)),
            2 => (
                len.saturating_sub(rng.next(40)) + rng.next(3) * rng.next(100),
                1 + rng.next(300),
            ),
            3 => (rng.next(64), 1 + rng.next(4096)),
            _ => (rng.next(len + 1), 1 + rng.next(len.clamp(1, 70_000))),
        };
        let got = match pread_full(&f, offset, length as usize) {
            Ok(got) => got,
            Err(e) => {
                failures.push(format!(
                    "{}: pread({offset}, {length}): {e}",
                    file.display()
                ));
                continue;
            }
        };
        let start = offset.min(len) as usize;
        let end = (offset + length).min(len) as usize;
        if got != want[start..end] {
            failures.push(format!(
                "{}: pread({offset}, {length}) of a {len}-byte file (header {edge}) differs from `zarrfs cat --as` ({} vs {} bytes)",
                file.display(),
                got.len(),
                end - start
            ));
        }
    }
    failures
}

/// The arrays whose headed views are read at random ranges: every data type family,
/// ranks 0 to 5, sharded, big-endian stored, F order stored, missing chunks.
const RANGE_ARRAYS: [(&str, &str); 12] = [
    ("v3", "dtypes/complex128"),
    ("v3", "dtypes/bool"),
    ("v3", "dtypes/structured_nested"),
    ("v3", "shapes/d5"),
    ("v3", "shapes/scalar"),
    ("v3", "shapes/d1"),
    ("v3", "sharding/nested"),
    ("v3", "codecs/blosc_lz4_shuffle"),
    ("v2", "dtypes/gt_f8"),
    ("v2", "order/F_3d_big"),
    ("v2", "shapes/d4"),
    ("v2", "dtypes/lt_U4"),
];

/// Random ranges of NAME.npy and NAME.tif (where shown) in one layout against `zarrfs
/// cat --as`; the number of views compared and the failures.
fn ranges_in_layout(
    m: &Manifest,
    store: &str,
    layout: &[&str],
    rng: &mut Lcg,
) -> (usize, Vec<String>) {
    let dir = m.store_dir(store);
    let mut args = layout.to_vec();
    args.extend(["--views", "all"]);
    let mount = Mount::new(&dir, &args);
    let mut failures = Vec::new();
    let mut compared = 0;
    for (s, path) in RANGE_ARRAYS.iter().filter(|(s, _)| *s == store) {
        let entry = m
            .arrays()
            .iter()
            .find(|a| a["store"] == *s && a["path"] == *path)
            .unwrap_or_else(|| panic!("{s}:{path} not in the manifest"));
        let nbytes = entry["nbytes"].as_u64().expect("nbytes");
        for (kind, suffix) in [("npy", ".npy"), ("tiff", ".tif")] {
            let file = mount.path(&format!("{path}{suffix}"));
            let mut cat_args = vec!["cat".to_string(), dir.to_string_lossy().to_string()];
            cat_args.extend([path.to_string(), "--as".into(), kind.into()]);
            cat_args.extend(layout.iter().map(|a| a.to_string()));
            let run = zarrfs_run(&cat_args);
            if !file.exists() {
                if run.success() {
                    failures.push(format!(
                        "{s}:{path}: cat --as {kind} succeeds but {} is absent",
                        file.display()
                    ));
                }
                continue;
            }
            if !run.success() {
                failures.push(format!("{s}:{path}: {run}"));
                continue;
            }
            let size = std::fs::metadata(&file).map(|s| s.len()).unwrap_or(0);
            if size != run.stdout.len() as u64 {
                failures.push(format!(
                    "{}: size {size}, cat wrote {}",
                    file.display(),
                    run.stdout.len()
                ));
            }
            // A `.npy` ends with the flat bytes; a TIFF's data is tiles when its plane
            // spans several chunks (what tifffile and GDAL read of it is checked by
            // check_views.py), so only its bytes against the mount's are compared.
            let label = label_of(layout);
            if kind == "npy"
                && sha256(&run.stdout[boundary(run.stdout.len() as u64, nbytes) as usize..])
                    != entry["sha256"][label]
            {
                failures.push(format!(
                    "{s}:{path}: cat --as {kind} data is not zarr-python's {label} bytes"
                ));
            }
            failures.extend(random_ranges(&file, &run.stdout, nbytes, rng));
            compared += 1;
        }
    }
    (compared, failures)
}

/// The manifest's hash label of mount or cat arguments.
fn label_of(layout: &[&str]) -> &'static str {
    let f = layout.windows(2).any(|w| w == ["--order", "F"]);
    let big = layout.windows(2).any(|w| w == ["--endian", "big"]);
    match (f, big) {
        (false, false) => "C_little",
        (true, false) => "F_little",
        (false, true) => "C_big",
        (true, true) => "F_big",
    }
}

#[test]
fn headed_views_at_random_ranges_equal_cat_as() {
    let m = Manifest::load();
    let mut rng = Lcg(0x11_7e55);
    let mut failures = Vec::new();
    let mut compared = 0;
    for layout in [
        &[][..],
        &["--endian", "big"][..],
        &["--order", "F", "--endian", "big"][..],
    ] {
        for store in ["v3", "v2"] {
            let (n, f) = ranges_in_layout(&m, store, layout, &mut rng);
            compared += n;
            failures.extend(f);
        }
    }
    assert_no_failures(&failures);
    // npy of all 12 arrays in 3 layouts, TIFF of the 9 of rank >= 2 in 2 layouts.
    assert!(compared >= 36 + 16, "only {compared} views compared");
}

/// `zarrfs header STORE PATH --as KIND LAYOUT` equals every mounted detached header; where
/// the mount shows none, the command fails. Returns (headers compared, failures).
fn headers_in_layout(
    m: &Manifest,
    store: &str,
    layout: &[&str],
    step: usize,
) -> (usize, Vec<String>) {
    let dir = m.store_dir(store);
    let mut args = layout.to_vec();
    args.extend(["--views", "envi,mhd,nrrd,vrt"]);
    let mount = Mount::new(&dir, &args);
    let mut failures = Vec::new();
    let mut compared = 0;
    for entry in arrays_of(m, store)
        .into_iter()
        .filter(|e| e["vlen"] == false)
        .step_by(step)
    {
        let path = entry["path"].as_str().unwrap_or("");
        for (kind, suffix) in &KINDS[3..] {
            let file = mount.path(&format!("{path}{suffix}"));
            let mut cli = vec!["header".to_string(), dir.to_string_lossy().to_string()];
            cli.extend([path.to_string(), "--as".into(), kind.to_string()]);
            cli.extend(layout.iter().map(|a| a.to_string()));
            let run = zarrfs_run(&cli);
            match std::fs::read(&file) {
                Ok(bytes) if run.success() && run.stdout == bytes => compared += 1,
                Ok(bytes) => failures.push(format!(
                    "{store}:{path} {kind}: `zarrfs header` differs from {} ({} vs {} bytes): {run}",
                    file.display(),
                    run.stdout.len(),
                    bytes.len()
                )),
                Err(_) if !run.success() => {}
                Err(e) => failures.push(format!(
                    "{store}:{path} {kind}: `zarrfs header` printed {} bytes but {}: {e}",
                    run.stdout.len(),
                    file.display()
                )),
            }
        }
    }
    (compared, failures)
}

#[test]
fn header_command_equals_the_mounted_headers() {
    let m = Manifest::load();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (store, layout, step) in [
        ("v3", &[][..], 1),
        ("v2", &[][..], 1),
        ("v3", &["--order", "F"][..], 3),
        ("v2", &["--endian", "big"][..], 3),
        ("v2", &["--order", "F", "--endian", "big"][..], 3),
    ] {
        let (n, f) = headers_in_layout(&m, store, layout, step);
        compared += n;
        failures.extend(f);
    }
    assert_no_failures(&failures);
    assert!(compared >= 600, "only {compared} headers compared");
    // --data-file names another raw file in the headers that name one.
    let dir = m.store_dir("v3").to_string_lossy().to_string();
    for (kind, line) in [
        ("mhd", "ElementDataFile = elsewhere.bin\n"),
        ("nrrd", "data file: elsewhere.bin\n"),
        ("vrt", ">elsewhere.bin</SourceFilename>"),
    ] {
        let run = zarrfs_run(&[
            "header",
            &dir,
            "dtypes/float32",
            "--as",
            kind,
            "--data-file",
            "elsewhere.bin",
        ]);
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.success() && text.contains(line),
            "header --as {kind} --data-file elsewhere.bin: no {line:?}: {run}\n{text}"
        );
    }
}

#[test]
fn bigtiff_of_fill_value_past_4_gib() {
    let tmp = TempDir::new("bigtiff");
    let out = Command::new(zarr_python())
        .arg(check_views_script())
        .arg("make-bigtiff")
        .arg(tmp.path())
        .output()
        .expect("run check_views.py make-bigtiff");
    assert!(
        out.status.success(),
        "make-bigtiff: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = common::last_json(&String::from_utf8_lossy(&out.stdout));
    let store = PathBuf::from(doc["store"].as_str().expect("store"));
    let data: u64 = 3 * 40_000 * 40_000;
    let mount = Mount::new(&store, &["--views", "tiff"]);
    let tif = mount.path("pages.tif");
    let names: Vec<String> = std::fs::read_dir(&mount.mountpoint)
        .expect("list the mount")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names, ["pages.tif"], "--views tiff lists only the TIFF");
    // The chunks are 8192 x 8192, so each page is cut into tiles of 1024 x 1024 (TIFF
    // views tile at most 1024 on a side): 40 x 40 of them, those on the right and bottom
    // edges padded with zeros past the plane's 40,000.
    let tile: u64 = 1024 * 1024;
    let tiles: u64 = 3 * 40 * 40;
    let size = std::fs::metadata(&tif).expect("stat pages.tif").len();
    assert!(
        size > tiles * tile && size - tiles * tile < 256 * 1024,
        "pages.tif is {size} bytes: want the header + {tiles} tiles of {tile} ({} bytes of data)",
        data
    );
    let header = size - tiles * tile;

    // tifffile parses the header only: a little-endian BigTIFF of 3 tiled pages.
    let run = CliRun::run(
        Command::new(views_python())
            .arg(check_views_script())
            .arg("bigtiff")
            .arg(&tif),
    );
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(run.success(), "tifffile on the BigTIFF: {run}\n{text}");
    let pages = common::last_json(&text);
    let offsets: Vec<u64> = pages["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let counts: Vec<u64> = pages["bytecounts"]
        .as_array()
        .expect("bytecounts")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(
        pages["tiles"],
        serde_json::json!([[1024, 1024], [1024, 1024], [1024, 1024]]),
        "tile shapes"
    );
    assert!(counts.len() as u64 == tiles && counts.iter().all(|&c| c == tile));
    let want: Vec<u64> = (0..tiles).map(|t| header + t * tile).collect();
    assert!(
        offsets == want,
        "the tiles follow the header one after another"
    );

    // The data is the fill value inside the plane, zeros past it: the start of each
    // page's first tile, and the first row of the last tile of the last page (64 columns
    // inside the plane, then padding).
    let f = std::fs::File::open(&tif).expect("open pages.tif");
    for page in 0..3 {
        let offset = offsets[page * 1600];
        let start = pread_full(&f, offset, 512).expect("read a page's start");
        assert!(
            start.iter().all(|&b| b == 7),
            "page at {offset} does not start with the fill value"
        );
    }
    let last = pread_full(&f, size - tile, 1024).expect("read the last tile's first row");
    let mut row = vec![7u8; 64];
    row.resize(1024, 0);
    assert!(
        last == row,
        "the last tile's first row is 64 fill values and padding"
    );
    assert!(pread_full(&f, size, 10).expect("read at EOF").is_empty());

    // The header equals the first bytes of `zarrfs cat --as tiff` (not run to the end).
    let mut child = Command::new(zarrfs())
        .arg("cat")
        .arg(&store)
        .arg("pages")
        .args(["--as", "tiff"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn zarrfs cat");
    let mut head = vec![0u8; header as usize + 4096];
    let read = child.stdout.take().expect("stdout").read_exact(&mut head);
    let _ = child.kill();
    let _ = child.wait();
    read.expect("read the start of zarrfs cat --as tiff");
    let mounted = pread_full(&f, 0, head.len()).expect("read the mounted header");
    assert!(
        mounted == head,
        "the mounted BigTIFF header differs from zarrfs cat --as tiff"
    );
}

#[test]
fn default_listing_is_unchanged_and_views_npy_hides_raw() {
    let m = Manifest::load();
    let dir = m.store_dir("v3");
    let mut failures = Vec::new();
    {
        let mount = Mount::new(&dir, &[]);
        for group in m.groups().iter().filter(|g| g["store"] == "v3") {
            let gpath = group["path"].as_str().unwrap_or("");
            let mut want: Vec<String> = vec![".group.json".into()];
            for child in group["children"].as_array().expect("children") {
                let name = child["name"].as_str().unwrap_or("").to_string();
                if child["kind"] == "array" {
                    want.push(format!(".{name}.json"));
                }
                want.push(name);
            }
            want.sort();
            let mut got: Vec<String> = std::fs::read_dir(mount.path(gpath))
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().to_string())
                        .collect()
                })
                .unwrap_or_default();
            got.sort();
            if got != want {
                failures.push(format!("v3:/{gpath}: lists {got:?}, want {want:?}"));
            }
        }
        for entry in arrays_of(&m, "v3") {
            let path = entry["path"].as_str().unwrap_or("");
            for (_, suffix) in &KINDS[1..] {
                if mount.path(&format!("{path}{suffix}")).exists() {
                    failures.push(format!("v3:{path}{suffix} found without --views"));
                }
            }
            let xattr = xattr_views(&mount.path(path));
            let name = path.rsplit('/').next().unwrap_or("");
            if xattr.as_deref() != Some(format!("raw: {name}").as_str()) {
                failures.push(format!(
                    "v3:{path}: user.zarrfs.views {xattr:?}, want \"raw: {name}\""
                ));
            }
        }
    }
    {
        let mount = Mount::new(&dir, &["--views", "npy"]);
        for entry in arrays_of(&m, "v3")
            .into_iter()
            .filter(|e| e["vlen"] == false)
        {
            let path = entry["path"].as_str().unwrap_or("");
            if mount.path(path).exists() {
                failures.push(format!("v3:{path}: raw file shown with --views npy"));
            }
            if !mount.path(&format!("{path}.npy")).is_file() {
                failures.push(format!("v3:{path}.npy missing with --views npy"));
            }
        }
    }
    assert_no_failures(&failures);
}

/// `user.zarrfs.views` of `file`, trailing newline trimmed; `None` if it cannot be read.
fn xattr_views(file: &Path) -> Option<String> {
    let out = Command::new("getfattr")
        .args(["--only-values", "-n", "user.zarrfs.views"])
        .arg(file)
        .output()
        .expect("run getfattr (package attr)");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// User text that XML 1.0 cannot hold (C0 control characters in a CRS's WKT, OME channel
/// labels and an image name, and in an array's name) still makes well-formed VRT and
/// OME-XML: expat parses them, the text reads with each such character replaced by U+FFFD
/// (tab, newline and carriage return kept), GDAL opens the VRT, and an array whose name a
/// VRT cannot hold has no `.vrt` (`scripts/check_xml_text.py`).
#[test]
fn xml_views_of_control_characters_are_well_formed() {
    let tmp = TempDir::new("xml-text");
    let script = repo().join("scripts/check_xml_text.py");
    let made = Command::new(zarr_python())
        .arg(&script)
        .arg("make")
        .arg(tmp.path())
        .output()
        .expect("run check_xml_text.py make");
    assert!(
        made.status.success(),
        "check_xml_text.py make: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let expected = common::last_json(&String::from_utf8_lossy(&made.stdout));
    let store = PathBuf::from(expected["store"].as_str().expect("store"));
    let expected_file = tmp.path().join("expected.json");
    std::fs::write(&expected_file, expected.to_string()).expect("write expected.json");
    let mount = Mount::new(&store, &["--views", "all"]);
    let checked = Command::new(views_python())
        .arg(&script)
        .arg("check")
        .arg(&mount.mountpoint)
        .arg(&expected_file)
        .output()
        .expect("run check_xml_text.py check");
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "check_xml_text.py check: {stdout}\n{}\ndaemon log: {}",
        String::from_utf8_lossy(&checked.stderr),
        common::tail(&mount.log(), 3000)
    );
    assert_eq!(
        common::last_json(&stdout)["failures"],
        serde_json::json!([])
    );
}
