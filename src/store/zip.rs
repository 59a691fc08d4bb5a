//! A store inside a zip archive, read by ranges of its container (a local file or a
//! remote object): `rc-zip` finds the end record (read from the end), parses the central
//! directory, and reads each entry's local header, data and CRC. Entries must be stored
//! or deflated. An archive whose only top-level folder holds the hierarchy (as `zip -r
//! data.zarr.zip data.zarr` makes) is opened at that folder.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use rc_zip::fsm::{ArchiveFsm, EntryFsm, FsmResult};
use rc_zip::parse::{Entry, EntryKind, Method};

use super::blob::Blob;
use super::{value_buffer, ByteRange, Caps, Head, Listing, Store, Value, MAX_VALUE};
use crate::error::{Error, Result};

/// Bytes read at a time while parsing (the end record and central directory).
const READ_BLOCK: u64 = 1 << 20;
/// Slack read past an entry's data on the first request: the local header's extra
/// field (usually empty) and a data descriptor, so one request usually does.
const ENTRY_SLACK: u64 = 128;
/// Steps of a parser before the archive is declared broken (each step consumes input).
const MAX_STEPS: usize = 1 << 22;
/// The fixed part of a local file header.
const LOCAL_HEADER: u64 = 30;
/// The names that mark a hierarchy's root.
const ROOT_MARKERS: &[&str] = &["zarr.json", ".zgroup", ".zarray", ".zmetadata"];

/// A read-only store over a zip archive.
pub struct ZipStore {
    blob: Box<dyn Blob>,
    entries: HashMap<String, Entry>,
    dirs: BTreeMap<String, Listing>,
    /// Where each stored entry's data starts (read from its local header once).
    data_offsets: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for ZipStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZipStore")
            .field("archive", &self.blob.name())
            .finish()
    }
}

fn broken(blob: &dyn Blob, why: impl std::fmt::Display) -> Error {
    Error::corrupt(blob.name(), format!("zip archive: {why}"))
}

/// A name usable as a key: `/`-separated parts, none empty, `.` or `..`.
fn valid_key(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\0')
        && name
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
}

impl ZipStore {
    /// Read the archive's directory.
    pub fn open(blob: Box<dyn Blob>) -> Result<ZipStore> {
        let size = blob.size();
        let mut fsm = ArchiveFsm::new(size);
        // The block last read: the end record and central directory sit at the end, so
        // most archives parse from one read.
        let mut block: (u64, Vec<u8>) = (0, Vec::new());
        let mut steps = 0;
        let archive = loop {
            steps += 1;
            if steps > MAX_STEPS {
                return Err(broken(&*blob, "the directory does not parse"));
            }
            if let Some(offset) = fsm.wants_read() {
                let in_block = offset >= block.0 && offset < block.0 + block.1.len() as u64;
                if !in_block {
                    // The block ending at the end of the archive when that covers
                    // `offset`: the directory usually follows in the same read.
                    let start = if offset.saturating_add(READ_BLOCK) > size {
                        size.saturating_sub(READ_BLOCK).min(offset)
                    } else {
                        offset
                    };
                    block = (start, blob.read(start, READ_BLOCK)?.bytes);
                }
                let from = (offset - block.0) as usize;
                let available = block.1.get(from..).unwrap_or(&[]);
                let space = fsm.space();
                let n = space.len().min(available.len());
                space[..n].copy_from_slice(&available[..n]);
                fsm.fill(n);
            }
            fsm = match fsm.process().map_err(|e| broken(&*blob, e))? {
                FsmResult::Continue(fsm) => fsm,
                FsmResult::Done(archive) => break archive,
            };
        };
        let files: Vec<Entry> = archive
            .entries()
            .filter(|e| matches!(e.kind(), EntryKind::File))
            .cloned()
            .collect();
        let strip = root_folder(&files);
        let mut entries = HashMap::new();
        let mut dirs: BTreeMap<String, Listing> = BTreeMap::new();
        for entry in files {
            let Some(name) = entry.name.strip_prefix(strip.as_str()) else {
                continue;
            };
            if !valid_key(name) {
                log::warn!(
                    "{}: zip entry {:?} is not a usable key",
                    blob.name(),
                    entry.name
                );
                continue;
            }
            let name = name.to_string();
            let mut parent = String::new();
            let parts: Vec<&str> = name.split('/').collect();
            for (i, part) in parts.iter().enumerate() {
                let listing = dirs.entry(parent.clone()).or_default();
                if i + 1 == parts.len() {
                    listing.keys.push(part.to_string());
                } else {
                    listing.prefixes.push(part.to_string());
                    parent = format!("{parent}{part}/");
                }
            }
            entries.insert(name, entry);
        }
        for listing in dirs.values_mut() {
            listing.keys.sort();
            listing.keys.dedup();
            listing.prefixes.sort();
            listing.prefixes.dedup();
        }
        Ok(ZipStore {
            blob,
            entries,
            dirs,
            data_offsets: Mutex::new(HashMap::new()),
        })
    }

    /// Where the data of `entry` starts: after its local header.
    fn data_offset(&self, key: &str, entry: &Entry) -> Result<u64> {
        if let Some(&at) = self.data_offsets.lock().get(key) {
            return Ok(at);
        }
        let header = self.blob.read(entry.header_offset, LOCAL_HEADER)?.bytes;
        let at = parse_local_header(&header)
            .and_then(|extra| entry.header_offset.checked_add(LOCAL_HEADER + extra))
            .ok_or_else(|| self.entry_error(key, "bad local header"))?;
        self.data_offsets.lock().insert(key.to_string(), at);
        Ok(at)
    }

    fn entry_error(&self, key: &str, why: impl std::fmt::Display) -> Error {
        Error::corrupt(format!("{}!{key}", self.blob.name()), why.to_string())
    }

    /// The whole entry, decompressed and checked against its CRC and size, with the
    /// archive's version.
    fn read_entry(&self, key: &str, entry: &Entry) -> Result<Value> {
        if entry.uncompressed_size > MAX_VALUE {
            return Err(self.entry_error(key, "entry larger than any chunk can be"));
        }
        let mut out = value_buffer(key, entry.uncompressed_size)?;
        let mut fsm = EntryFsm::new(Some(entry.clone()), None);
        let mut next = entry.header_offset;
        let first = LOCAL_HEADER
            .saturating_add(entry.name.len() as u64)
            .saturating_add(entry.compressed_size)
            .saturating_add(ENTRY_SLACK);
        let mut input: Vec<u8> = Vec::new();
        let mut used = 0usize;
        let mut written = 0usize;
        let mut at_end = false;
        let mut version = self.blob.version();
        for _ in 0..MAX_STEPS {
            if fsm.wants_read() {
                if used == input.len() && !at_end {
                    let want = if next == entry.header_offset {
                        first
                    } else {
                        1 << 16
                    };
                    let got = self.blob.read(next, want)?;
                    (input, version) = (got.bytes, got.version);
                    used = 0;
                    next += input.len() as u64;
                    at_end = input.is_empty();
                }
                let space = fsm.space();
                let n = space.len().min(input.len() - used);
                space[..n].copy_from_slice(&input[used..used + n]);
                used += n;
                fsm.fill(n);
            }
            let room = out.get_mut(written..).unwrap_or_default();
            fsm = match fsm.process(room).map_err(|e| self.entry_error(key, e))? {
                FsmResult::Continue((fsm, outcome)) => {
                    written += outcome.bytes_written;
                    fsm
                }
                FsmResult::Done(_) => {
                    if written as u64 != entry.uncompressed_size {
                        return Err(self.entry_error(key, "entry shorter than its size"));
                    }
                    return Ok(Value {
                        bytes: out,
                        version,
                    });
                }
            };
        }
        Err(self.entry_error(key, "entry does not decompress"))
    }

    fn entry(&self, key: &str) -> Result<Option<&Entry>> {
        let Some(entry) = self.entries.get(key) else {
            return Ok(None);
        };
        match entry.method {
            Method::Store | Method::Deflate => Ok(Some(entry)),
            other => Err(Error::unsupported(
                format!("{}!{key}", self.blob.name()),
                format!("zip compression {other:?} (entries must be stored or deflated)"),
            )),
        }
    }
}

/// The length of a local header's name and extra field, or `None` when it is no header.
fn parse_local_header(header: &[u8]) -> Option<u64> {
    let field = |at: usize| -> Option<u64> {
        Some(u16::from_le_bytes(header.get(at..at + 2)?.try_into().ok()?) as u64)
    };
    (header.get(..4)? == b"PK\x03\x04").then_some(())?;
    Some(field(26)? + field(28)?)
}

/// The folder to open the archive at: "" when the root's metadata is at the top, else the
/// one top-level folder holding it.
fn root_folder(files: &[Entry]) -> String {
    if files
        .iter()
        .any(|e| ROOT_MARKERS.contains(&e.name.as_str()))
    {
        return String::new();
    }
    let mut tops = files.iter().map(|e| e.name.split('/').next().unwrap_or(""));
    let Some(top) = tops.next() else {
        return String::new();
    };
    let folder = format!("{top}/");
    let single = files.iter().all(|e| e.name.starts_with(&folder));
    let marked = files.iter().any(|e| {
        e.name
            .strip_prefix(&folder)
            .is_some_and(|rest| ROOT_MARKERS.contains(&rest))
    });
    if single && marked {
        folder
    } else {
        String::new()
    }
}

impl Store for ZipStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some(entry) = self.entry(key)? else {
            return Ok(None);
        };
        let Some(range) = range else {
            return self.read_entry(key, entry).map(Some);
        };
        let (offset, len) = range.clip(entry.uncompressed_size);
        if entry.method == Method::Store {
            // Stored data is read in place: a shard's inner chunk costs one request.
            let start = self.data_offset(key, entry)?;
            let got = self.blob.read(start.saturating_add(offset), len)?;
            if got.bytes.len() as u64 != len {
                return Err(self.entry_error(key, "entry data past the end of the archive"));
            }
            return Ok(Some(got));
        }
        let mut whole = self.read_entry(key, entry)?;
        whole.bytes.truncate((offset + len) as usize);
        whole.bytes.drain(..offset as usize);
        Ok(Some(whole))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        Ok(self.entry(key)?.map(|entry| Head {
            size: entry.uncompressed_size,
            version: self.blob.version(),
        }))
    }

    fn will_need(&self, _key: &str) {}

    /// The container's concurrency and request size; no location of its own: a disk
    /// cache wraps the store the archive lives in, not the archive.
    fn caps(&self) -> Caps {
        Caps {
            location: None,
            ..self.blob.caps()
        }
    }

    fn list_dir(&self, prefix: &str) -> Result<Listing> {
        let prefix = prefix.trim_end_matches('/');
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        Ok(self.dirs.get(&prefix).cloned().unwrap_or_default())
    }
}
