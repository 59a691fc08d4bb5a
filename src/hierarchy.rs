//! Node discovery: which layout a store holds, what node sits at a path, and a group's
//! children — explicit and implicit groups in every layout, consolidated metadata first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::metadata::{draft, parse_json, v2, v3, ArrayMetadata, GroupMetadata, NodeMetadata};
use crate::store::{Store, StoreExt};

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Array,
    Group,
    ImplicitGroup,
}

impl NodeKind {
    pub fn label(&self) -> &'static str {
        match self {
            NodeKind::Array => "array",
            NodeKind::Group => "group",
            NodeKind::ImplicitGroup => "implicit group",
        }
    }

    pub fn is_group(&self) -> bool {
        !matches!(self, NodeKind::Array)
    }
}

/// A resolved node.
#[derive(Debug, Clone)]
pub enum Node {
    Array(Arc<ArrayMetadata>),
    Group(GroupMetadata),
    ImplicitGroup,
}

impl Node {
    pub fn kind(&self) -> NodeKind {
        match self {
            Node::Array(_) => NodeKind::Array,
            Node::Group(_) => NodeKind::Group,
            Node::ImplicitGroup => NodeKind::ImplicitGroup,
        }
    }
}

#[derive(Debug, Clone)]
enum Layout {
    V3,
    V2,
    Draft(draft::EntryPoint),
}

/// How deep to look below a folder without metadata for a node that makes it a group.
const IMPLICIT_DEPTH: usize = 8;

/// How many store requests one such look may make: a folder tree that fans out (or links
/// back into itself) is given up on, not walked for ever.
const IMPLICIT_BUDGET: usize = 1024;

/// Paths remembered as missing at most; the set starts over when full.
const MAX_MISSING: usize = 1 << 16;

/// Whether `name` can be a directory entry: node names from a store that cannot (empty,
/// `.`, `..`, with `/` or NUL, longer than a file name may be) are left out of listings.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name.contains(['/', '\0'])
}

/// A Zarr hierarchy in a store.
pub struct Hierarchy {
    store: Arc<dyn Store>,
    layout: Layout,
    /// Nodes resolved so far: the store is immutable while it is read.
    nodes: Mutex<HashMap<String, Node>>,
    /// Paths known to hold no node (negative cache: a lookup of a missing name costs the
    /// store one visit, not one per `stat`).
    missing: Mutex<HashSet<String>>,
    /// Directory listings made so far.
    listings: Mutex<HashMap<String, Vec<(String, NodeKind)>>>,
    /// Consolidated documents by node path ("" for the root), in the layout's own form.
    consolidated: Option<Map<String, Value>>,
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// Normalize a user path: `/a/b/` -> `a/b`, `/` -> ``.
pub fn normalize(path: &str) -> String {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect::<Vec<_>>()
        .join("/")
}

impl Hierarchy {
    /// Detect the layout of `store` and read its root node; fails when it holds no Zarr
    /// hierarchy or when the root's own metadata cannot be used (nothing could be shown).
    pub fn open(store: Arc<dyn Store>) -> Result<Hierarchy> {
        let h = Self::detect(store)?;
        match h.node("") {
            Ok(_) | Err(Error::NotFound(_)) => Ok(h),
            Err(e) => Err(e),
        }
    }

    /// The hierarchy of `store`, its layout found from the root's documents.
    fn detect(store: Arc<dyn Store>) -> Result<Hierarchy> {
        let mut h = Hierarchy {
            store,
            layout: Layout::V3,
            nodes: Mutex::new(HashMap::new()),
            missing: Mutex::new(HashSet::new()),
            listings: Mutex::new(HashMap::new()),
            consolidated: None,
        };
        if let Some(bytes) = h.store.get("zarr.json")? {
            let doc = parse_json(&bytes, "zarr.json")?;
            match doc.get("zarr_format") {
                Some(Value::String(_)) => {
                    h.layout = Layout::Draft(draft::parse_entry_point(&doc, "zarr.json")?);
                }
                _ => {
                    if let Some(c) = doc
                        .get("consolidated_metadata")
                        .and_then(|c| c.get("metadata"))
                        .and_then(Value::as_object)
                    {
                        let mut map = c.clone();
                        map.insert(String::new(), doc.clone());
                        h.consolidated = Some(map);
                    }
                }
            }
            return Ok(h);
        }
        // Consolidated metadata that cannot be used is passed over: the documents it
        // would have summarized are read one by one.
        let consolidated = h.store.get(".zmetadata").and_then(|bytes| {
            let Some(bytes) = bytes else { return Ok(None) };
            let doc = parse_json(&bytes, ".zmetadata")?;
            match doc.get("metadata") {
                Some(Value::Object(meta)) => Ok(Some(meta.clone())),
                _ => Err(Error::metadata(".zmetadata", "no metadata object")),
            }
        });
        match consolidated {
            Ok(Some(meta)) => {
                h.layout = Layout::V2;
                h.consolidated = Some(meta);
                return Ok(h);
            }
            Ok(None) => {}
            Err(e) => log::warn!("{e}; reading the other metadata documents instead"),
        }
        for marker in [".zgroup", ".zarray", ".zattrs"] {
            if h.store.get(marker)?.is_some() {
                h.layout = Layout::V2;
                return Ok(h);
            }
        }
        // No root document: an implicit root group (v2 and v3 nodes are both found).
        if h.contains_node("", IMPLICIT_DEPTH, &mut { IMPLICIT_BUDGET })? {
            return Ok(h);
        }
        Err(Error::Invalid(
            "no Zarr hierarchy found in the store".into(),
        ))
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn format_label(&self) -> &'static str {
        match self.layout {
            Layout::V3 => "3",
            Layout::V2 => "2",
            Layout::Draft(_) => "3-draft-2020",
        }
    }

    /// A document from the store, or from consolidated metadata (v2 keys) when present.
    fn doc(&self, key: &str) -> Result<Option<Value>> {
        if let (Some(c), Layout::V2) = (&self.consolidated, &self.layout) {
            return Ok(c.get(key).cloned());
        }
        match self.store.get(key)? {
            Some(bytes) => Ok(Some(parse_json(&bytes, key)?)),
            None => Ok(None),
        }
    }

    /// The v3 document of the node at `path`, from consolidated metadata when present.
    fn v3_doc(&self, path: &str) -> Result<Option<Value>> {
        match (&self.consolidated, &self.layout) {
            (Some(c), Layout::V3) => Ok(c.get(path).cloned()),
            _ => self.doc(&format!("{}zarr.json", v3::prefix_of(path))),
        }
    }

    /// The kind of the node at `path`; `None` when there is none (or its name cannot be
    /// a store key). A node whose metadata cannot be read or used counts as an array, so
    /// that it is listed and its reads report why; it never fails its parent's listing.
    pub fn kind_of(&self, path: &str) -> Option<NodeKind> {
        match self.node(path) {
            Ok(node) => Some(node.kind()),
            Err(Error::NotFound(_) | Error::InvalidKey(_)) => None,
            Err(e) => {
                log::debug!("{e}");
                Some(NodeKind::Array)
            }
        }
    }

    fn implicit(&self, path: &str) -> Result<Option<NodeKind>> {
        let mut budget = IMPLICIT_BUDGET;
        if path.is_empty() || self.contains_node(path, IMPLICIT_DEPTH, &mut budget)? {
            Ok(Some(NodeKind::ImplicitGroup))
        } else {
            if budget == 0 {
                log::warn!(
                    "/{path}: gave up looking for nodes below it after {IMPLICIT_BUDGET} store requests"
                );
            }
            Ok(None)
        }
    }

    /// Whether any node lies below the folder of `path` (within `depth` levels), spending
    /// at most `budget` store requests.
    fn contains_node(&self, path: &str, depth: usize, budget: &mut usize) -> Result<bool> {
        if let Some(c) = &self.consolidated {
            let prefix = v3::prefix_of(path);
            return Ok(c.keys().any(|k| k.starts_with(&prefix)));
        }
        if depth == 0 || *budget == 0 {
            return Ok(false);
        }
        *budget -= 1;
        let folder = match &self.layout {
            Layout::Draft(_) => format!("meta/root/{}", v3::prefix_of(path)),
            _ => v3::prefix_of(path),
        };
        let listing = self.store.list_dir(&folder)?;
        let markers: &[&str] = match &self.layout {
            Layout::Draft(_) => return Ok(!listing.keys.is_empty() || !listing.prefixes.is_empty()),
            _ => &["zarr.json", ".zarray", ".zgroup"],
        };
        for sub in listing.prefixes.iter().filter(|s| valid_name(s)) {
            let child = join(path, sub);
            let child_prefix = v3::prefix_of(&child);
            for m in markers {
                if *budget == 0 {
                    return Ok(false);
                }
                *budget -= 1;
                // A marker that exists but cannot be read still marks a node.
                match self.store.get(&format!("{child_prefix}{m}")) {
                    Ok(None) | Err(Error::InvalidKey(_)) => {}
                    Ok(Some(_)) | Err(_) => return Ok(true),
                }
            }
            if self.contains_node(&child, depth - 1, budget)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Resolve the node at `path` ("" or "/" for the root).
    /// The metadata of the array at `path`; an error if it is not an array.
    pub fn array(&self, path: &str) -> Result<Arc<ArrayMetadata>> {
        match self.node(path)? {
            Node::Array(meta) => Ok(meta),
            _ => Err(Error::Invalid(format!("{path}: not an array"))),
        }
    }

    pub fn node(&self, path: &str) -> Result<Node> {
        let path = normalize(path);
        if let Some(node) = self.nodes.lock().get(&path) {
            return Ok(node.clone());
        }
        if self.missing.lock().contains(&path) {
            return Err(Error::NotFound(if path.is_empty() {
                "/".into()
            } else {
                path
            }));
        }
        match self.resolve(&path) {
            Ok(node) => {
                self.nodes.lock().insert(path, node.clone());
                Ok(node)
            }
            Err(Error::NotFound(what)) => {
                let mut missing = self.missing.lock();
                if missing.len() >= MAX_MISSING {
                    missing.clear();
                }
                missing.insert(path);
                Err(Error::NotFound(what))
            }
            Err(e) => Err(e),
        }
    }

    fn resolve(&self, path: &str) -> Result<Node> {
        let path = path.to_string();
        let not_found = || {
            Error::NotFound(if path.is_empty() {
                "/".into()
            } else {
                path.clone()
            })
        };
        let parsed = match &self.layout {
            Layout::Draft(entry) => {
                let akey = draft::meta_key(entry, &path, "array");
                let gkey = draft::meta_key(entry, &path, "group");
                if let Some(d) = self.doc(&akey)? {
                    Some(draft::parse_array(&d, &path, &akey)?)
                } else {
                    self.doc(&gkey)?.map(|d| draft::parse_group(&d))
                }
            }
            _ => match self.v3_doc(&path)? {
                Some(d) => {
                    let key = format!("{}zarr.json", v3::prefix_of(&path));
                    Some(v3::parse_node(&d, &path, &key)?)
                }
                None => self.v2_node(&path)?,
            },
        };
        match parsed {
            Some(NodeMetadata::Array(a)) => Ok(Node::Array(Arc::new(*a))),
            Some(NodeMetadata::Group(g)) => Ok(Node::Group(g)),
            None => match self.implicit(&path)? {
                Some(_) => Ok(Node::ImplicitGroup),
                None => Err(not_found()),
            },
        }
    }

    fn v2_node(&self, path: &str) -> Result<Option<NodeMetadata>> {
        let prefix = v3::prefix_of(path);
        let attrs = self.doc(&format!("{prefix}.zattrs"))?;
        let key = format!("{prefix}.zarray");
        if let Some(d) = self.doc(&key)? {
            let meta = v2::parse_array(&d, attrs.as_ref(), path, &key)?;
            return Ok(Some(NodeMetadata::Array(Box::new(meta))));
        }
        if self.doc(&format!("{prefix}.zgroup"))?.is_some() {
            return Ok(Some(NodeMetadata::Group(GroupMetadata {
                attributes: attrs
                    .and_then(|a| a.as_object().cloned())
                    .unwrap_or_default(),
                consolidated: None,
            })));
        }
        Ok(None)
    }

    /// The children of the group at `path`, sorted by name, with their kinds (listed
    /// once: the store is immutable while it is read).
    pub fn children(&self, path: &str) -> Result<Vec<(String, NodeKind)>> {
        let path = normalize(path);
        if let Some(hit) = self.listings.lock().get(&path) {
            return Ok(hit.clone());
        }
        let children = self.list_children(&path)?;
        self.listings.lock().insert(path, children.clone());
        Ok(children)
    }

    fn list_children(&self, path: &str) -> Result<Vec<(String, NodeKind)>> {
        let path = path.to_string();
        let mut names: Vec<String> = Vec::new();
        match (&self.consolidated, &self.layout) {
            (Some(c), _) => {
                let prefix = v3::prefix_of(&path);
                for k in c.keys() {
                    // v2 keys name documents (a/b/.zarray); v3 keys name nodes (a/b).
                    let node = match self.layout {
                        Layout::V2 => k.rsplit_once('/').map_or("", |(p, _)| p),
                        _ => k.as_str(),
                    };
                    if let Some(rest) = node.strip_prefix(&prefix).filter(|r| !r.is_empty()) {
                        let name = rest.split('/').next().unwrap_or(rest);
                        if (!path.is_empty() || !node.is_empty())
                            && !names.iter().any(|n| n == name)
                        {
                            names.push(name.to_string());
                        }
                    }
                }
            }
            (None, Layout::Draft(entry)) => {
                let listing = self
                    .store
                    .list_dir(&format!("meta/root/{}", v3::prefix_of(&path)))?;
                for key in &listing.keys {
                    for kind in ["array", "group"] {
                        let suffix = format!(".{kind}{}", entry.suffix);
                        if let Some(name) = key.strip_suffix(&suffix) {
                            names.push(name.to_string());
                        }
                    }
                }
                names.extend(listing.prefixes.iter().cloned());
            }
            (None, _) => names = self.store.list_dir(&v3::prefix_of(&path))?.prefixes,
        }
        names.sort();
        names.dedup();
        let mut out = Vec::new();
        for name in names {
            if !valid_name(&name) {
                let shown: String = name.chars().take(64).collect();
                log::warn!("/{path}: left out a node named {shown:?}: not a valid file name");
                continue;
            }
            if let Some(kind) = self.kind_of(&join(&path, &name)) {
                out.push((name, kind));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    const ZARRAY: &str = r#"{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i2",
        "compressor": null, "fill_value": 0, "order": "C", "filters": null}"#;

    fn open(entries: &[(&str, &str)]) -> Hierarchy {
        let mut store = MemoryStore::new();
        for (k, v) in entries {
            store.insert(*k, v.as_bytes().to_vec());
        }
        Hierarchy::open(Arc::new(store)).unwrap()
    }

    fn names(h: &Hierarchy, path: &str) -> Vec<(String, NodeKind)> {
        h.children(path).unwrap()
    }

    #[test]
    fn unusable_consolidated_metadata_is_passed_over() {
        let h = open(&[
            (".zmetadata", "{not json"),
            (".zgroup", r#"{"zarr_format": 2}"#),
            ("a/.zarray", ZARRAY),
        ]);
        assert_eq!(names(&h, ""), vec![("a".to_string(), NodeKind::Array)]);
    }

    #[test]
    fn lying_consolidated_names_are_left_out_and_bad_nodes_listed_alone() {
        let long = "x".repeat(5000);
        let zmeta = serde_json::json!({"zarr_consolidated_format": 1, "metadata": {
            ".zgroup": {"zarr_format": 2},
            "a/.zarray": serde_json::from_str::<Value>(ZARRAY).unwrap(),
            "../b/.zarray": serde_json::from_str::<Value>(ZARRAY).unwrap(),
            "/.zarray": serde_json::from_str::<Value>(ZARRAY).unwrap(),
            format!("{long}/.zarray"): serde_json::from_str::<Value>(ZARRAY).unwrap(),
            "bad/.zarray": {"zarr_format": 2, "shape": "no"},
        }});
        let h = open(&[(".zmetadata", &zmeta.to_string())]);
        assert_eq!(
            names(&h, ""),
            vec![
                ("a".to_string(), NodeKind::Array),
                ("bad".to_string(), NodeKind::Array)
            ]
        );
        assert!(matches!(h.node("bad"), Err(Error::Metadata { .. })));
        assert!(matches!(h.node("a"), Ok(Node::Array(_))));
    }

    /// A store that counts the requests made of it.
    struct Counting(MemoryStore, std::sync::atomic::AtomicUsize);

    impl Store for Counting {
        fn read(
            &self,
            key: &str,
            r: Option<crate::store::ByteRange>,
        ) -> Result<Option<crate::store::Value>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.read(key, r)
        }
        fn list_dir(&self, prefix: &str) -> Result<crate::store::Listing> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.list_dir(prefix)
        }
        fn head(&self, key: &str) -> Result<Option<crate::store::Head>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.head(key)
        }
        fn will_need(&self, _key: &str) {}
        fn caps(&self) -> crate::store::Caps {
            self.0.caps()
        }
    }

    #[test]
    fn a_fan_out_of_folders_without_nodes_ends_the_implicit_group_probe() {
        // Six levels of six folders each and no node: 56,000 folders to walk, given up on
        // after the probe's budget of requests.
        let mut store = MemoryStore::new();
        store.insert(
            "zarr.json",
            br#"{"zarr_format": 3, "node_type": "group"}"#.to_vec(),
        );
        let mut paths = vec![String::new()];
        for _ in 0..6 {
            paths = paths
                .iter()
                .flat_map(|p| (0..6).map(move |c| format!("{p}{c}/")))
                .collect();
        }
        for p in &paths {
            store.insert(format!("top/{p}x"), b"not a node".to_vec());
        }
        let counting = Arc::new(Counting(store, Default::default()));
        let h = Hierarchy::open(counting.clone()).unwrap();
        assert_eq!(h.children("").unwrap(), vec![]);
        let requests = counting.1.load(std::sync::atomic::Ordering::Relaxed);
        assert!(requests < 4 * IMPLICIT_BUDGET, "{requests} requests");
    }
}
