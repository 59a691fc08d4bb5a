//! Writing an array's raw file on a writable mount: an open for writing stages what is
//! written ([`crate::write`]), reads of the file see it at once, and each close (flush)
//! or `fsync` commits it into the store's chunks; the last close of a writer commits
//! whatever is left. After a commit the array's units decoded before are never served
//! again, and the kernel is to drop what it holds of the array's files.

use std::sync::Arc;

use super::handles::Handle;
use super::inode::Node;
use super::ZarrFs;
use crate::error::{Error, Result};
use crate::store::write::{Change, Writer};
use crate::write::{reshape, Staged, Writes};

impl ZarrFs {
    /// Whether the mount takes writes (`--writable` on a store that can be written).
    pub fn writable(&self) -> bool {
        self.writes.is_some() && self.writer.is_some()
    }

    /// Why nothing at all can be written here, when that is so.
    pub(super) fn write_refused(&self, what: &str) -> Option<Error> {
        if self.writes.is_none() {
            return Some(Error::ReadOnly);
        }
        if self.writer.is_none() {
            return Some(Error::NotWritable {
                key: what.to_string(),
                reason: "the store takes no writes (an archive, a reference set, a web \\
                         server, or a store kind zarrfs does not write yet)"
                    .into(),
            });
        }
        None
    }

    /// The permission bits of a file: its owner may write an array's raw file where the
    /// mount takes writes.
    pub(super) fn file_perm(&self, node: &Node) -> u16 {
        match node {
            Node::Array(_) | Node::ArraySidecar(_) | Node::GroupSidecar(_) if self.writable() => {
                0o644
            }
            _ => 0o444,
        }
    }

    /// The store's writer (a mount that takes writes), or why there is none.
    pub(super) fn writer_for(&self, what: &str) -> Result<Arc<dyn Writer>> {
        match self.write_refused(what) {
            Some(e) => Err(e),
            None => self.writer.clone().ok_or(Error::ReadOnly),
        }
    }

    /// Make one change of the store through `writer` with `make`, then finish it with
    /// the message `message` gives (prefixed with `--commit-message`).
    pub(super) fn change<T>(
        &self,
        writer: &dyn Writer,
        make: impl FnOnce(&mut dyn Change) -> Result<T>,
        message: impl FnOnce(&T) -> String,
    ) -> Result<T> {
        let mut change = writer.begin()?;
        let made = make(change.as_mut())?;
        change.finish(&format!("{}: {}", self.commit_prefix, message(&made)))?;
        Ok(made)
    }

    /// The inodes of the files (not folders) at or below `path`: the kernel is to drop
    /// what it holds of them once their node changed.
    fn file_inodes_under(&self, path: &str) -> Vec<u64> {
        self.inodes
            .under(path)
            .into_iter()
            .filter(|ino| {
                self.entry(*ino)
                    .is_ok_and(|e| !matches!(e.node, Node::Dir(_)))
            })
            .collect()
    }

    /// The array at `path`'s chunks were rewritten: units its loaded content decoded
    /// before are not served again (nothing is loaded for it here).
    fn forget_decoded(&self, path: &str) {
        let loaded = self.flats.lock().get(path).map(|(_, c)| c.clone());
        if let Some(v) = loaded.as_deref().and_then(|c| c.view()) {
            self.cache.forget_array(v.array().rewritten());
        }
    }

    /// Count `bytes` put into the store for the array at `path` (`user.zarrfs.bytes_written`).
    pub(super) fn count_written(&self, path: &str, bytes: u64) {
        *self
            .bytes_written
            .lock()
            .entry(path.to_string())
            .or_default() += bytes;
    }

    /// Whether open file `fh` was opened for writing.
    pub fn is_writer(&self, fh: u64) -> bool {
        self.handle(fh)
            .is_ok_and(|h| h.staged.is_some() || h.edit.is_some() || h.new.is_some())
    }

    /// The staging whose bytes reads of `h` lay over the store's.
    pub(super) fn staged_of(&self, h: &Handle) -> Option<Arc<Staged>> {
        if let Some(s) = &h.staged {
            return Some(s.clone());
        }
        let writes = self.writes.as_ref()?;
        writes.staged(h.array.as_deref()?)
    }

    /// The size of an array file whose array is being written (staged), or of a sidecar
    /// open for editing (its text as written so far, not the text it shows).
    pub(super) fn staged_size(&self, node: &Node) -> Option<u64> {
        match node {
            Node::Array(path) => Some(self.writes.as_ref()?.staged(path)?.size()),
            Node::ArraySidecar(path) | Node::GroupSidecar(path) if self.writable() => {
                let edits = self.handles.editing(path);
                let edit = edits.iter().find_map(|h| h.edit.as_ref())?;
                let len = edit.text.lock().len();
                Some(len as u64)
            }
            _ => None,
        }
    }

    /// Lay what `staged` holds over the `n` bytes read from `offset` of `h` into `buf`:
    /// the file as written, its size the staged one (past the store's end, what was not
    /// written is fill value). The bytes it holds.
    pub(super) fn lay_over(
        &self,
        h: &Handle,
        staged: &Staged,
        offset: u64,
        buf: &mut [u8],
        n: usize,
    ) -> Result<usize> {
        let size = staged.size();
        let want = usize::try_from(size.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if want > n {
            let one = h
                .content
                .view()
                .map(|v| self.fill_element(v))
                .unwrap_or_default();
            if one.is_empty() {
                buf[n..want].fill(0);
            } else {
                for (i, b) in buf[n..want].iter_mut().enumerate() {
                    *b = one[((offset + (n + i) as u64) % one.len() as u64) as usize];
                }
            }
        }
        staged.overlay(offset, &mut buf[..want])?;
        Ok(want)
    }

    /// One element of the array's fill value as the file lays it out.
    fn fill_element(&self, view: &crate::read::view::View) -> Vec<u8> {
        let meta = &view.array().meta;
        let crate::metadata::FillValue::Fixed(one) = &meta.fill else {
            return Vec::new();
        };
        let mut one = one.clone();
        if self.layout.big_endian {
            let item = one.len();
            crate::codec::swap_elements(&mut one, item, &meta.dtype.swap_units());
        }
        one
    }

    /// Open file `ino` for writing (and reading): only an array's raw file, of a
    /// fixed-size data type whose codecs zarrfs can encode, on a mount that takes
    /// writes. The handle's number.
    pub fn open_write(&self, ino: u64) -> Result<u64> {
        let entry = self.entry(ino)?;
        if let Node::ArraySidecar(path) | Node::GroupSidecar(path) = &entry.node {
            // A sidecar is edited in memory, from the text it shows.
            self.node_writer(&format!("/{path}"))?;
            let content = self.content(&entry)?;
            let text = content_bytes(&content)?;
            let (_, open) = self
                .inodes
                .open(ino)
                .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
            return Ok(self
                .handles
                .open(content, open, None, None, Some((path.clone(), text))));
        }
        let Node::Array(path) = &entry.node else {
            let shown = format!("/{}", entry.node.path());
            return Err(self.write_refused(&shown).unwrap_or(Error::NotWritable {
                key: shown,
                reason: "only an array's raw file and sidecars are written".into(),
            }));
        };
        if let Some(e) = self.write_refused(&format!("/{path}")) {
            return Err(e);
        }
        let writes = self.writes.as_ref().ok_or(Error::ReadOnly)?;
        let content = self.content(&entry)?;
        let view = content.view().ok_or_else(|| Error::NotWritable {
            key: format!("/{path}"),
            reason: "variable-length elements".into(),
        })?;
        crate::write::encoder(&view.array().meta)?;
        let (_, open) = self
            .inodes
            .open(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let staged = writes.open(path, content.size())?;
        Ok(self
            .handles
            .open(content, open, Some(path.clone()), Some(staged), None))
    }

    /// Write `data` at `offset` of file `fh` (opened for writing): staged, read back at
    /// once, in the store at the next commit.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<()> {
        let h = self.handle(fh)?;
        if let Some(edit) = &h.edit {
            return write_edit(&mut edit.text.lock(), offset, data);
        }
        if let Some(new) = &h.new {
            let _turn = new.turn();
            return new.write(offset, data);
        }
        let staged = h.staged.as_ref().ok_or(Error::ReadOnly)?;
        // A write past the end grows the array, where it can grow.
        let grows = h
            .content
            .view()
            .is_some_and(|v| reshape::cannot_resize(&v.array().meta).is_none());
        let _turn = staged.turn();
        staged.write(offset, data, grows)
    }

    /// Make the file of array `ino` `size` bytes (a truncate, an open with `O_TRUNC`):
    /// whole rows of its slowest axis, else `EINVAL`. While a writer has the array open
    /// the size is staged with its writes (committed at its close); else it is committed
    /// at once. The inodes whose attributes and pages the kernel is to drop.
    pub fn set_size(&self, ino: u64, size: u64, fh: Option<u64>) -> Result<Vec<u64>> {
        let entry = self.entry(ino)?;
        if let Node::New(path) = &entry.node {
            let new = self
                .new_file(path)
                .ok_or_else(|| Error::NotFound(format!("/{path}")))?;
            let _turn = new.turn();
            new.set_size(size)?;
            return Ok(Vec::new());
        }
        // A sidecar being edited (through `fh`, or any handle editing it, as the kernel
        // truncates an open with O_TRUNC): its text is cut or padded.
        if let Node::ArraySidecar(path) | Node::GroupSidecar(path) = &entry.node {
            let mut edits = self.handles.editing(path);
            if let Some(h) = fh.and_then(|fh| self.handle(fh).ok()) {
                edits.retain(|e| Arc::ptr_eq(e, &h));
            }
            let n = usize::try_from(size)
                .ok()
                .filter(|n| *n <= crate::write::attributes::MAX_SIDECAR)
                .ok_or_else(|| Error::BadWrite(format!("a sidecar of {size} bytes")))?;
            if edits.is_empty() {
                return Err(Error::BadWrite(format!(
                    "/{path}: a sidecar changes size only while open for writing"
                )));
            }
            for h in edits {
                if let Some(edit) = &h.edit {
                    edit.text.lock().resize(n, b' ');
                }
            }
            return Ok(Vec::new());
        }
        let Node::Array(path) = &entry.node else {
            return Err(Error::NotWritable {
                key: format!("/{}", entry.node.path()),
                reason: "only an array's raw file changes size".into(),
            });
        };
        if let Some(e) = self.write_refused(&format!("/{path}")) {
            return Err(e);
        }
        let writes = self.writes.as_ref().ok_or(Error::ReadOnly)?;
        let (meta, _) = self.hierarchy.array_and_store(path)?;
        let item = meta.dtype.size().ok_or(Error::ReadOnly)?;
        if let Some(why) = reshape::cannot_resize(&meta) {
            return Err(Error::BadWrite(format!(
                "/{path}: cannot change size: {why}"
            )));
        }
        reshape::shape_for(&meta, self.layout, item, size)?;
        if let Some(staged) = writes.staged(path) {
            let _turn = staged.turn();
            staged.set_size(size)?;
            return Ok(Vec::new());
        }
        let content = self.content(&entry)?;
        let staged = writes.open(path, content.size())?;
        let resized = {
            let _turn = staged.turn();
            staged.set_size(size)
        };
        let committed = resized.and_then(|()| self.commit_path(path, &staged));
        writes.close(path);
        committed
    }

    /// Commit what was written to the array of file `fh` into the store (a close or an
    /// `fsync`); nothing to do for a file not opened for writing. The inodes whose
    /// attributes and pages the kernel is to drop.
    pub fn commit(&self, fh: u64) -> Result<Vec<u64>> {
        let h = self.handle(fh)?;
        if let Some(edit) = &h.edit {
            let text = edit.text.lock().clone();
            return self.commit_edit(&h, &edit.path, &text);
        }
        if let Some(new) = &h.new {
            return self.make_new(new);
        }
        match &h.staged {
            Some(staged) => self.commit_staged(&h, staged),
            None => Ok(Vec::new()),
        }
    }

    fn commit_staged(&self, h: &Handle, staged: &Staged) -> Result<Vec<u64>> {
        log::debug!(
            "/{}: commit of {} staged ranges (conflicted: {})",
            staged.path(),
            staged.ranges().len(),
            staged.conflicted()
        );
        if staged.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(refused) = staged.refusal() {
            return Err(refused);
        }
        let result = self.commit_path(staged.path(), staged);
        // What was decoded for the handle's reading (when it is not the array's current
        // one) is not served again either.
        let current = self.flats.lock().get(staged.path()).map(|(_, c)| c.clone());
        if let Some(v) = h.content.view() {
            let same = current
                .as_deref()
                .and_then(|c| c.view())
                .is_some_and(|c| Arc::ptr_eq(c.array(), v.array()));
            if !same {
                self.cache.forget_array(v.array().rewritten());
            }
        }
        result
    }

    /// Commit what `staged` holds into the array at `path` as the store has it now. The
    /// inodes whose attributes and pages the kernel is to drop.
    fn commit_path(&self, path: &str, staged: &Staged) -> Result<Vec<u64>> {
        if staged.is_empty() {
            return Ok(Vec::new());
        }
        let store = self.hierarchy.store().clone();
        let writer = self.writer_for(&format!("/{path}"))?;
        if writer.versions() {
            // The change starts from the newest version of the store.
            self.hierarchy.refresh(path)?;
        }
        let (meta, _) = self.hierarchy.array_and_store(path)?;
        // One change per commit (one Icechunk commit): visible whole, or not at all
        // where the store groups changes.
        let result = self.change(
            writer.as_ref(),
            |change| crate::write::commit(staged, &meta, store.as_ref(), change, self.layout),
            |done| format!("/{path}: {} bytes written", done.staged_bytes),
        );
        // Chunks may have been put even when a later one failed: what was decoded
        // before is not served again.
        self.forget_decoded(path);
        let done = result.inspect_err(|_| {
            log::warn!(
                "/{path}: commit failed; its staged bytes stay in {}",
                staged.file_path().display()
            );
        })?;
        self.count_written(path, done.bytes_put);
        log::info!(
            "/{path}: committed {} staged bytes: {} chunks written ({} bytes), {} deleted{}",
            done.staged_bytes,
            done.chunks_put,
            done.bytes_put,
            done.chunks_deleted,
            match &done.shape {
                Some(shape) => format!(", shape now {shape:?}"),
                None => String::new(),
            }
        );
        let inodes = self.file_inodes_under(path);
        if done.shape.is_some() || writer.versions() {
            // Its metadata changed, or the store's version: the node is read again
            // (another inode).
            self.refresh_path(path)?;
        }
        Ok(inodes)
    }

    /// A handle is closed: a writer commits what is left staged (an `mmap` written back
    /// after its last flush) and lets go of its staging.
    pub(super) fn release_writer(&self, h: &Handle) {
        if let Some(new) = &h.new {
            return self.release_new(new);
        }
        let (Some(staged), Some(writes)) = (&h.staged, &self.writes) else {
            return;
        };
        log::debug!(
            "/{}: its writer closed (conflicted: {})",
            staged.path(),
            staged.conflicted()
        );
        if staged.conflicted() {
            // The writer was told (its close failed); another writer's value is not
            // patched over unasked. The bytes stay staged for the array's next writer.
            log::warn!(
                "/{}: not committed at the last close (another writer changed a chunk); \
                 the staged bytes stay in {}",
                staged.path(),
                staged.file_path().display()
            );
        } else if let Err(e) = self.commit_staged(h, staged) {
            log::warn!("/{}: commit at the last close: {e}", staged.path());
        }
        writes.close(staged.path());
    }

    /// The staging of a writable mount, from its options.
    pub(super) fn writes_of(options: &super::FsOptions) -> Option<Writes> {
        let dir = options.staging.as_ref()?;
        match Writes::new(dir, options.write_wait) {
            Ok(w) => Some(w),
            Err(e) => {
                log::error!("writes refused: the staging folder: {e}");
                None
            }
        }
    }
}

impl ZarrFs {
    /// What makes or removes nodes: the store's writer, where nodes can change.
    pub(super) fn node_writer(&self, what: &str) -> Result<Arc<dyn Writer>> {
        let writer = self.writer_for(what)?;
        if let Some(why) = crate::write::nodes::cannot_change_nodes(&self.hierarchy) {
            return Err(Error::NotWritable {
                key: what.to_string(),
                reason: why.into(),
            });
        }
        Ok(writer)
    }

    /// The node path of `name` in directory `parent`, checked to be a plain name.
    pub(super) fn child_path(&self, parent: u64, name: &str) -> Result<String> {
        let dir = self.dir_path(parent)?;
        if name.is_empty() || name.contains(['/', '\0', '\\']) || name.starts_with('.') {
            return Err(Error::Invalid(format!("{name:?}: not a node name")));
        }
        Ok(crate::hierarchy::join(&dir, name))
    }

    /// Make group `name` in directory `parent` (`mkdir`): the new directory, looked up.
    pub fn mkdir(&self, parent: u64, name: &str) -> Result<super::Lookup> {
        let path = self.child_path(parent, name)?;
        let writer = self.node_writer(&format!("/{path}"))?;
        if self.hierarchy.kind_of(&path).is_some() {
            return Err(Error::Exists(format!("/{path}")));
        }
        self.change(
            writer.as_ref(),
            |change| crate::write::nodes::make_group(&self.hierarchy, change, &path),
            |_| format!("/{path}: group made"),
        )?;
        log::info!("/{path}: group made");
        self.refresh_path(&self.dir_path(parent)?)?;
        self.lookup_entry(parent, name)
    }

    /// Remove the empty group `name` of directory `parent` (`rmdir`). The inodes whose
    /// attributes and names the kernel is to drop.
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<Vec<u64>> {
        let path = self.child_path(parent, name)?;
        let writer = self.node_writer(&format!("/{path}"))?;
        match self.hierarchy.kind_of(&path) {
            Some(kind) if kind.is_group() => {}
            Some(_) => return Err(Error::Invalid(format!("/{path}: not a group"))),
            None => return Err(Error::NotFound(format!("/{path}"))),
        }
        self.change(
            writer.as_ref(),
            |change| crate::write::nodes::remove_group(&self.hierarchy, change, &path),
            |_| format!("/{path}: group removed"),
        )?;
        log::info!("/{path}: group removed");
        self.removed(parent, &path)
    }

    /// Remove the array whose raw file is `name` in directory `parent` (`rm`): its
    /// chunks, then its documents. Refused while a writer has it open (`EBUSY`).
    pub fn unlink(&self, parent: u64, name: &str) -> Result<Vec<u64>> {
        let path = self.child_path(parent, name)?;
        let writer = self.node_writer(&format!("/{path}"))?;
        match self.hierarchy.kind_of(&path) {
            Some(crate::hierarchy::NodeKind::Array) => {}
            Some(_) => {
                return Err(Error::NotWritable {
                    key: format!("/{path}"),
                    reason: "only an array's raw file is removed (rmdir removes a group)".into(),
                })
            }
            None => {
                return Err(Error::NotWritable {
                    key: format!("/{path}"),
                    reason: "only an array's raw file is removed".into(),
                })
            }
        }
        if self.writes.as_ref().and_then(|w| w.staged(&path)).is_some() {
            return Err(Error::Busy(format!("/{path}")));
        }
        let keys = self.change(
            writer.as_ref(),
            |change| crate::write::nodes::remove_array(&self.hierarchy, change, &path),
            |_| format!("/{path}: array removed"),
        )?;
        log::info!("/{path}: array removed ({keys} chunk keys)");
        self.removed(parent, &path)
    }

    /// The node at `path` in directory `parent` is gone from the store: the parent and
    /// the node are read again, and the inodes of its files are to be dropped.
    fn removed(&self, parent: u64, path: &str) -> Result<Vec<u64>> {
        let inodes = self.inodes.under(path);
        // Its names (the array's views and sidecar beside it too) stand for nothing now.
        for (dir, name) in self.names_of(&inodes) {
            self.inodes.unname(dir, &name);
        }
        self.refresh_path(&self.dir_path(parent)?)?;
        Ok(inodes)
    }
}

impl ZarrFs {
    /// Take the attributes of an edited sidecar (`text`, as written through `h`) into
    /// its node, when it changed them and nothing else. The inodes to drop.
    fn commit_edit(&self, h: &Handle, path: &str, text: &[u8]) -> Result<Vec<u64>> {
        let shown = content_bytes(&h.content)?;
        if text == shown.as_slice() {
            return Ok(Vec::new());
        }
        let node = format!("/{path}");
        let attributes = crate::write::attributes::edited_attributes(&node, &shown, text)?;
        let writer = self.node_writer(&node)?;
        self.change(
            writer.as_ref(),
            |change| crate::write::attributes::rewrite(&self.hierarchy, change, path, attributes),
            |_| format!("{node}: attributes"),
        )?;
        log::info!("{node}: attributes rewritten");
        let inodes = self.file_inodes_under(path);
        self.refresh_path(path)?;
        Ok(inodes)
    }
}

/// The bytes of a sidecar's content.
fn content_bytes(content: &super::content::Content) -> Result<Vec<u8>> {
    match content {
        super::content::Content::Bytes(b) => Ok(b.clone()),
        _ => Err(Error::Internal("a sidecar that is not text".into())),
    }
}

/// Write `data` at `offset` of a sidecar being edited (within its bound).
fn write_edit(text: &mut Vec<u8>, offset: u64, data: &[u8]) -> Result<()> {
    let end = usize::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(data.len()))
        .filter(|end| *end <= crate::write::attributes::MAX_SIDECAR)
        .ok_or_else(|| {
            Error::BadWrite(format!(
                "a sidecar larger than {} bytes",
                crate::write::attributes::MAX_SIDECAR
            ))
        })?;
    if text.len() < end {
        text.resize(end, b' ');
    }
    text[end - data.len()..end].copy_from_slice(data);
    Ok(())
}

/// Read a sidecar being edited from `offset` into `buf`: the bytes given.
pub(super) fn read_edit(text: &[u8], offset: u64, buf: &mut [u8]) -> usize {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let n = (text.len() - start).min(buf.len());
    buf[..n].copy_from_slice(&text[start..start + n]);
    n
}
