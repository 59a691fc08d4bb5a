//! Writes the seed corpora of the fuzz targets from the stores the test scripts wrote:
//! `seeds OUT ROOT...` fills `OUT/<target>/` for every target, where each ROOT holds one
//! store per folder (target/fixtures: the writers' own output) or one case per folder
//! with its store in `store/` (target/hostile: the bad-input corpus).
//!
//! - metadata: per store, all its metadata documents; per array, the documents on its
//!   path and its first chunks;
//! - codec_chain: per array, its chunk representation and codecs with each of its first
//!   chunks, and the same codecs for a chunk of about 2 GiB (decoders must not trust
//!   sizes written in the chunk);
//! - sharding: per sharded v3 array, its `zarr.json` and its first shards;
//! - view: a few structured inputs (the target decodes any bytes).
//!
//! Identical seeds are written once.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::metadata::{CodecSpec, Format};
use zarrfs::store::{FolderStore, StoreExt};
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

/// Chunks per array taken as seeds, at most.
const CHUNKS_PER_ARRAY: usize = 2;

/// The size the large-chunk variants of codec_chain seeds aim at.
const LARGE_CHUNK: u64 = 1 << 31;

struct Out {
    dir: PathBuf,
    names: BTreeSet<String>,
    seen: HashSet<(String, u64)>,
}

impl Out {
    fn write(&mut self, target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let mut h = DefaultHasher::new();
        bytes.hash(&mut h);
        if !self.seen.insert((target.to_string(), h.finish())) {
            return Ok(());
        }
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
    // Every metadata document of the store, whether or not the hierarchy opens.
    let mut all_docs: Vec<(String, Vec<u8>)> = Vec::new();
    for key in keys
        .iter()
        .filter(|k| *k == "zarr.json" || doc_node(k).is_some())
    {
        if let Some(bytes) = small_chunk(&store, key) {
            all_docs.push((key.clone(), bytes));
        }
    }
    if !all_docs.is_empty() && all_docs.iter().map(|(_, v)| v.len()).sum::<usize>() <= MAX_CHUNK * 4
    {
        let packed = pack(all_docs.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        out.write("metadata", &format!("{name}__docs"), &packed)
            .map_err(|e| e.to_string())?;
    }
    let h = Hierarchy::open(store.clone()).map_err(|e| e.to_string())?;
    let nodes = zarrfs::cli::inspect::tree(&h, "").map_err(|e| e.to_string())?;
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
        let grid = meta.grid_shape();
        let chunks: Vec<(String, Vec<u8>)> = zarrfs_fuzz::first_indices(&grid, 64)
            .into_iter()
            .map(|idx| meta.chunk_key(&idx))
            .filter_map(|key| small_chunk(&store, &key).map(|c| (key, c)))
            .take(CHUNKS_PER_ARRAY)
            .collect();
        let seed_name = format!("{name}_{path}");

        // metadata: the documents on the array's path and its first chunks.
        let mut docs: Vec<(String, Vec<u8>)> = Vec::new();
        for key in &keys {
            let include = key == "zarr.json" || doc_node(key).is_some_and(|n| on_path(&n, path));
            if include {
                if let Ok(Some(bytes)) = store.get(key) {
                    docs.push((key.clone(), bytes));
                }
            }
        }
        for (key, c) in &chunks {
            if !c.contains(&RECORD) && !c.contains(&KEY_END) {
                docs.push((key.clone(), c.clone()));
            }
        }
        let packed = pack(docs.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        out.write("metadata", &seed_name, &packed)
            .map_err(|e| e.to_string())?;

        // codec_chain: the chunk representation, codecs and first chunks.
        let codecs: Vec<Value> = meta.codecs.iter().map(CodecSpec::to_json).collect();
        let header = |shape: &[u64]| {
            json!({
                "v2": meta.format != Format::V3,
                "dtype": meta.dtype_json,
                "shape": shape,
                "fill_value": meta.fill_json,
                "codecs": codecs,
            })
            .to_string()
            .into_bytes()
        };
        let first_chunk = chunks.first().map(|(_, c)| c.clone()).unwrap_or_default();
        let mut variants = vec![(String::new(), meta.chunk_shape.clone(), first_chunk.clone())];
        for (i, (_, c)) in chunks.iter().enumerate().skip(1) {
            variants.push((format!("_{i}"), meta.chunk_shape.clone(), c.clone()));
        }
        // The same codecs for a chunk of about LARGE_CHUNK bytes (first axis stretched).
        // (Variable-length elements count 8 bytes, as in the metadata's size check.)
        let item = meta.dtype.size().unwrap_or(8);
        if let Some(first_axis) = meta.chunk_shape.first() {
            let rest: u64 = meta.chunk_shape[1..].iter().product::<u64>().max(1) * item as u64;
            // A multiple of the original extent, so that inner chunks still divide it.
            let stretched = (LARGE_CHUNK / rest).div_ceil(*first_axis).max(1) * first_axis;
            let mut shape = meta.chunk_shape.clone();
            shape[0] = stretched;
            variants.push(("_large".into(), shape, first_chunk));
        }
        for (suffix, shape, chunk) in variants {
            let mut seed = header(&shape);
            seed.push(RECORD);
            seed.extend(chunk);
            out.write("codec_chain", &format!("{seed_name}{suffix}"), &seed)
                .map_err(|e| e.to_string())?;
        }

        // sharding: a sharded v3 array's document and first shards.
        let sharded = meta.codecs.iter().any(|c| c.name == "sharding_indexed");
        if meta.format == Format::V3 && sharded {
            if let Ok(Some(doc)) = store.get(&meta.meta_key) {
                for (i, (_, shard)) in chunks.iter().enumerate() {
                    let mut seed = doc.clone();
                    seed.push(RECORD);
                    seed.extend(shard);
                    out.write("sharding", &format!("{seed_name}_{i}"), &seed)
                        .map_err(|e| e.to_string())?;
                }
            }
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out_dir, roots @ ..] = args.as_slice() else {
        eprintln!("usage: seeds OUT ROOT...");
        std::process::exit(2);
    };
    let mut out = Out {
        dir: PathBuf::from(out_dir),
        names: BTreeSet::new(),
        seen: HashSet::new(),
    };
    let mut unusable = 0;
    for root in roots {
        let mut stores: Vec<PathBuf> = match fs::read_dir(root) {
            Ok(e) => e
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect(),
            Err(e) => {
                eprintln!("seeds: {root}: {e}");
                std::process::exit(1);
            }
        };
        stores.sort();
        for dir in &stores {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // A bad-input case keeps its store in store/.
            let store = if dir.join("store").is_dir() {
                dir.join("store")
            } else {
                dir.clone()
            };
            // A store that does not open still gave its documents as seeds.
            if seed_store(&store, &name, &mut out).is_err() {
                unusable += 1;
            }
        }
    }
    if unusable > 0 {
        println!("seeds: {unusable} stores do not open as a hierarchy (documents only)");
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
