//! Kerchunk's Parquet layout of a reference set, read lazily: a folder holding
//! `.zmetadata` (the Zarr metadata documents and `record_size`) and, per array,
//! `ARRAY/refs.N.parq` files of `record_size` rows each (`path`, `offset`, `size`, `raw`),
//! one row per chunk in C order of the chunk grid. The folder is read through a store (a
//! local folder, or a URL's store with its options and disk cache). Opening reads
//! `.zmetadata` alone; a chunk's reference is found by its index in the grid, and only the
//! one Parquet file holding it is read (the last few are kept). The version of each file
//! read is kept too, so that a set that is followed while mounted (`live.rs`) can tell
//! when a file it read has changed.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use lru::LruCache;
use parking_lot::Mutex;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::store::{Store, Version};

/// Parquet files of references kept decoded at once.
const KEPT_FILES: usize = 8;
/// Rows one Parquet file may hold at most (its references are kept in memory).
const MAX_RECORD_SIZE: u64 = 10_000_000;

/// One row: inline bytes, a (path, offset, size) range, or nothing (a missing chunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Inline(Vec<u8>),
    Range {
        path: String,
        offset: u64,
        size: u64,
    },
    Missing,
}

/// A references file: its array and its number.
type FileId = (String, u64);
/// A references file being read or read.
type Slot = Arc<OnceLock<std::result::Result<Arc<RefsFile>, Arc<Error>>>>;

/// An array of the set: its chunk grid and the separator of its chunk keys.
struct Grid {
    chunks_per_dim: Vec<u64>,
    separator: char,
}

pub struct ParquetRefs {
    /// The folder, as a store; `label` names it in messages.
    folder: Arc<dyn Store>,
    label: String,
    record_size: u64,
    /// The metadata documents, by key.
    pub documents: BTreeMap<String, Vec<u8>>,
    grids: BTreeMap<String, Grid>,
    files: Mutex<LruCache<FileId, Slot>>,
    /// The version of `.zmetadata` the set was read from.
    zmetadata: Version,
    /// The version each references file had when this reading first read it.
    first_read: Mutex<HashMap<FileId, Version>>,
    /// A references file read again (after it was let go) had another version: the set
    /// changed since this reading.
    changed: AtomicBool,
}

impl ParquetRefs {
    /// The Parquet reference set in `folder` (named `label`) and the version of its
    /// `.zmetadata`, or `None` when the folder holds none (no readable `.zmetadata` with
    /// `record_size`: a Zarr folder's consolidated metadata, say).
    pub fn open(folder: Arc<dyn Store>, label: &str) -> Result<Option<(ParquetRefs, Version)>> {
        let label = label.trim_end_matches('/').to_string();
        let doc_label = format!("{label}/.zmetadata");
        let Ok(Some(value)) = folder.read(".zmetadata", None) else {
            return Ok(None);
        };
        // Documents inline as JSON values may hold bare NaN (VirtualiZarr writes them).
        let Ok(doc) = crate::json::parse(&value.bytes) else {
            return Ok(None);
        };
        let Some(record_size) = doc.get("record_size") else {
            return Ok(None);
        };
        let record_size = record_size
            .as_u64()
            .filter(|n| (1..=MAX_RECORD_SIZE).contains(n))
            .ok_or_else(|| Error::metadata(&doc_label, "record_size: not a count of rows"))?;
        let Some(Json::Object(metadata)) = doc.get("metadata") else {
            return Err(Error::metadata(&doc_label, "metadata: not an object"));
        };
        let mut documents = BTreeMap::new();
        let mut grids = BTreeMap::new();
        for (key, value) in metadata {
            let bytes = match value {
                Json::String(s) => s.as_bytes().to_vec(),
                other => other.to_string().into_bytes(),
            };
            if let Some(array) = key.strip_suffix("/.zarray") {
                if let Some(grid) = grid_of(&bytes) {
                    grids.insert(array.to_string(), grid);
                }
            }
            documents.insert(key.clone(), bytes);
        }
        let refs = ParquetRefs {
            folder,
            label,
            record_size,
            documents,
            grids,
            files: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_FILES).unwrap_or(NonZeroUsize::MIN),
            )),
            zmetadata: value.version.clone(),
            first_read: Mutex::new(HashMap::new()),
            changed: AtomicBool::new(false),
        };
        Ok(Some((refs, value.version)))
    }

    /// The version of `.zmetadata` this reading was made from.
    pub fn zmetadata_version(&self) -> &Version {
        &self.zmetadata
    }

    /// The references files this reading holds (read, and not let go), by key, with the
    /// version each was read at.
    pub fn held(&self) -> Vec<(String, Version)> {
        let files = self.files.lock();
        files
            .iter()
            .filter_map(|((array, n), slot)| {
                let file = slot.get()?.as_ref().ok()?;
                Some((format!("{array}/refs.{n}.parq"), file.version.clone()))
            })
            .collect()
    }

    /// Whether a references file read again had changed since this reading first read
    /// it.
    pub fn changed(&self) -> bool {
        self.changed.load(Ordering::Relaxed)
    }

    /// Keep every references file this reading reads from now on, for its life: it is
    /// no longer the set's newest reading, and what it read is not there to read again.
    pub fn keep_all(&self) {
        self.files.lock().resize(NonZeroUsize::MAX);
    }

    /// The reference of chunk key `key`: `None` when it is no chunk of a known array.
    pub fn row(&self, key: &str) -> Result<Option<Row>> {
        Ok(self
            .place(key)?
            .map(|p| p.file.rows.get(p.row).cloned().unwrap_or(Row::Missing)))
    }

    /// Where chunk key `key` lies among its references file's rows: `None` when it is no
    /// chunk of a known array.
    pub fn place(&self, key: &str) -> Result<Option<Place>> {
        let Some((array, index)) = key.rsplit_once('/') else {
            return Ok(None);
        };
        let Some(grid) = self.grids.get(array) else {
            return Ok(None);
        };
        let Some(i) = grid.ravel(index) else {
            return Ok(None);
        };
        let (file, row) = (i / self.record_size, (i % self.record_size) as usize);
        Ok(Some(Place {
            name: format!("{array}/refs.{file}.parq"),
            file: self.file(array, file)?,
            row,
        }))
    }

    /// The rows of `ARRAY/refs.N.parq`, read once while kept: readers of a file being
    /// read wait for that read (no lock of ours held across it); a failure is not kept.
    fn file(&self, array: &str, n: u64) -> Result<Arc<RefsFile>> {
        let id = (array.to_string(), n);
        let slot = self
            .files
            .lock()
            .get_or_insert(id.clone(), || Arc::new(OnceLock::new()))
            .clone();
        let key = format!("{array}/refs.{n}.parq");
        let label = format!("{}/{key}", self.label);
        let read = || -> Result<Arc<RefsFile>> {
            // No file: every chunk it would hold is missing.
            let (rows, version) = match self.folder.read(&key, None)? {
                Some(value) => (
                    read_rows(&label, value.bytes, self.record_size)?,
                    value.version,
                ),
                None => (Vec::new(), Version::Unknown),
            };
            let first = self
                .first_read
                .lock()
                .entry(id.clone())
                .or_insert_with(|| version.clone())
                .clone();
            if first != version {
                self.changed.store(true, Ordering::Relaxed);
            }
            Ok(Arc::new(RefsFile::new(rows, version)))
        };
        // Every reader of the file, the one that read it and those that waited, gets its
        // error.
        let got = slot.get_or_init(|| read().map_err(Arc::new)).clone();
        got.map_err(|why| {
            let mut files = self.files.lock();
            if files.peek(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                files.pop(&id);
            }
            Error::shared(&label, &why)
        })
    }
}

/// The rows of one references file, and the rank of each range row among the rows of
/// its target (what groups a target's chunks for coalesced reads).
pub struct RefsFile {
    rows: Vec<Row>,
    rank: Vec<u32>,
    /// The version of the file the rows were read from (unknown: no such file).
    version: Version,
}

impl RefsFile {
    fn new(rows: Vec<Row>, version: Version) -> RefsFile {
        let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let rank = rows
            .iter()
            .map(|r| match r {
                Row::Range { path, .. } => {
                    let n = seen.entry(path.as_str()).or_default();
                    *n += 1;
                    *n - 1
                }
                _ => 0,
            })
            .collect();
        RefsFile {
            rows,
            rank,
            version,
        }
    }
}

/// A chunk's place among the chunks of its references file.
pub struct Place {
    /// The file's key, naming the runs of its targets.
    pub name: String,
    file: Arc<RefsFile>,
    row: usize,
}

impl Place {
    /// The chunk's rank among the file's chunks in the same target.
    pub fn member(&self) -> usize {
        self.file
            .rank
            .get(self.row)
            .map_or(usize::MAX, |&r| r as usize)
    }

    /// The ranges of the file's chunks in the target of this chunk, in row order (`None`
    /// for a whole-target reference): the members that [`Place::member`] counts.
    pub fn ranges(&self) -> Vec<Option<(u64, u64)>> {
        let Some(Row::Range { path: own, .. }) = self.file.rows.get(self.row) else {
            return Vec::new();
        };
        self.file
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::Range { path, offset, size } if path == own => {
                    Some((*size > 0).then_some((*offset, *size)))
                }
                _ => None,
            })
            .collect()
    }
}

impl Grid {
    /// The C-order index of chunk key `index` (`1.2.3` or `1/2/3`; `0` for a 0-d array).
    fn ravel(&self, index: &str) -> Option<u64> {
        if self.chunks_per_dim.is_empty() {
            return (index == "0").then_some(0);
        }
        let parts: Vec<u64> = index
            .split(self.separator)
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        if parts.len() != self.chunks_per_dim.len() {
            return None;
        }
        let mut i: u64 = 0;
        for (p, n) in parts.iter().zip(&self.chunks_per_dim) {
            if p >= n {
                return None;
            }
            i = i.checked_mul(*n)?.checked_add(*p)?;
        }
        Some(i)
    }
}

/// The chunk grid of a `.zarray` document.
fn grid_of(zarray: &[u8]) -> Option<Grid> {
    let doc: Json = serde_json::from_slice(zarray).ok()?;
    let dims = |k: &str| -> Option<Vec<u64>> {
        doc.get(k)?.as_array()?.iter().map(Json::as_u64).collect()
    };
    let (shape, chunks) = (dims("shape")?, dims("chunks")?);
    if shape.len() != chunks.len() {
        return None;
    }
    let chunks_per_dim = shape
        .iter()
        .zip(&chunks)
        .map(|(s, c)| (*c > 0).then(|| s.div_ceil(*c)))
        .collect::<Option<Vec<u64>>>()?;
    let separator = match doc.get("dimension_separator").and_then(Json::as_str) {
        Some("/") => '/',
        _ => '.',
    };
    Some(Grid {
        chunks_per_dim,
        separator,
    })
}

/// The rows of one references file (at most `record_size`), from its bytes.
fn read_rows(label: &str, bytes: Vec<u8>, record_size: u64) -> Result<Vec<Row>> {
    let bad = |e: String| Error::corrupt(label, format!("Parquet references: {e}"));
    let reader =
        SerializedFileReader::new(bytes::Bytes::from(bytes)).map_err(|e| bad(e.to_string()))?;
    let rows = reader.metadata().file_metadata().num_rows();
    if rows < 0 || rows as u64 > record_size {
        return Err(bad(format!(
            "{rows} rows, more than record_size {record_size}"
        )));
    }
    let mut out = Vec::with_capacity(rows as usize);
    for row in reader.get_row_iter(None).map_err(|e| bad(e.to_string()))? {
        let row = row.map_err(|e| bad(e.to_string()))?;
        let (mut path, mut offset, mut size, mut raw) = (None, 0i64, 0i64, None);
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("path", Field::Str(s)) => path = Some(s.clone()),
                ("path", Field::Bytes(b)) => {
                    path = Some(String::from_utf8_lossy(b.data()).into_owned())
                }
                ("offset", Field::Long(n)) => offset = *n,
                ("offset", Field::Int(n)) => offset = i64::from(*n),
                ("size", Field::Long(n)) => size = *n,
                ("size", Field::Int(n)) => size = i64::from(*n),
                ("raw", Field::Bytes(b)) => raw = Some(b.data().to_vec()),
                ("raw", Field::Str(s)) => raw = Some(s.as_bytes().to_vec()),
                _ => {}
            }
        }
        out.push(match (raw, path) {
            (Some(raw), _) => Row::Inline(raw),
            (None, Some(path)) => Row::Range {
                path,
                offset: u64::try_from(offset).map_err(|_| bad(format!("offset {offset}")))?,
                size: u64::try_from(size).map_err(|_| bad(format!("size {size}")))?,
            },
            (None, None) => Row::Missing,
        });
        if out.len() as u64 > record_size {
            return Err(bad("more rows than record_size".into()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_ravel_in_c_order_and_others_are_no_chunks() {
        let zarray = br#"{"shape": [5, 7], "chunks": [2, 3], "dimension_separator": "."}"#;
        let grid = grid_of(zarray).unwrap();
        assert_eq!(grid.chunks_per_dim, vec![3, 3]);
        assert_eq!(grid.ravel("0.0"), Some(0));
        assert_eq!(grid.ravel("1.2"), Some(5));
        assert_eq!(grid.ravel("2.2"), Some(8));
        for bad in ["3.0", "0.3", "1", "1.2.3", "a.b", "-1.0", "1/2"] {
            assert_eq!(grid.ravel(bad), None, "{bad}");
        }
        let scalar = grid_of(br#"{"shape": [], "chunks": []}"#).unwrap();
        assert_eq!(scalar.ravel("0"), Some(0));
        assert!(grid_of(br#"{"shape": [4], "chunks": [0]}"#).is_none());
        let nested = grid_of(br#"{"shape": [4, 4], "chunks": [2, 2], "dimension_separator": "/"}"#);
        assert_eq!(nested.unwrap().ravel("1/1"), Some(3));
    }
}
