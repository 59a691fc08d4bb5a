//! Open files: each open gets a handle of its own, holding the content it opened (one
//! version of the array for the handle's whole life), its own readahead cursor, and its
//! count on the inode's reading (see [`Open`]). Handles are numbered from 1 and never
//! reused while open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::content::Content;
use super::inode::Open;
use crate::read::readahead::Cursor;

/// One open file.
pub struct Handle {
    pub(super) content: Arc<Content>,
    pub(super) cursor: Cursor,
    /// Counted on the inode's reading until the handle goes.
    _open: Open,
}

/// The open files of a filesystem.
#[derive(Default)]
pub struct Handles {
    last: AtomicU64,
    open: RwLock<HashMap<u64, Arc<Handle>>>,
}

impl Handles {
    /// A new handle on `content`, opened as `open`; its number.
    pub fn open(&self, content: Arc<Content>, open: Open) -> u64 {
        for view in content.views() {
            view.opened();
        }
        let fh = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(Handle {
            content,
            cursor: Cursor::default(),
            _open: open,
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
        for view in handle.content.views() {
            view.closed();
        }
        true
    }

    /// How many files are open.
    pub fn count(&self) -> usize {
        self.open.read().len()
    }
}
