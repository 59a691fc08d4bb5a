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
use crate::write::Staged;

/// One open file.
pub struct Handle {
    pub(super) content: Arc<Content>,
    pub(super) cursor: Cursor,
    /// The node path of the array whose raw file this is (reads of it lay the array's
    /// staged writes over the store's bytes).
    pub(super) array: Option<String>,
    /// The staging it writes to, when opened for writing.
    pub(super) staged: Option<Arc<Staged>>,
    /// A sidecar opened for writing (see [`crate::write::attributes`]).
    pub(super) edit: Option<Edit>,
    /// A file being made (see [`crate::write::new_file`]).
    pub(super) new: Option<Arc<crate::write::NewFile>>,
    /// Counted on the inode's reading until the handle goes.
    _open: Open,
}

/// A sidecar being edited: the node it is of, and its text as written so far.
pub struct Edit {
    pub path: String,
    pub text: parking_lot::Mutex<Vec<u8>>,
}

/// The open files of a filesystem.
#[derive(Default)]
pub struct Handles {
    last: AtomicU64,
    open: RwLock<HashMap<u64, Arc<Handle>>>,
}

impl Handles {
    /// A new handle on `content`, opened as `open` (the raw file of `array`, writing to
    /// `staged`; or a sidecar being edited, starting from `edit`); its number.
    pub fn open(
        &self,
        content: Arc<Content>,
        open: Open,
        array: Option<String>,
        staged: Option<Arc<Staged>>,
        edit: Option<(String, Vec<u8>)>,
    ) -> u64 {
        for view in content.views() {
            view.opened();
        }
        let fh = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(Handle {
            content,
            cursor: Cursor::default(),
            array,
            staged,
            edit: edit.map(|(path, text)| Edit {
                path,
                text: parking_lot::Mutex::new(text),
            }),
            new: None,
            _open: open,
        });
        self.open.write().insert(fh, handle);
        fh
    }

    /// A new handle writing `new`, a file being made; its number.
    pub fn open_new(
        &self,
        content: Arc<Content>,
        open: Open,
        new: Arc<crate::write::NewFile>,
    ) -> u64 {
        let fh = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(Handle {
            content,
            cursor: Cursor::default(),
            array: None,
            staged: None,
            edit: None,
            new: Some(new),
            _open: open,
        });
        self.open.write().insert(fh, handle);
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.open.read().get(&fh).cloned()
    }

    /// Close `fh`: the handle, when it was open.
    pub fn release(&self, fh: u64) -> Option<Arc<Handle>> {
        let handle = self.open.write().remove(&fh)?;
        for view in handle.content.views() {
            view.closed();
        }
        Some(handle)
    }

    /// The open handles editing the sidecar of the node at `path`.
    pub fn editing(&self, path: &str) -> Vec<Arc<Handle>> {
        self.open
            .read()
            .values()
            .filter(|h| h.edit.as_ref().is_some_and(|e| e.path == path))
            .cloned()
            .collect()
    }

    /// How many files are open.
    pub fn count(&self) -> usize {
        self.open.read().len()
    }
}
