//! End-to-end tests of the georeferenced views (issue 27), mounting for real: the
//! stores of `scripts/make_fixtures_geo.py` (xarray + rioxarray to Zarr v2 and v3, CF
//! netCDF converted by xarray, GDAL's own Zarr writer) mounted with every view; each
//! array's `.tif`, `.vrt` and ENVI header opened by GDAL (the one in rasterio's wheel
//! and Debian's 3.6, `scripts/check_geo.py`) must give the geotransform, CRS, nodata,
//! scale, offset and values of GDAL's Zarr driver on the store; arrays whose conventions
//! are absent, contradictory or irregular get no georeference and a log line saying why.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::mount::Mount;
use common::{CliRun, TempDir};
use serde_json::Value;

fn repo() -> PathBuf {
    crate::common::repo()
}

fn check_geo(python: &Path, args: &[String]) -> (CliRun, String) {
    let run = CliRun::run(
        Command::new(python)
            .arg(repo().join("scripts/check_geo.py"))
            .args(args),
    );
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    (run, stdout)
}

struct Fixtures {
    dir: PathBuf,
    arrays: Vec<Value>,
    /// What `check_geo.py expect` wrote: GDAL's reading of the stores.
    expected: TempDir,
}

fn fixtures() -> Fixtures {
    let (dir, doc) = common::manifest_at("geo/manifest.json", "make_fixtures_geo.py");
    let dir = dir.join("geo");
    let arrays = doc["arrays"].as_array().cloned().unwrap_or_default();
    assert!(
        arrays.len() >= 20,
        "too few fixture arrays: {}",
        arrays.len()
    );
    let expected = TempDir::new("geo-expect");
    let (run, stdout) = check_geo(
        &common::venv_python("ZARRFS_GEO_PYTHON", "venv-geo"),
        &[
            "expect".into(),
            dir.join("manifest.json").to_string_lossy().into(),
            expected.path().to_string_lossy().into(),
        ],
    );
    assert!(run.success(), "check_geo.py expect failed: {run}\n{stdout}");
    Fixtures {
        dir,
        arrays,
        expected,
    }
}

fn stores(f: &Fixtures) -> Vec<String> {
    let mut stores: Vec<String> = f
        .arrays
        .iter()
        .filter_map(|a| a["store"].as_str().map(str::to_string))
        .collect();
    stores.sort();
    stores.dedup();
    stores
}

/// Every fixture store mounted with `args`.
fn mount_stores(f: &Fixtures, args: &[&str]) -> Vec<(String, Mount)> {
    stores(f)
        .into_iter()
        .map(|store| {
            let mount = Mount::new(&f.dir.join(&store), args);
            (store, mount)
        })
        .collect()
}

/// The fixture arrays that must be georeferenced.
fn georeferenced(f: &Fixtures) -> u64 {
    f.arrays.iter().filter(|a| a["georef"] == true).count() as u64
}

/// Runs `check_geo.py check` over `mounts` with both GDALs; the counts of each run.
fn both_gdals_agree(f: &Fixtures, mounts: &[(String, Mount)], views: &str) -> Vec<Value> {
    let mut args = vec![
        "check".to_string(),
        f.expected.path().to_string_lossy().into(),
        "--views".into(),
        views.into(),
    ];
    for (store, mount) in mounts {
        args.push("--mount".into());
        args.push(format!("{store}={}", mount.mountpoint.display()));
    }
    let logs: String = mounts.iter().map(|(_, m)| m.log()).collect();
    [
        ("ZARRFS_GEO_PYTHON", "venv-geo"),
        ("ZARRFS_VIEWS_PYTHON", "venv-views"),
    ]
    .iter()
    .map(|&(env, venv)| {
        let (run, stdout) = check_geo(&common::venv_python(env, venv), &args);
        println!("check_geo.py ({venv}) --views {views}:\n{stdout}");
        assert!(
            run.success(),
            "check_geo.py ({venv}) failed: {run}\n{stdout}\ndaemon logs: {}",
            common::tail(&logs, 3000)
        );
        common::last_json(&stdout)["counts"].clone()
    })
    .collect()
}

#[test]
fn gdal_reads_the_georeference_of_every_view_as_its_zarr_driver_does() {
    let f = fixtures();
    let mounts = mount_stores(&f, &["--views", "all", "--log-level", "info"]);
    let georef = georeferenced(&f);
    let plain = f.arrays.len() as u64 - georef;
    for counts in both_gdals_agree(&f, &mounts, "tif,vrt,hdr") {
        for view in ["tif", "vrt", "hdr"] {
            assert_eq!(counts[format!("georeferenced {view}")], georef, "{counts}");
            assert_eq!(counts[format!("plain {view}")], plain, "{counts}");
        }
    }
    // Each array left plain says why, once, at info level.
    for a in f.arrays.iter().filter(|a| a["georef"] == false) {
        let store = a["store"].as_str().unwrap_or("");
        let log = mounts
            .iter()
            .find(|(s, _)| s == store)
            .map(|(_, m)| m.log())
            .unwrap_or_default();
        let head = format!("/{}: not georeferenced: ", a["path"].as_str().unwrap_or(""));
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(&head)).collect();
        assert_eq!(
            lines.len(),
            1,
            "{store}: want one line with {head:?}:\n{log}"
        );
        let reason = a["reason"].as_str().unwrap_or("");
        assert!(
            lines[0].contains(reason) && lines[0].contains("INFO"),
            "{store}: {:?} does not say {reason:?} at info level",
            lines[0]
        );
    }
}

#[test]
fn an_f_order_vrt_keeps_the_georeference() {
    let f = fixtures();
    let mounts = mount_stores(&f, &["--views", "vrt", "--order", "F"]);
    let georef = georeferenced(&f);
    for counts in both_gdals_agree(&f, &mounts, "vrt") {
        assert_eq!(counts["georeferenced vrt"], georef, "{counts}");
    }
}

#[test]
fn big_endian_views_keep_the_georeference() {
    let f = fixtures();
    let mounts = mount_stores(&f, &["--views", "all", "--endian", "big"]);
    let georef = georeferenced(&f);
    for counts in both_gdals_agree(&f, &mounts, "tif,vrt,hdr") {
        for view in ["tif", "vrt", "hdr"] {
            assert_eq!(counts[format!("georeferenced {view}")], georef, "{counts}");
        }
    }
}
