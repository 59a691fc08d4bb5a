//! Writes the seed corpora of the fuzz targets from the fixture stores that
//! scripts/make_fixtures.py wrote (zarr-python's own output):
//! `seeds FIXTURES OUT` fills `OUT/<target>/` for every target.
//!
//! - metadata: per array, the metadata documents on its path and its first chunk;
//! - codec_chain: per array, its chunk representation and codecs, and its first chunk;
//! - sharding: per sharded v3 array, its `zarr.json` and its first shard;
//! - view: a few structured inputs (the target decodes any bytes).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::metadata::{CodecSpec, Format};
use zarrfs::store::{FolderStore, Store};
use zarrfs_fuzz::{pack, KEY_END, RECORD};

/// Chunks larger than this are left out of seeds (small seeds fuzz faster).
const MAX_CHUNK: usize = 16 << 10;

fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, base, out),
            Ok(t) if t.is_file() => {
                if let Ok(rel) = p.strip_prefix(base) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
            _ => {}
        }
    }
}

/// The node path a metadata document belongs to, or `None` when `key` is no document.
fn doc_node(key: &str) -> Option<String> {
    let name = key.rsplit('/').next().unwrap_or(key);
    if let Some(rest) = key.strip_prefix("meta/root") {
        let rest = rest.trim_start_matches('/');
        let node = rest
            .strip_suffix(".array.json")
            .or_else(|| rest.strip_suffix(".group.json"))?;
        return Some(node.to_string());
    }
    let docs = ["zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"];
    if !docs.contains(&name) {
        return None;
    }
    Some(
        key[..key.len() - name.len()]
            .trim_end_matches('/')
            .to_string(),
    )
}

fn on_path(node: &str, array: &str) -> bool {
    node.is_empty() || node == array || array.starts_with(&format!("{node}/"))
}

struct Out {
    dir: PathBuf,
    names: BTreeSet<String>,
}

impl Out {
    fn write(&mut self, target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let dir = self.dir.join(target);
        fs::create_dir_all(&dir)?;
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        self.names.insert(format!("{target}/{name}"));
        fs::write(dir.join(name), bytes)
    }
}

fn small_chunk(store: &FolderStore, key: &str) -> Option<Vec<u8>> {
    store
        .get(key)
        .ok()
        .flatten()
        .filter(|b| b.len() <= MAX_CHUNK)
}

fn seed_store(root: &Path, name: &str, out: &mut Out) -> Result<(), String> {
    let store = Arc::new(FolderStore::open(root).map_err(|e| e.to_string())?);
    let mut keys = Vec::new();
    walk(root, root, &mut keys);
    keys.sort();
    let h = Hierarchy::open(store.clone()).map_err(|e| e.to_string())?;
    let nodes = zarrfs::inspect::tree(&h, "").map_err(|e| e.to_string())?;
    for node in nodes {
        if node.get("kind").and_then(Value::as_str) != Some("array") {
            continue;
        }
        let Some(path) = node.get("path").and_then(Value::as_str) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        let Ok(Node::Array(meta)) = h.node(path) else {
            continue;
        };
        let first = meta.chunk_key(&vec![0; meta.shape.len()]);
        let chunk = small_chunk(&store, &first);
        let seed_name = format!("{name}_{path}");

        // metadata: the documents on the array's path and its first chunk.
        let mut docs: Vec<(String, Vec<u8>)> = Vec::new();
        for key in &keys {
            let include = key == "zarr.json" || doc_node(key).is_some_and(|n| on_path(&n, path));
            if include {
                if let Ok(Some(bytes)) = store.get(key) {
                    docs.push((key.clone(), bytes));
                }
            }
        }
        if let Some(c) = chunk
            .as_ref()
            .filter(|c| !c.contains(&RECORD) && !c.contains(&KEY_END))
        {
            docs.push((first.clone(), c.clone()));
        }
        let packed = pack(docs.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        out.write("metadata", &seed_name, &packed)
            .map_err(|e| e.to_string())?;

        // codec_chain: the chunk representation, codecs and first chunk.
        let header = json!({
            "v2": meta.format != Format::V3,
            "dtype": meta.dtype_json,
            "shape": meta.chunk_shape,
            "fill_value": meta.fill_json,
            "codecs": meta.codecs.iter().map(CodecSpec::to_json).collect::<Vec<_>>(),
        });
        let mut seed = header.to_string().into_bytes();
        seed.push(RECORD);
        seed.extend(chunk.clone().unwrap_or_default());
        out.write("codec_chain", &seed_name, &seed)
            .map_err(|e| e.to_string())?;

        // sharding: a sharded v3 array's document and first shard.
        let sharded = meta.codecs.iter().any(|c| c.name == "sharding_indexed");
        if meta.format == Format::V3 && sharded {
            if let (Ok(Some(doc)), Some(shard)) = (store.get(&meta.meta_key), chunk) {
                let mut seed = doc;
                seed.push(RECORD);
                seed.extend(shard);
                out.write("sharding", &seed_name, &seed)
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, fixtures, out_dir] = args.as_slice() else {
        eprintln!("usage: seeds FIXTURES OUT");
        std::process::exit(2);
    };
    let mut out = Out {
        dir: PathBuf::from(out_dir),
        names: BTreeSet::new(),
    };
    let mut stores: Vec<PathBuf> = match fs::read_dir(fixtures) {
        Ok(e) => e
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) => {
            eprintln!("seeds: {fixtures}: {e}");
            std::process::exit(1);
        }
    };
    stores.sort();
    for root in &stores {
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Err(e) = seed_store(root, &name, &mut out) {
            eprintln!("seeds: {}: {e}", root.display());
        }
    }
    // view: structured inputs decode from any bytes; a few deterministic ones.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..8usize {
        let bytes: Vec<u8> = (0..64 + 64 * i)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        if let Err(e) = out.write("view", &format!("random_{i}"), &bytes) {
            eprintln!("seeds: {e}");
            std::process::exit(1);
        }
    }
    for target in ["metadata", "codec_chain", "sharding", "view"] {
        let n = out
            .names
            .iter()
            .filter(|n| n.starts_with(&format!("{target}/")))
            .count();
        if n == 0 {
            eprintln!("seeds: no seeds for {target} (are the fixtures written?)");
            std::process::exit(1);
        }
        println!("seeds: {target}: {n}");
    }
}
