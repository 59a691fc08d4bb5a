//! The hierarchy a mount shows: what node sits at a path, its metadata version and when
//! it was checked, and a group's children, explicit and implicit groups alike. Where the
//! nodes come from is the [`ZarrCatalog`] of its store, walked by its layout (`zarr.rs`;
//! an Icechunk repository is a store like any other, its version folders included). `demo.rs` writes a small
//! hierarchy with zarrfs's own encoders (for `zarrfs demo` and the tests).
//!
//! With a refresh interval (`--refresh`), what was resolved, listed or found missing is
//! read again from the store once older than the interval (and the catalog's consolidated
//! metadata with it), and [`Hierarchy::refresh`] forgets it at once for a path and all
//! below it. Each new reading of an array gives its metadata a version of its own, so
//! that nothing decoded under an older reading is served for it.

pub mod demo;
mod zarr;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The most threads that read the metadata documents of one listing's members at once.
const LISTING_THREADS: usize = 16;

/// Members of a listing worth one more thread reading their metadata.
const LISTED_PER_THREAD: usize = 8;
use crate::metadata::{ArrayMetadata, GroupMetadata, NodeMetadata};
use crate::store::{budget_for, Spans, Store, Version};
pub use zarr::ZarrCatalog;

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

/// A resolved node, the version of the metadata it was read from, and when.
#[derive(Debug, Clone)]
struct Resolved {
    node: Node,
    version: Version,
    checked: Instant,
    /// Forced to be read again ([`Hierarchy::refresh`]), whatever its age.
    forced: bool,
}

/// A Zarr hierarchy: a catalog and what has been resolved of it.
pub struct Hierarchy {
    catalog: ZarrCatalog,
    /// Nodes resolved so far.
    nodes: Mutex<HashMap<String, Resolved>>,
    /// Paths known to hold no node, and since when (negative cache: a lookup of a missing
    /// name costs the store one visit, not one per `stat`).
    missing: Mutex<HashMap<String, Instant>>,
    /// Directory listings made so far, and when.
    listings: Mutex<HashMap<String, (Listing, Instant)>>,
    /// How long what was read stays good (`None`: for the mount's life).
    refresh: Option<Duration>,
    /// Forced refreshes so far.
    refreshes: AtomicU64,
    /// The budget of coalesced runs its arrays share (see [`Hierarchy::spans`]).
    spans: Spans,
}

/// A group's children and their kinds.
type Listing = Vec<(String, NodeKind)>;

/// Readings of array metadata under a refresh interval: each gets a version of its own.
static READINGS: AtomicU64 = AtomicU64::new(1);

/// Whether node path `path` is `prefix` or lies below it (every path lies below "").
pub fn under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The node path of `name` in the group at `parent`.
pub fn join(parent: &str, name: &str) -> String {
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
    /// The Zarr hierarchy in `store`, its layout found from the root's documents; fails
    /// when it holds none or when the root's own metadata cannot be used (nothing could be
    /// shown).
    pub fn open(store: Arc<dyn Store>) -> Result<Hierarchy> {
        Self::of(ZarrCatalog::open(store)?)
    }

    /// The hierarchy of `catalog`; fails when its root's metadata cannot be used.
    pub fn of(catalog: ZarrCatalog) -> Result<Hierarchy> {
        let caps = catalog.store().caps();
        let h = Hierarchy {
            spans: Spans::read_once(budget_for(caps.concurrency, caps.request_bytes)),
            catalog,
            nodes: Mutex::new(HashMap::new()),
            missing: Mutex::new(HashMap::new()),
            listings: Mutex::new(HashMap::new()),
            refresh: None,
            refreshes: AtomicU64::new(0),
        };
        match h.node("") {
            Ok(_) | Err(Error::NotFound(_)) => Ok(h),
            Err(e) => Err(e),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        self.catalog.store()
    }

    /// The runs of neighbouring inner chunks its arrays fetch together, within one budget
    /// for the store: what its requests in flight fetch, however many arrays (and
    /// readings of one array) are read at once. Each array reads its own
    /// ([`Spans::share_read_once`]).
    pub fn spans(&self) -> &Spans {
        &self.spans
    }

    /// Read nodes and listings again once older than `interval` (`None`: never).
    pub fn with_refresh(mut self, interval: Option<Duration>) -> Hierarchy {
        self.refresh = interval;
        self
    }

    /// The refresh interval (`None`: what was read stays good for the mount's life).
    pub fn refresh_interval(&self) -> Option<Duration> {
        self.refresh
    }

    /// Whether what was read at `at` is to be read again.
    pub fn is_stale(&self, at: Instant) -> bool {
        self.refresh.is_some_and(|ttl| at.elapsed() >= ttl)
    }

    /// How many forced refreshes there have been (what was built before the last one is
    /// to be built again).
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Have what was read of `path` and every node below it (and the catalog's
    /// consolidated metadata) read again: the next look reads the store as it is now.
    /// A node keeps what was last read of it until a new reading succeeds: one that
    /// fails (a document being rewritten in place reads as half a document) is tried
    /// again at the next look.
    pub fn refresh(&self, path: &str) -> Result<()> {
        let path = normalize(path);
        self.catalog.reload(None)?;
        for (_, node) in self
            .nodes
            .lock()
            .iter_mut()
            .filter(|(p, _)| under(p, &path))
        {
            node.forced = true;
        }
        self.missing.lock().retain(|p, _| !under(p, &path));
        // A listing of a parent names the node too.
        self.listings
            .lock()
            .retain(|p, _| !under(p, &path) && !under(&path, p));
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn format_label(&self) -> &'static str {
        self.catalog.format_label()
    }

    /// Whether nodes are read from consolidated metadata (a new node would not show).
    pub fn is_consolidated(&self) -> bool {
        self.catalog.is_consolidated()
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

    /// The metadata of the array at `path`; an error if it is not an array.
    pub fn array(&self, path: &str) -> Result<Arc<ArrayMetadata>> {
        match self.node(path)? {
            Node::Array(meta) => Ok(meta),
            _ => Err(Error::Invalid(format!("{path}: not an array"))),
        }
    }

    /// The metadata of the array at `path`, and the store its chunks are read from: the
    /// store as it was at the version the metadata was read at (see
    /// [`Store::at_version`]), so that what is read of one reading never mixes two.
    pub fn array_and_store(&self, path: &str) -> Result<(Arc<ArrayMetadata>, Arc<dyn Store>)> {
        let resolved = self.resolved(path)?;
        let Node::Array(meta) = resolved.node else {
            return Err(Error::Invalid(format!("{path}: not an array")));
        };
        let store = self.store();
        let store = store
            .at_version(&resolved.version)
            .unwrap_or_else(|| store.clone());
        // Its chunks are read as new as the reading (not from what a cache learned of
        // them before it began).
        let store = match self.refresh {
            Some(_) => store.learned_since(resolved.checked).unwrap_or(store),
            None => store,
        };
        Ok((meta, store))
    }

    /// Resolve the node at `path` ("" or "/" for the root).
    pub fn node(&self, path: &str) -> Result<Node> {
        self.resolved(path).map(|r| r.node)
    }

    /// The version of the metadata the node at `path` was read from, and when it was
    /// read.
    pub fn version(&self, path: &str) -> Result<(Version, Instant)> {
        self.resolved(path).map(|r| (r.version, r.checked))
    }

    fn resolved(&self, path: &str) -> Result<Resolved> {
        let path = normalize(path);
        let known = self.nodes.lock().get(&path).cloned();
        if let Some(node) = &known {
            if !node.forced && !self.is_stale(node.checked) {
                return Ok(node.clone());
            }
        }
        let missing_since = self.missing.lock().get(&path).copied();
        if missing_since.is_some_and(|t| !self.is_stale(t)) {
            return Err(Error::NotFound(if path.is_empty() {
                "/".into()
            } else {
                path
            }));
        }
        let look = Instant::now();
        if known.is_some() || missing_since.is_some() {
            self.reload_catalog();
        }
        let started = self.reading_start();
        // A catalog that could not be read again holds a reading older than the
        // interval, made before this look: a node read before stays as it was (as when
        // its document cannot be read), rather than being made anew from that same
        // reading at every look. (A reading made during this look is new, even with an
        // interval of zero.)
        if let Some(node) = known.as_ref().filter(|n| !n.forced) {
            if started < look && self.is_stale(started) {
                return Ok(node.clone());
            }
        }
        match self.resolve(&path, started) {
            Ok(node) => {
                {
                    let mut missing = self.missing.lock();
                    if missing.get(&path).is_some_and(|&t| t <= started) {
                        missing.remove(&path);
                    }
                }
                let mut nodes = self.nodes.lock();
                // Of two readings made at once, the one that began later stays.
                if let Some(newer) = nodes
                    .get(&path)
                    .filter(|n| !n.forced && n.checked > started)
                {
                    return Ok(newer.clone());
                }
                nodes.insert(path, node.clone());
                Ok(node)
            }
            Err(Error::NotFound(what)) => {
                {
                    let mut nodes = self.nodes.lock();
                    if let Some(newer) = nodes
                        .get(&path)
                        .filter(|n| !n.forced && n.checked > started)
                    {
                        return Ok(newer.clone());
                    }
                    nodes.remove(&path);
                }
                let mut missing = self.missing.lock();
                if missing.len() >= MAX_MISSING {
                    missing.clear();
                }
                // Missing as of when the look began, not when it ended.
                let since = missing.entry(path).or_insert(started);
                *since = (*since).max(started);
                Err(Error::NotFound(what))
            }
            // A node read before and unreadable now (a store that does not answer, a
            // document half rewritten) stays as it was read, and is read again at the
            // next look.
            Err(e) => match known {
                Some(node) => {
                    log::warn!("refresh of /{path}: {e} (kept as read before)");
                    Ok(node)
                }
                None => Err(e),
            },
        }
    }

    /// When what is read of the store now dates from: now, or the catalog's last reading
    /// of its consolidated metadata (or of its store's version) when it keeps one.
    fn reading_start(&self) -> Instant {
        let now = Instant::now();
        self.catalog.as_of().map_or(now, |at| at.min(now))
    }

    /// The catalog's consolidated metadata read again when older than the interval.
    fn reload_catalog(&self) {
        if let Err(e) = self.catalog.reload(self.refresh) {
            log::warn!("refresh: {e}");
        }
    }

    /// The node at `path` as the catalog holds it now, dated `checked` (when what it was
    /// read from was read).
    fn resolve(&self, path: &str, checked: Instant) -> Result<Resolved> {
        let since = self.refresh.map(|_| checked);
        let (node, version) = match self.catalog.node(path, since)? {
            Some((NodeMetadata::Array(mut a), version)) => {
                a.version = match &version {
                    // Chunks may change under unchanged metadata: each reading is new.
                    v if v.is_known() && self.refresh.is_some() => Version::Reading(
                        Box::new(v.clone()),
                        READINGS.fetch_add(1, Ordering::Relaxed),
                    ),
                    v => v.clone(),
                };
                (Node::Array(Arc::new(*a)), version)
            }
            Some((NodeMetadata::Group(g), version)) => (Node::Group(g), version),
            None if path.is_empty() || self.catalog.has_nodes_below(path, since)? => {
                (Node::ImplicitGroup, Version::Unknown)
            }
            None => return Err(Error::NotFound(path.to_string())),
        };
        Ok(Resolved {
            node,
            version,
            checked,
            forced: false,
        })
    }

    /// The children of the group at `path`, sorted by name, with their kinds (listed
    /// again once older than the refresh interval).
    pub fn children(&self, path: &str) -> Result<Vec<(String, NodeKind)>> {
        self.listing(path).map(|(children, _)| children)
    }

    /// [`Hierarchy::children`], and when the listing was read (what is made of it dates
    /// from then).
    pub fn listing(&self, path: &str) -> Result<(Vec<(String, NodeKind)>, Instant)> {
        let path = normalize(path);
        let known = self.listings.lock().get(&path).cloned();
        if let Some((hit, at)) = &known {
            if !self.is_stale(*at) {
                return Ok((hit.clone(), *at));
            }
            self.reload_catalog();
        }
        let at = self.reading_start();
        // The catalog could not be read again: the listing stays as it was.
        if let Some(kept) = known.filter(|_| self.is_stale(at)) {
            return Ok(kept);
        }
        let children = self.list_children(&path)?;
        let mut listings = self.listings.lock();
        // Of two listings made at once, the one that began later stays.
        if let Some(newer) = listings.get(&path).filter(|(_, t)| *t > at) {
            return Ok(newer.clone());
        }
        listings.insert(path, (children.clone(), at));
        Ok((children, at))
    }

    fn list_children(&self, path: &str) -> Result<Vec<(String, NodeKind)>> {
        let mut names = self.catalog.child_names(path)?;
        names.sort();
        names.dedup();
        names.retain(|name| {
            let valid = valid_name(name);
            if !valid {
                let shown: String = name.chars().take(64).collect();
                log::warn!("/{path}: left out a node named {shown:?}: not a valid file name");
            }
            valid
        });
        let kinds = self.kinds_of(path, &names);
        Ok(names
            .into_iter()
            .zip(kinds)
            .filter_map(|(name, kind)| Some((name, kind?)))
            .collect())
    }

    /// The kinds of the children `names` of `path`, in their order. Each not yet read
    /// costs its metadata document (on a remote store without consolidated metadata, a
    /// request): they are read by as many threads at once as the store takes requests
    /// ([`crate::store::Caps::concurrency`], at most [`LISTING_THREADS`]). A local store
    /// gets [`LISTING_THREADS`]: its reads wait on the disk while their pages are not
    /// cached, and a disk answers many waiting reads faster than few.
    fn kinds_of(&self, path: &str, names: &[String]) -> Vec<Option<NodeKind>> {
        let caps = self.store().caps();
        let wanted = match caps.request_bytes {
            0 => LISTING_THREADS,
            _ => caps.concurrency,
        };
        let threads = wanted
            .clamp(1, LISTING_THREADS)
            .min(names.len().div_ceil(LISTED_PER_THREAD));
        let kind = |name: &String| self.kind_of(&join(path, name));
        if threads <= 1 {
            return names.iter().map(kind).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut kinds = vec![None; names.len()];
        let found: Vec<Vec<(usize, Option<NodeKind>)>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(name) = names.get(i) else { break mine };
                            mine.push((i, kind(name)));
                        }
                    })
                })
                .collect();
            // A worker that panicked leaves its names unlisted, as a failed read would.
            workers.into_iter().filter_map(|w| w.join().ok()).collect()
        });
        for (i, k) in found.into_iter().flatten() {
            kinds[i] = k;
        }
        kinds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use serde_json::Value;

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

    #[test]
    fn nodes_carry_the_version_of_their_documents_and_when_it_was_read() {
        let mut store = MemoryStore::new();
        store.insert(".zgroup", br#"{"zarr_format": 2}"#.to_vec());
        store.insert("a/.zarray", ZARRAY.as_bytes().to_vec());
        store.insert("a/.zattrs", br#"{"units": "m"}"#.to_vec());
        store.insert(
            "b/zarr.json",
            br#"{"zarr_format": 3, "node_type": "group"}"#.to_vec(),
        );
        let zarray = store.head("a/.zarray").unwrap().unwrap().version;
        let zattrs = store.head("a/.zattrs").unwrap().unwrap().version;
        let group = store.head("b/zarr.json").unwrap().unwrap().version;
        let before = std::time::Instant::now();
        let h = Hierarchy::open(Arc::new(store)).unwrap();
        let (version, checked) = h.version("a").unwrap();
        // A v2 array is read from two documents: its version changes with either.
        assert!(
            zarray.is_known() && zattrs.is_known(),
            "{zarray:?} {zattrs:?}"
        );
        assert_ne!(zarray, zattrs);
        assert_eq!(version, Version::joined(zarray, &zattrs));
        assert!(checked >= before);
        assert_eq!(h.array("a").unwrap().version, version);
        assert_eq!(h.version("b").unwrap().0, group);
        assert!(matches!(h.node("b"), Ok(Node::Group(_))));
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
        assert!(requests < 4 * zarr::IMPLICIT_BUDGET, "{requests} requests");
    }

    #[test]
    fn a_refresh_keeps_a_node_whose_document_is_half_written_until_it_reads_whole() {
        let dir = std::env::temp_dir().join(format!("zarrfs-halfdoc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
        std::fs::write(dir.join("a/.zarray"), ZARRAY).unwrap();
        let store = Arc::new(crate::store::FolderStore::open(&dir).unwrap());
        let h = Hierarchy::open(store).unwrap();
        assert_eq!(h.array("a").unwrap().shape, [4]);
        // Rewritten in place: truncated, then half written.
        for half in ["", &ZARRAY[..ZARRAY.len() / 2]] {
            std::fs::write(dir.join("a/.zarray"), half).unwrap();
            h.refresh("").unwrap();
            assert_eq!(h.array("a").unwrap().shape, [4], "{half:?}");
            assert_eq!(h.kind_of("a"), Some(NodeKind::Array));
        }
        // Whole again: the next look reads it, with no other refresh.
        std::fs::write(dir.join("a/.zarray"), ZARRAY.replace("[4]", "[6]")).unwrap();
        assert_eq!(h.array("a").unwrap().shape, [6]);
        // A document removed is a node gone.
        std::fs::remove_file(dir.join("a/.zarray")).unwrap();
        std::fs::remove_dir(dir.join("a")).unwrap();
        h.refresh("a").unwrap();
        assert!(matches!(h.node("a"), Err(Error::NotFound(_))));
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A store that answers reads slowly (the time each one began is kept), or holds the
    /// first read of one key until let go.
    struct Slow {
        inner: MemoryStore,
        delay: std::time::Duration,
        reads: Mutex<Vec<Instant>>,
        hold: Option<(String, Mutex<std::sync::mpsc::Receiver<()>>)>,
        held: std::sync::atomic::AtomicBool,
    }

    impl Slow {
        fn new(inner: MemoryStore, delay: std::time::Duration) -> Slow {
            Slow {
                inner,
                delay,
                reads: Mutex::new(Vec::new()),
                hold: None,
                held: Default::default(),
            }
        }
    }

    impl Store for Slow {
        fn read(
            &self,
            key: &str,
            r: Option<crate::store::ByteRange>,
        ) -> Result<Option<crate::store::Value>> {
            self.reads.lock().push(Instant::now());
            if let Some((k, go)) = &self.hold {
                if k == key && !self.held.swap(true, Ordering::SeqCst) {
                    let _ = go.lock().recv();
                }
            }
            std::thread::sleep(self.delay);
            self.inner.read(key, r)
        }
        fn list_dir(&self, prefix: &str) -> Result<crate::store::Listing> {
            std::thread::sleep(self.delay);
            self.inner.list_dir(prefix)
        }
        fn head(&self, key: &str) -> Result<Option<crate::store::Head>> {
            self.inner.head(key)
        }
        fn will_need(&self, _key: &str) {}
        fn caps(&self) -> crate::store::Caps {
            self.inner.caps()
        }
    }

    fn group_store() -> MemoryStore {
        let mut store = MemoryStore::new();
        store.insert(".zgroup", br#"{"zarr_format": 2}"#.to_vec());
        store.insert("a/.zarray", ZARRAY.as_bytes().to_vec());
        store
    }

    #[test]
    fn a_name_found_missing_is_missing_as_of_when_the_look_began() {
        let store = Arc::new(Slow::new(
            group_store(),
            std::time::Duration::from_millis(20),
        ));
        let h = Hierarchy::open(store.clone())
            .unwrap()
            .with_refresh(Some(std::time::Duration::from_secs(3600)));
        store.reads.lock().clear();
        assert!(matches!(h.node("new"), Err(Error::NotFound(_))));
        let first_read = store.reads.lock()[0];
        let since = h.missing.lock()["new"];
        // Dated before the store was asked, not after its (slow) answers.
        assert!(since <= first_read, "{:?} after", since - first_read);
    }

    #[test]
    fn of_two_readings_made_at_once_the_later_one_stays() {
        let (go, wait) = std::sync::mpsc::channel();
        let mut slow = Slow::new(group_store(), std::time::Duration::ZERO);
        slow.hold = Some(("a/.zarray".into(), Mutex::new(wait)));
        let slow = Arc::new(slow);
        let h = Arc::new(
            Hierarchy::open(slow.clone())
                .unwrap()
                .with_refresh(Some(std::time::Duration::from_secs(3600))),
        );
        // The first look at `a` waits in the store; a second one, begun later, ends first.
        let first = {
            let h = h.clone();
            std::thread::spawn(move || h.version("a").map(|_| ()))
        };
        while !slow.held.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let begun = Instant::now();
        assert!(h.version("a").unwrap().1 >= begun);
        go.send(()).unwrap();
        first.join().unwrap().unwrap();
        let (_, kept) = h.version("a").unwrap();
        assert!(kept >= begun, "the earlier reading replaced the later one");
    }

    #[test]
    fn nodes_and_listings_read_from_consolidated_metadata_date_from_its_reading() {
        let zmeta = serde_json::json!({"zarr_consolidated_format": 1, "metadata": {
            ".zgroup": {"zarr_format": 2},
            "a/.zarray": serde_json::from_str::<Value>(ZARRAY).unwrap(),
        }});
        let mut store = MemoryStore::new();
        store.insert(".zmetadata", zmeta.to_string().into_bytes());
        let before = Instant::now();
        let h = Hierarchy::open(Arc::new(store))
            .unwrap()
            .with_refresh(Some(std::time::Duration::from_secs(3600)));
        let read = Instant::now();
        assert!(!h.nodes.lock().contains_key("a"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Read now, from the consolidated metadata read at open: as old as that.
        let (_, checked) = h.version("a").unwrap();
        assert!(checked >= before && checked <= read, "{checked:?}");
        let (_, listed) = h.listing("").unwrap();
        assert!(listed >= before && listed <= read, "{listed:?}");
        assert!(matches!(h.node("b"), Err(Error::NotFound(_))));
        assert!(h.missing.lock()["b"] <= read);
    }
}
