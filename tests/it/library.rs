//! Every fixture array read through the library, in C and F order and both byte orders,
//! compared with the sha256 of the writer's own read-back.

use crate::common;

use std::sync::Arc;

use common::{HashWriter, Manifest, LAYOUTS};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::read::array::Array;
use zarrfs::read::cache::UnitCache;
use zarrfs::read::text::write_var_lines;
use zarrfs::read::view::{Layout, Order, View};
use zarrfs::store::FolderStore;

/// Fixture arrays written with codecs zarrfs does not implement (see docs/stores.md): each
/// must fail alone with an "unsupported" error.
const UNSUPPORTED: [(&str, &str); 2] = [
    ("v3", "codecs/numcodecs_jenkins_lookup3"),
    ("v2_zarr2", "categorize_object"),
];

fn check_array(m: &Manifest, entry: &serde_json::Value) -> Result<(), String> {
    let store = entry["store"].as_str().unwrap_or_default();
    let path = entry["path"].as_str().unwrap_or_default();
    let folder = FolderStore::open(m.store_dir(store)).map_err(|e| e.to_string())?;
    let h = Hierarchy::open(Arc::new(folder)).map_err(|e| e.to_string())?;
    let meta = match h.node(path).map_err(|e| e.to_string())? {
        Node::Array(meta) => meta,
        other => return Err(format!("not an array: {:?}", other.kind())),
    };
    let shape: Vec<u64> =
        serde_json::from_value(entry["shape"].clone()).map_err(|e| e.to_string())?;
    if meta.shape != shape {
        return Err(format!("shape {:?}, expected {shape:?}", meta.shape));
    }
    let array = Arc::new(Array::open(meta, h.store().clone()).map_err(|e| e.to_string())?);
    let cache = Arc::new(UnitCache::new(1 << 20));
    let expected = &entry["sha256"];
    if entry["vlen"].as_bool() == Some(true) {
        for (label, order) in [("C", Order::C), ("F", Order::F)] {
            let mut w = HashWriter::default();
            write_var_lines(&array, &cache, order, &mut w).map_err(|e| e.to_string())?;
            if w.hex() != expected[label] {
                return Err(format!("{label} text differs"));
            }
        }
        return Ok(());
    }
    let itemsize = entry["itemsize"].as_u64().unwrap_or(0) as usize;
    if array.meta.dtype.size() != Some(itemsize) {
        return Err(format!(
            "itemsize {:?}, expected {itemsize}",
            array.meta.dtype.size()
        ));
    }
    for (label, f_order, big_endian) in LAYOUTS {
        let order = if f_order { Order::F } else { Order::C };
        let view = View::new(array.clone(), cache.clone(), Layout { order, big_endian })
            .map_err(|e| e.to_string())?;
        if view.size() != entry["nbytes"].as_u64().unwrap_or(u64::MAX) {
            return Err(format!("size {} differs", view.size()));
        }
        let mut w = HashWriter::default();
        // An odd block size exercises reads that split elements.
        view.write_all(&mut w, 4093).map_err(|e| e.to_string())?;
        if w.hex() != expected[label] {
            return Err(format!("{label} bytes differ"));
        }
    }
    Ok(())
}

#[test]
fn every_fixture_array_is_byte_exact() {
    let m = Manifest::load();
    let mut failures = Vec::new();
    let arrays = m.arrays();
    assert!(
        arrays.len() > 100,
        "too few fixture arrays: {}",
        arrays.len()
    );
    for entry in arrays {
        let id = (
            entry["store"].as_str().unwrap_or(""),
            entry["path"].as_str().unwrap_or(""),
        );
        if UNSUPPORTED.contains(&id) {
            match check_array(&m, entry) {
                Err(e) if e.contains("unsupported") => continue,
                other => failures.push(format!("{id:?}: expected unsupported, got {other:?}")),
            }
            continue;
        }
        if let Err(e) = check_array(&m, entry) {
            failures.push(format!(
                "{}:{} ({}): {e}",
                entry["store"], entry["path"], entry["note"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} arrays failed:\n{}",
        failures.len(),
        arrays.len(),
        failures.join("\n")
    );
}
