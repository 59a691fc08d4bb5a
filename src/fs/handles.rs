//! Open files: each open gets a handle of its own, holding the content it opened (one
//! version of the array for the handle's whole life), its own readahead cursor, and how
//! the daemon chose to serve it. Handles are numbered from 1 and never reused while open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::content::Content;
use crate::read::view::Cursor;

/// One open file.
pub struct Handle {
    /// The inode it opened.
    pub ino: u64,
    pub(super) content: Arc<Content>,
    pub(super) cursor: Cursor,
    direct: AtomicBool,
}

impl Handle {
    /// Record how the daemon serves this open: straight into the reader's buffer
    /// (`true`) or through the kernel page cache.
    pub fn set_direct(&self, direct: bool) {
        self.direct.store(direct, Ordering::Relaxed);
    }

    /// Whether this open is served straight into the reader's buffer.
    pub fn is_direct(&self) -> bool {
        self.direct.load(Ordering::Relaxed)
    }
}

/// The open files of a filesystem.
#[derive(Default)]
pub struct Handles {
    last: AtomicU64,
    open: RwLock<HashMap<u64, Arc<Handle>>>,
}

impl Handles {
    /// A new handle on `content` of inode `ino`; its number.
    pub fn open(&self, ino: u64, content: Arc<Content>) -> u64 {
        if let Some(view) = content.view() {
            view.opened();
        }
        let fh = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(Handle {
            ino,
            content,
            cursor: Cursor::default(),
            direct: AtomicBool::new(false),
        });
        self.open.write().insert(fh, handle);
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.open.read().get(&fh).cloned()
    }

    /// Close `fh`; false when it was not open.
    pub fn release(&self, fh: u64) -> bool {
        let Some(handle) = self.open.write().remove(&fh) else {
            return false;
        };
        if let Some(view) = handle.content.view() {
            view.closed();
        }
        true
    }

    /// How many files are open.
    pub fn count(&self) -> usize {
        self.open.read().len()
    }
}
