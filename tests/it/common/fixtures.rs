//! Checks of a mounted fixture store against the manifest: every array's bytes (the
//! writer's own read-back) and every group's listing.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::mount::{array_file, Mount};
use super::{sha256, Manifest};

/// Arrays whose codecs zarrfs does not implement: their reads fail with EIO.
const UNSUPPORTED: [(&str, &str); 2] = [
    ("v3", "codecs/numcodecs_jenkins_lookup3"),
    ("v2_zarr2", "categorize_object"),
];

pub fn is_unsupported(entry: &Value) -> bool {
    UNSUPPORTED.contains(&(
        entry["store"].as_str().unwrap_or(""),
        entry["path"].as_str().unwrap_or(""),
    ))
}

/// The names of the manifest's stores.
pub fn stores(m: &Manifest) -> Vec<String> {
    m.doc["stores"]
        .as_array()
        .expect("stores")
        .iter()
        .map(|s| s["name"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The folder name of store `name` (its path in a bucket or on a web server).
pub fn store_folder(m: &Manifest, name: &str) -> String {
    m.store_dir(name)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

pub fn arrays_of<'a>(m: &'a Manifest, store: &str) -> Vec<&'a Value> {
    m.arrays().iter().filter(|a| a["store"] == store).collect()
}

/// Read every array of `store` through a mount of its folder with `args`; compare with
/// `label`'s hash.
pub fn check_store(
    m: &Manifest,
    store: &str,
    args: &[&str],
    label: &str,
    vlen_label: &str,
) -> Vec<String> {
    let mount = Mount::new(&m.store_dir(store), args);
    check_arrays(m, store, &mount, label, vlen_label)
}

/// Read every array of `store` through `mount`; compare with `label`'s hash.
pub fn check_arrays(
    m: &Manifest,
    store: &str,
    mount: &Mount,
    label: &str,
    vlen_label: &str,
) -> Vec<String> {
    check_arrays_at(m, store, &mount.mountpoint, label, vlen_label)
}

/// Read every array of `store` through a mount at `mountpoint`, made by anyone (mount(8),
/// another user); compare with `label`'s hash.
pub fn check_arrays_at(
    m: &Manifest,
    store: &str,
    mountpoint: &Path,
    label: &str,
    vlen_label: &str,
) -> Vec<String> {
    let mut failures = Vec::new();
    for entry in arrays_of(m, store) {
        let path = entry["path"].as_str().unwrap_or("");
        let file = array_file(m, store, path, mountpoint);
        let result = std::fs::read(&file);
        if is_unsupported(entry) {
            match result {
                Err(e) if e.raw_os_error() == Some(libc::EIO) => continue,
                other => failures.push(format!(
                    "{store}:{path}: expected EIO, got {:?}",
                    other.map(|b| b.len())
                )),
            }
            continue;
        }
        let want = if entry["vlen"] == true {
            vlen_label
        } else {
            label
        };
        match result {
            Ok(bytes) => {
                if sha256(&bytes) != entry["sha256"][want] {
                    failures.push(format!(
                        "{store}:{path} {label}: bytes differ ({} bytes)",
                        bytes.len()
                    ));
                }
                let size = std::fs::metadata(&file)
                    .map(|s| s.len())
                    .unwrap_or(u64::MAX);
                if size != bytes.len() as u64 {
                    failures.push(format!(
                        "{store}:{path}: stat size {size} but read {}",
                        bytes.len()
                    ));
                }
            }
            Err(e) => failures.push(format!("{store}:{path} {label}: {e}")),
        }
    }
    failures
}

/// The visible names of a mounted folder, or the error.
fn visible(dir: &Path) -> std::io::Result<BTreeSet<String>> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect())
}

/// Every group of `store` lists exactly its children through `mount`.
pub fn check_groups(m: &Manifest, store: &str, mount: &Mount) -> Vec<String> {
    let mut failures = Vec::new();
    for group in m.groups().iter().filter(|g| g["store"] == store) {
        let gpath = group["path"].as_str().unwrap_or("");
        let want: BTreeSet<String> = group["children"]
            .as_array()
            .expect("children")
            .iter()
            .map(|c| c["name"].as_str().unwrap_or("").to_string())
            .collect();
        match visible(&mount.path(gpath)) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!("{store}:/{gpath}: lists {got:?}, want {want:?}")),
            Err(e) => failures.push(format!("{store}:/{gpath}: {e}")),
        }
    }
    failures
}
