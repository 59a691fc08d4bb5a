//! Making arrays by writing files into a group's folder of a writable mount:
//! `NAME.npy` makes array `NAME` from its header and data, a sidecar `.NAME.json` makes
//! an array of fill values (see [`crate::write::new_file`]). The file is made (`create`)
//! and written through its one handle; the array is made at the first close (flush)
//! that finds the file whole, and at the last close at the latest. Until then the file
//! is listed by its name alone and cannot be opened again (`EBUSY`).

use std::sync::Arc;

use super::inode::Node;
use super::{Lookup, ZarrFs};
use crate::error::{Error, Result};
use crate::hierarchy::join;
use crate::store::write::{Change, Expected};
use crate::write::{NewFile, NewKind};

/// A file being made, with the directory inode it is in and how many handles have it.
pub(super) struct Creating {
    file: Arc<NewFile>,
    parent: u64,
    handles: usize,
}

/// The files being made, by path.
pub(super) type CreatingFiles = parking_lot::Mutex<std::collections::HashMap<String, Creating>>;

impl ZarrFs {
    /// Make file `name` in directory `parent` (`create`): `NAME.npy` or `.NAME.json`
    /// for an array `NAME` that is not there. Its inode, looked up, and a handle writing
    /// it.
    pub fn create(&self, parent: u64, name: &str) -> Result<(Lookup, u64)> {
        let dir = self.dir_path(parent)?;
        let path = join(&dir, name);
        let shown = format!("/{path}");
        let Some((kind, array_name)) = NewKind::of(name).filter(|_| name != super::GROUP_SIDECAR)
        else {
            return Err(self.write_refused(&shown).unwrap_or(Error::NotWritable {
                key: shown,
                reason: "only NAME.npy or .NAME.json is made in a group (each makes array \
                         NAME); other files are not"
                    .into(),
            }));
        };
        let array = self.child_path(parent, array_name)?;
        self.node_writer(&format!("/{array}"))?;
        if self.hierarchy.kind_of(&array).is_some() {
            return Err(Error::Exists(format!("/{array}")));
        }
        let writes = self.writes.as_ref().ok_or(Error::ReadOnly)?;
        let file = {
            let mut creating = self.creating.lock();
            if creating.contains_key(&path) || creating.values().any(|c| c.file.array() == array) {
                return Err(Error::Exists(shown));
            }
            let file = Arc::new(writes.create(&array, name, kind)?);
            creating.insert(
                path.clone(),
                Creating {
                    file: file.clone(),
                    parent,
                    handles: 1,
                },
            );
            file
        };
        let made = (|| {
            let free = |ino| self.number_free(ino);
            let held = self.inodes.hold(
                parent,
                name,
                Node::New(path.clone()),
                super::inode::Reading::default(),
                &free,
            )?;
            let attr = self.getattr(held.ino)?;
            let (_, open) = self
                .inodes
                .open(held.ino)
                .ok_or_else(|| Error::NotFound(format!("inode {}", held.ino)))?;
            let content = Arc::new(super::content::Content::Bytes(Vec::new()));
            let fh = self.handles.open_new(content, open, file);
            Ok((
                Lookup {
                    attr,
                    renewed: held.renewed,
                },
                fh,
            ))
        })();
        if made.is_err() {
            self.creating.lock().remove(&path);
        }
        made
    }

    /// The file being made at `path`.
    pub(super) fn new_file(&self, path: &str) -> Option<Arc<NewFile>> {
        self.creating.lock().get(path).map(|c| c.file.clone())
    }

    /// Make the array of `file` when it is whole (nothing to do until then, or once it
    /// was made). The inodes whose attributes and pages the kernel is to drop: the
    /// directory the array is in.
    pub(super) fn make_new(&self, file: &NewFile) -> Result<Vec<u64>> {
        let _turn = file.turn();
        if file.made() {
            return Ok(Vec::new());
        }
        let array = file.array();
        let what = format!("/{array}");
        let writer = self.node_writer(&what)?;
        if self.hierarchy.kind_of(array).is_some() {
            return Err(Error::Exists(what));
        }
        let v2 = self.hierarchy.format_label() == "2";
        let format = if v2 { "2" } else { "3" };
        let defaults = &self.new_defaults;
        match file.kind() {
            NewKind::Sidecar => {
                let Some(spec) = file.sidecar_array(v2)? else {
                    return Ok(Vec::new());
                };
                let (docs, _) = crate::write::new_array::documents(&spec, array, format, defaults)?;
                self.change(
                    writer.as_ref(),
                    |change| put_documents(change, &docs),
                    |_| format!("{what}: array made from {}", file.name()),
                )?;
                log::info!("{what}: array made from {} (fill values)", file.name());
            }
            NewKind::Npy => {
                let Some((spec, layout, info)) = file.npy_array()? else {
                    return Ok(Vec::new());
                };
                let (docs, meta) =
                    crate::write::new_array::documents(&spec, array, format, defaults)?;
                let staged = file.take_staged(&info)?;
                let store = self.hierarchy.store().clone();
                // Chunks first, then the documents, so that a reader never finds the
                // array without its data; a store that takes a change whole takes the
                // documents first (it checks chunks against them).
                let done = self.change(
                    writer.as_ref(),
                    |change| {
                        let first = change.all_or_nothing();
                        if first {
                            put_documents(change, &docs)?;
                        }
                        let done =
                            crate::write::commit(&staged, &meta, store.as_ref(), change, layout)?;
                        if !first {
                            put_documents(change, &docs)?;
                        }
                        Ok(done)
                    },
                    |done| {
                        format!(
                            "{what}: array made from {} ({} bytes)",
                            file.name(),
                            done.staged_bytes
                        )
                    },
                )?;
                self.count_written(array, done.bytes_put);
                log::info!(
                    "{what}: array made from {}: shape {:?}, {} chunks written ({} bytes)",
                    file.name(),
                    meta.shape,
                    done.chunks_put,
                    done.bytes_put
                );
            }
        }
        file.set_made();
        self.refresh_path(folder_of(array))?;
        let parent = self.creating.lock().get(&path_of(file)).map(|c| c.parent);
        Ok(parent.into_iter().collect())
    }

    /// A handle of a file being made is closed: at its last, the array is made if it was
    /// not (a file that is not whole then makes none, and says so in the log), and the
    /// name stands for what the store holds again.
    pub(super) fn release_new(&self, file: &Arc<NewFile>) {
        let path = path_of(file);
        let last = {
            let mut creating = self.creating.lock();
            match creating.get_mut(&path) {
                Some(c) if Arc::ptr_eq(&c.file, file) => {
                    c.handles = c.handles.saturating_sub(1);
                    (c.handles == 0).then_some(c.parent)
                }
                _ => None,
            }
        };
        let Some(parent) = last else {
            return;
        };
        if let Err(e) = self.make_new(file) {
            log::warn!("/{path}: no array made at the last close: {e}");
        } else if !file.made() && file.kind() == NewKind::Sidecar {
            log::warn!(
                "/{path}: no array made at the last close: not a whole JSON object ({} bytes)",
                file.size()
            );
        }
        self.creating.lock().remove(&path);
        self.inodes.unname(parent, file.name());
    }
}

/// The node path of the folder of the array at `array`.
fn folder_of(array: &str) -> &str {
    array.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// The path of a file being made (beside the array it makes).
fn path_of(file: &NewFile) -> String {
    join(folder_of(file.array()), file.name())
}

/// Put the documents of a new array, each where nothing is.
fn put_documents(change: &mut dyn Change, docs: &[(String, Vec<u8>)]) -> Result<()> {
    for (key, bytes) in docs {
        crate::write::fault::before_put();
        change.put(key, bytes, &Expected::Absent)?;
    }
    Ok(())
}
