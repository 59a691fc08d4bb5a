//! End-to-end tests of the OME-TIFF pyramids (issue 27), mounting for real: the OME-Zarr
//! images of `scripts/make_fixtures_ome.py` (ome-zarr-py, OME-NGFF 0.4 on Zarr v2 and
//! 0.5 on Zarr v3, from scikit-image's samples, 2-D to 5-D with pyramids) mounted with
//! their `NAME.ome.tif`; tifffile must find OME-XML whose sizes, physical sizes and
//! channels are the multiscales metadata and levels equal to ome-zarr-py's read, and
//! `tiffinfo` must accept the file (`scripts/check_ome.py`). A tile of the top level of
//! a 20000 x 20000 image must read that level's chunks alone.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::mount::Mount;
use common::CliRun;
use serde_json::Value;

struct Fixtures {
    dir: PathBuf,
    images: Vec<Value>,
}

fn fixtures() -> Fixtures {
    let (dir, doc) = common::manifest_at("ome/manifest.json", "make_fixtures_ome.py");
    let images = doc["images"].as_array().cloned().unwrap_or_default();
    assert!(
        images.len() >= 10,
        "too few fixture images: {}",
        images.len()
    );
    Fixtures {
        dir: dir.join("ome"),
        images,
    }
}

/// Runs `check_ome.py` with `args`; its output, after asserting it passed.
fn check_ome(args: &[String], logs: &str) -> String {
    let python = common::venv_python("ZARRFS_OME_PYTHON", "venv-ome");
    let script = crate::common::repo().join("scripts/check_ome.py");
    let run = CliRun::run(Command::new(python).arg(script).args(args));
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    println!("check_ome.py {}:\n{stdout}", args[0]);
    assert!(
        run.success(),
        "check_ome.py failed: {run}\n{stdout}\ndaemon logs: {}",
        common::tail(logs, 3000)
    );
    stdout
}

/// The small images' stores mounted with `args`, checked by tifffile against
/// ome-zarr-py.
fn tifffile_reads_every_image(args: &[&str]) {
    let f = fixtures();
    let small: Vec<&Value> = f.images.iter().filter(|i| i["large"] != true).collect();
    let mut stores: Vec<&str> = small.iter().filter_map(|i| i["store"].as_str()).collect();
    stores.sort();
    stores.dedup();
    assert_eq!(stores, ["ngff04.zarr", "ngff05.zarr"]);
    let mounts: Vec<(&str, Mount)> = stores
        .iter()
        .map(|s| (*s, Mount::new(&f.dir.join(s), args)))
        .collect();
    let mut cmd = vec![
        "check".to_string(),
        f.dir.join("manifest.json").to_string_lossy().into(),
    ];
    for (store, mount) in &mounts {
        cmd.push("--mount".into());
        cmd.push(format!("{store}={}", mount.mountpoint.display()));
    }
    let logs: String = mounts.iter().map(|(_, m)| m.log()).collect();
    let counts = common::last_json(&check_ome(&cmd, &logs))["counts"].clone();
    let levels: u64 = small.iter().filter_map(|i| i["levels"].as_u64()).sum();
    assert_eq!(counts["images"], small.len() as u64, "{counts}");
    assert_eq!(counts["levels"], levels, "{counts}");
}

#[test]
fn tifffile_reads_every_ome_tiff_as_ome_zarr_py_reads_the_image() {
    tifffile_reads_every_image(&["--views", "raw,ome-tiff"]);
}

#[test]
fn big_endian_ome_tiffs_read_the_same() {
    tifffile_reads_every_image(&["--views", "ome-tiff", "--endian", "big"]);
}

#[test]
fn a_tile_of_the_top_level_reads_only_that_levels_chunks() {
    let f = fixtures();
    let large = f
        .images
        .iter()
        .find(|i| i["large"] == true)
        .expect("the large image in the manifest");
    let store = f.dir.join(large["store"].as_str().unwrap_or(""));
    let mount = Mount::new(&store, &["--views", "raw,ome-tiff"]);
    let out = check_ome(
        &[
            "tile".into(),
            f.dir.join("manifest.json").to_string_lossy().into(),
            mount.mountpoint.to_string_lossy().into(),
        ],
        &mount.log(),
    );
    let doc = common::last_json(&out);
    let levels: Vec<&str> = doc["levels"]
        .as_array()
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(levels.len(), 5, "{doc}");
    assert_eq!(doc["tile"], serde_json::json!([256, 256]), "{doc}");
    let top = levels[levels.len() - 1];
    // Through the page cache (`--io cache`; the default reads tiled files direct) the
    // kernel reads 2 MiB ahead of the header: past the top level's 1.6 MB, into the
    // next level's first tiles. Every other mode reads the tile's level alone.
    let cache = common::mount::io_args().iter().any(|a| a == "cache");
    let read_ahead = if cache {
        Some(levels[levels.len() - 2])
    } else {
        None
    };
    for level in &levels {
        let fetched = doc["fetched"][level].as_u64().expect("bytes fetched");
        if *level == top {
            assert!(fetched > 0, "the top level read nothing: {doc}");
        } else if Some(*level) != read_ahead {
            assert_eq!(
                fetched, 0,
                "level {level} was read for a tile of {top}: {doc}"
            );
        }
    }
}

#[test]
fn an_f_order_mount_has_no_ome_tiff_and_says_why() {
    let f = fixtures();
    let mount = Mount::new(
        &f.dir.join("ngff04.zarr"),
        &["--views", "all", "--order", "F", "--log-level", "info"],
    );
    let root = &mount.mountpoint;
    assert!(root.join("camera").is_dir());
    assert!(
        root.join("camera/s0").is_file(),
        "the levels stay plain files"
    );
    assert!(
        !root.join("camera.ome.tif").exists(),
        "an F-order mount shows an OME-TIFF"
    );
    let log = mount.log();
    assert!(
        log.lines()
            .any(|l| l.contains("/camera: no OME-TIFF: ") && l.contains("F order")),
        "no log line says why:\n{log}"
    );
}
