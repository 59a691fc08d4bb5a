//! Where each Zarr layout keeps its metadata documents: how a store's layout is told from
//! its root documents, which keys hold a node's documents (and which entries of
//! consolidated metadata stand for them), which names of a folder listing are nodes, and
//! which document names mark a node below a folder (implicit groups). The one place that
//! knows v2's `.zarray` / `.zgroup` / `.zattrs` / `.zmetadata`, v3's `zarr.json` and the
//! 2020 draft's `meta/root` tree.

use serde_json::{Map, Value};

use super::{draft, parse_json, v2, v3, GroupMetadata, NodeMetadata};
use crate::error::{Error, Result};
use crate::store::{Listing, Store, Version};

/// The document names that mark a hierarchy's root, in any layout: what a store holding
/// one (a zip archive's top folder) is opened at (`StoreConfig::root_markers`).
pub const ROOT_MARKERS: &[&str] = &["zarr.json", ".zgroup", ".zarray", ".zmetadata"];

/// How a store lays out its metadata.
#[derive(Debug, Clone)]
pub enum Layout {
    /// Zarr v3 (`zarr.json` per node); v2 nodes are found in it too.
    V3,
    /// Zarr v2 (`.zarray`, `.zgroup`, `.zattrs` per node).
    V2,
    /// The 2020 v3 draft (`zarr.json` entry point, documents under `meta/root`).
    Draft(draft::EntryPoint),
}

/// A metadata document and the version of what it was read from.
#[derive(Debug, Clone)]
pub struct Doc {
    pub value: Value,
    pub version: Version,
}

/// Consolidated metadata: the documents by the key the layout gives them, and the version
/// of the document that held them.
#[derive(Debug, Clone)]
pub struct Consolidated {
    pub docs: Map<String, Value>,
    pub version: Version,
}

/// What a store's root documents say of it.
pub struct Detected {
    pub layout: Layout,
    pub consolidated: Option<Consolidated>,
}

/// A document of `store`, parsed, with its version; `None` when the key does not exist.
pub fn read_doc(store: &dyn Store, key: &str) -> Result<Option<Doc>> {
    match store.read(key, None)? {
        Some(v) => Ok(Some(Doc {
            value: parse_json(&v.bytes, key)?,
            version: v.version,
        })),
        None => Ok(None),
    }
}

/// The layout of `store` from its root documents, with its consolidated metadata when it
/// has usable ones; `None` when it has no root document (an implicit root group, or no
/// hierarchy at all).
pub fn detect(store: &dyn Store) -> Result<Option<Detected>> {
    if let Some(doc) = read_doc(store, "zarr.json")? {
        if let Some(Value::String(_)) = doc.value.get("zarr_format") {
            let entry = draft::parse_entry_point(&doc.value, "zarr.json")?;
            return Ok(Some(Detected {
                layout: Layout::Draft(entry),
                consolidated: None,
            }));
        }
        let consolidated = doc
            .value
            .get("consolidated_metadata")
            .and_then(|c| c.get("metadata"))
            .and_then(Value::as_object)
            .map(|c| {
                let mut docs = c.clone();
                docs.insert(String::new(), doc.value.clone());
                Consolidated {
                    docs,
                    version: doc.version.clone(),
                }
            });
        return Ok(Some(Detected {
            layout: Layout::V3,
            consolidated,
        }));
    }
    // Consolidated metadata that cannot be used is passed over: the documents it would
    // have summarized are read one by one.
    let consolidated = read_doc(store, ".zmetadata").and_then(|doc| {
        let Some(doc) = doc else { return Ok(None) };
        match doc.value.get("metadata") {
            Some(Value::Object(docs)) => Ok(Some(Consolidated {
                docs: docs.clone(),
                version: doc.version,
            })),
            _ => Err(Error::metadata(".zmetadata", "no metadata object")),
        }
    });
    match consolidated {
        Ok(Some(c)) => {
            return Ok(Some(Detected {
                layout: Layout::V2,
                consolidated: Some(c),
            }))
        }
        Ok(None) => {}
        Err(e) => log::warn!("{e}; reading the other metadata documents instead"),
    }
    for marker in [".zgroup", ".zarray", ".zattrs"] {
        if store.read(marker, None)?.is_some() {
            return Ok(Some(Detected {
                layout: Layout::V2,
                consolidated: None,
            }));
        }
    }
    Ok(None)
}

/// Combine the versions of the documents one node was read from.
fn joined(a: Version, b: Option<&Version>) -> Version {
    match b {
        None => a,
        Some(b) => Version::joined(a, b),
    }
}

impl Layout {
    /// The format's name, as `inspect` prints it.
    pub fn label(&self) -> &'static str {
        match self {
            Layout::V3 => "3",
            Layout::V2 => "2",
            Layout::Draft(_) => "3-draft-2020",
        }
    }

    /// The entry of consolidated metadata `docs` that stands for the document `key`
    /// (`Some(None)`: it has none, so the document does not exist); `None` when
    /// consolidated metadata does not cover such documents (v2 documents in a v3 store).
    pub fn consolidated_doc<'a>(
        &self,
        docs: &'a Map<String, Value>,
        key: &str,
    ) -> Option<Option<&'a Value>> {
        match self {
            // v3 consolidated metadata is keyed by node path.
            Layout::V3 => {
                let path = key.strip_suffix("zarr.json")?;
                Some(docs.get(path.trim_end_matches('/')))
            }
            _ => Some(docs.get(key)),
        }
    }

    /// The node at `path` from its documents, fetched by key with `doc`, and the version
    /// of the documents it was read from; `None` when it has none.
    pub fn read_node(
        &self,
        path: &str,
        doc: &dyn Fn(&str) -> Result<Option<Doc>>,
    ) -> Result<Option<(NodeMetadata, Version)>> {
        if let Layout::Draft(entry) = self {
            let akey = draft::meta_key(entry, path, "array");
            if let Some(d) = doc(&akey)? {
                return Ok(Some((
                    draft::parse_array(&d.value, path, &akey)?,
                    d.version,
                )));
            }
            let gkey = draft::meta_key(entry, path, "group");
            return Ok(doc(&gkey)?.map(|d| (draft::parse_group(&d.value), d.version)));
        }
        let prefix = v3::prefix_of(path);
        let key = format!("{prefix}zarr.json");
        if let Some(d) = doc(&key)? {
            return Ok(Some((v3::parse_node(&d.value, path, &key)?, d.version)));
        }
        let attrs = doc(&format!("{prefix}.zattrs"))?;
        let key = format!("{prefix}.zarray");
        if let Some(d) = doc(&key)? {
            let meta = v2::parse_array(&d.value, attrs.as_ref().map(|a| &a.value), path, &key)?;
            let version = joined(d.version, attrs.as_ref().map(|a| &a.version));
            return Ok(Some((NodeMetadata::Array(Box::new(meta)), version)));
        }
        if let Some(d) = doc(&format!("{prefix}.zgroup"))? {
            let version = joined(d.version, attrs.as_ref().map(|a| &a.version));
            let attributes = attrs
                .and_then(|a| a.value.as_object().cloned())
                .unwrap_or_default();
            let group = GroupMetadata {
                attributes,
                consolidated: None,
            };
            return Ok(Some((NodeMetadata::Group(group), version)));
        }
        Ok(None)
    }

    /// The folder whose listing holds the nodes below the group at `path`.
    pub fn folder(&self, path: &str) -> String {
        match self {
            Layout::Draft(_) => format!("meta/root/{}", v3::prefix_of(path)),
            _ => v3::prefix_of(path),
        }
    }

    /// The names of the nodes a listing of [`Layout::folder`] holds (unchecked).
    pub fn child_names(&self, listing: &Listing) -> Vec<String> {
        let mut names = listing.prefixes.clone();
        if let Layout::Draft(entry) = self {
            for key in &listing.keys {
                for kind in ["array", "group"] {
                    if let Some(name) = key.strip_suffix(&format!(".{kind}{}", entry.suffix)) {
                        names.push(name.to_string());
                    }
                }
            }
        }
        names
    }

    /// The names of the documents that make a folder a node; `None` when anything in a
    /// folder of the layout's metadata tree marks a node (the draft).
    pub fn node_markers(&self) -> Option<&'static [&'static str]> {
        match self {
            Layout::Draft(_) => None,
            _ => Some(&["zarr.json", ".zarray", ".zgroup"]),
        }
    }

    /// The node path an entry of consolidated metadata stands for: v2 entries name
    /// documents (`a/b/.zarray`), v3 entries nodes (`a/b`).
    pub fn consolidated_node<'a>(&self, key: &'a str) -> &'a str {
        match self {
            Layout::V2 => key.rsplit_once('/').map_or("", |(p, _)| p),
            _ => key,
        }
    }
}
