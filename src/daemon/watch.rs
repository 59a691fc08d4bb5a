//! A local folder's metadata, watched with inotify (the `notify` crate) while the mount
//! refreshes: when a metadata document (`zarr.json`, `.zarray`, `.zgroup`, `.zattrs`,
//! `.zmetadata`) has been written (closed after writing, or renamed into place) or is
//! removed, the node holding it is read again at once,
//! as `zarrfs refresh` does, instead of after the refresh interval; a new folder in a
//! watched one (a new group or array) is watched too and its parent read again. Chunk
//! files follow the interval. Only node folders are watched, one inotify watch each:
//! the walk at mount stops at arrays, so chunk folders cost nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use parking_lot::Mutex;

/// Folders watched at most; past it, changes below the others follow the interval.
const MAX_WATCHES: usize = 10_000;

/// The documents whose change refreshes their node.
const DOCUMENTS: &[&str] = &["zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"];

/// A live watch; dropping it stops watching.
pub struct Watch {
    _watcher: Arc<Mutex<RecommendedWatcher>>,
}

/// Watch the store folder `root`; `refresh(node path)` is called (on the watcher's
/// thread) for each node whose metadata changed.
pub fn watch(root: &Path, refresh: impl Fn(&str) + Send + Sync + 'static) -> Result<Watch, String> {
    let root = root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    // The watcher's own thread only passes events on: a watch added from it would wait
    // for that same thread.
    let (send, events) = std::sync::mpsc::channel::<notify::Event>();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let _ = send.send(event);
        }
    })
    .map_err(|e| format!("inotify: {e}"))?;
    let watcher = Arc::new(Mutex::new(watcher));
    let watched = AtomicUsize::new(0);
    for dir in node_folders(&root) {
        add(&watcher, &dir, &watched);
    }
    log::info!(
        "refresh: watching {} folders of {} for metadata changes",
        watched.load(Ordering::Relaxed),
        root.display()
    );
    let weak = Arc::downgrade(&watcher);
    std::thread::Builder::new()
        .name("watch".into())
        .spawn(move || {
            // Ends when the watcher is dropped (its sender with it).
            for event in events {
                for path in &event.paths {
                    let Some(holder) = holder(&root, path) else {
                        continue;
                    };
                    let is_document = path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| DOCUMENTS.contains(&n));
                    match event.kind {
                        // A document written whole (closed, or renamed into place) or
                        // removed; not one being written, which would read half of it.
                        EventKind::Access(AccessKind::Close(AccessMode::Write))
                        | EventKind::Modify(ModifyKind::Name(_))
                        | EventKind::Remove(RemoveKind::File)
                            if is_document =>
                        {
                            refresh(&holder)
                        }
                        // A new folder, perhaps a new node: watched first, then its
                        // parent read again, so that a document written in between is
                        // not missed.
                        EventKind::Create(CreateKind::Folder) => {
                            if let Some(w) = weak.upgrade() {
                                add(&w, path, &watched);
                            }
                            refresh(&holder);
                        }
                        EventKind::Remove(RemoveKind::Folder) => refresh(&holder),
                        _ => {}
                    }
                }
            }
        })
        .map_err(|e| format!("watch thread: {e}"))?;
    Ok(Watch { _watcher: watcher })
}

fn add(watcher: &Mutex<RecommendedWatcher>, dir: &Path, count: &AtomicUsize) {
    if count.load(Ordering::Relaxed) >= MAX_WATCHES {
        return;
    }
    match watcher.lock().watch(dir, RecursiveMode::NonRecursive) {
        Ok(()) => {
            count.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => log::warn!("refresh: cannot watch {}: {e}", dir.display()),
    }
}

/// The node path of the folder holding `path` (a document's node; a folder's parent).
fn holder(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(parts[..parts.len().saturating_sub(1)].join("/"))
}

/// The folders to watch: the root and every folder down to the arrays (a folder with an
/// array's metadata is watched, not entered), at most [`MAX_WATCHES`].
fn node_folders(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        if out.len() >= MAX_WATCHES {
            break;
        }
        let array = dir.join(".zarray").is_file() || is_v3_array(&dir.join("zarr.json"));
        out.push(dir.clone());
        if array {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // Not followed: a symlink's target may lie outside the store.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(entry.path());
            }
        }
    }
    out
}

/// Whether `doc` is a v3 array's metadata (read only up to 1 MiB; never a blocking open
/// of a FIFO or device named like a document).
fn is_v3_array(doc: &Path) -> bool {
    use crate::store::{Blob, FileBlob};
    let Ok(text) = FileBlob::open(doc).and_then(|blob| blob.read(0, 1 << 20)) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&text.bytes)
        .is_ok_and(|v| v.get("node_type").and_then(|t| t.as_str()) == Some("array"))
}
