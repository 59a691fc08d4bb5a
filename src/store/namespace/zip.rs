//! A store inside a zip archive, read by ranges of its container (a local file or a
//! remote object): `rc-zip` finds the end record (read from the end), parses the central
//! directory, and reads each entry's local header, data and CRC. Entries must be stored
//! or deflated. An archive whose entries all lie in one top-level folder (as `zip -r
//! data.zarr.zip data.zarr` makes) is opened at that folder, when the folder holds one of
//! the root marker names its opener gives (the store layer knows no format's names), or
//! whenever it is the only one if none are given. In a container that wants large
//! requests (a remote object), entries lying back to back are fetched together
//! ([`Spans`]): reading one reads the run of entries around it in one request, and the
//! others are served from it.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use rc_zip::fsm::{ArchiveFsm, EntryFsm, FsmResult};
use rc_zip::parse::{Entry, EntryKind, Method};

use crate::error::{Error, Result};
use crate::store::adapter::spans::Spans;
use crate::store::source::blob::Blob;
use crate::store::{value_buffer, ByteRange, Caps, Head, Listing, Store, Value, MAX_VALUE};

/// Bytes read at a time while parsing (the end record and central directory).
const READ_BLOCK: u64 = 1 << 20;
/// Slack read past an entry's data on the first request: the local header's extra
/// field (usually empty) and a data descriptor, so one request usually does.
const ENTRY_SLACK: u64 = 128;
/// Steps of a parser before the archive is declared broken (each step consumes input).
const MAX_STEPS: usize = 1 << 22;
/// The fixed part of a local file header.
const LOCAL_HEADER: u64 = 30;
/// The most a local header's name and extra field can add to it (two 16-bit lengths),
/// and a data descriptor (with its signature, 64-bit sizes) after the data.
const MAX_HEADER_TAIL: u64 = 2 * 0xffff;
const MAX_DESCRIPTOR: u64 = 24;

/// A read-only store over a zip archive.
pub struct ZipStore {
    blob: Box<dyn Blob>,
    /// Each usable entry by key, with its rank among all the archive's entries in the
    /// order they lie in it.
    entries: HashMap<String, (Entry, usize)>,
    /// The bytes each of the archive's entries spans (local header, data, descriptor) in
    /// the order they lie in it; `None` for one that spans none.
    extents: Vec<Option<(u64, u64)>>,
    dirs: BTreeMap<String, Listing>,
    /// Where each stored entry's data starts (read from its local header once).
    data_offsets: Mutex<HashMap<String, u64>>,
    /// Runs of neighbouring entries fetched together.
    spans: Spans,
    /// The container's preferred request size (0: entries are read one by one).
    request: u64,
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

/// The bytes each entry spans, in archive order (`sorted` by local header offset): from
/// its local header to the next entry's, at most what a header, the data and a descriptor
/// can take; the last one to the end of its data and some slack.
fn extents(sorted: &[&Entry], size: u64) -> Vec<Option<(u64, u64)>> {
    // The next larger header offset after each entry, found from the end.
    let mut next = vec![None; sorted.len()];
    for i in (0..sorted.len().saturating_sub(1)).rev() {
        let later = sorted[i + 1].header_offset;
        next[i] = if later > sorted[i].header_offset {
            Some(later)
        } else {
            next[i + 1]
        };
    }
    sorted
        .iter()
        .zip(next)
        .map(|(e, next)| {
            let start = e.header_offset;
            let end = match next {
                Some(next) => LOCAL_HEADER
                    .saturating_add(MAX_HEADER_TAIL)
                    .saturating_add(e.compressed_size)
                    .saturating_add(MAX_DESCRIPTOR)
                    .saturating_add(start)
                    .min(next),
                None => LOCAL_HEADER
                    .saturating_add(e.name.len() as u64)
                    .saturating_add(e.compressed_size)
                    .saturating_add(ENTRY_SLACK)
                    .saturating_add(start),
            };
            let end = end.min(size);
            (end > start).then(|| (start, end - start))
        })
        .collect()
}

impl ZipStore {
    /// Read the archive's directory. `root_markers` are the names of the files that mark
    /// the root of what the archive holds (see the module's doc).
    pub fn open(blob: Box<dyn Blob>, root_markers: &[String]) -> Result<ZipStore> {
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
        let mut sorted: Vec<&Entry> = archive.entries().collect();
        sorted.sort_by_key(|e| e.header_offset);
        let extents = extents(&sorted, size);
        let files: Vec<(Entry, usize)> = sorted
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.kind(), EntryKind::File))
            .map(|(rank, e)| ((*e).clone(), rank))
            .collect();
        let strip = root_folder(files.iter().map(|(e, _)| e.name.as_str()), root_markers);
        let mut entries = HashMap::new();
        let mut dirs: BTreeMap<String, Listing> = BTreeMap::new();
        for (entry, rank) in files {
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
            entries.insert(name, (entry, rank));
        }
        for listing in dirs.values_mut() {
            listing.keys.sort();
            listing.keys.dedup();
            listing.prefixes.sort();
            listing.prefixes.dedup();
        }
        let request = blob.caps().request_bytes;
        Ok(ZipStore {
            blob,
            entries,
            extents,
            dirs,
            data_offsets: Mutex::new(HashMap::new()),
            spans: Spans::default(),
            request,
        })
    }

    /// The bytes entry `rank` spans in the archive (its local header, data and
    /// descriptor), from the run of entries around it: `None` when entries are read one
    /// by one (a local archive) or it lies apart from its neighbours.
    fn member(&self, rank: usize) -> Result<Option<Value>> {
        let version = self.blob.version();
        let got = self.spans.read(
            self.blob.name(),
            &version,
            || self.extents.clone(),
            rank,
            self.request,
            |start, len| self.blob.read(start, len),
        )?;
        Ok(got.map(|bytes| Value { bytes, version }))
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
    /// archive's version: parsed out of the run of entries around it when there is one,
    /// else read from the archive.
    fn read_entry(&self, key: &str, entry: &Entry, rank: usize) -> Result<Value> {
        if entry.uncompressed_size > MAX_VALUE {
            return Err(self.entry_error(key, "entry larger than any chunk can be"));
        }
        let mut out = value_buffer(key, entry.uncompressed_size)?;
        let mut fsm = EntryFsm::new(Some(entry.clone()), None);
        let first = LOCAL_HEADER
            .saturating_add(entry.name.len() as u64)
            .saturating_add(entry.compressed_size)
            .saturating_add(ENTRY_SLACK);
        // The entry's bytes from its run, if any; the archive is read on from where they
        // end should the parser want more.
        let (mut input, mut version) = match self.member(rank)? {
            Some(got) => (got.bytes, got.version),
            None => (Vec::new(), self.blob.version()),
        };
        let mut next = entry.header_offset.saturating_add(input.len() as u64);
        let mut used = 0usize;
        let mut written = 0usize;
        let mut at_end = false;
        // Whether the parser has had a turn with all the input it was given: only then is
        // more read (it may not need more: the entry's bytes from a run end where it does).
        let mut idle = input.is_empty();
        for _ in 0..MAX_STEPS {
            if fsm.wants_read() {
                if used == input.len() && !at_end && idle {
                    let want = if next == entry.header_offset {
                        first
                    } else {
                        1 << 16
                    };
                    let got = self.blob.read(next, want)?;
                    (input, version) = (got.bytes, got.version);
                    used = 0;
                    next = next.saturating_add(input.len() as u64);
                    at_end = input.is_empty();
                }
                let space = fsm.space();
                let n = space.len().min(input.len() - used);
                if n > 0 {
                    space[..n].copy_from_slice(&input[used..used + n]);
                    used += n;
                    fsm.fill(n);
                }
            }
            let room = out.get_mut(written..).unwrap_or_default();
            fsm = match fsm.process(room).map_err(|e| self.entry_error(key, e))? {
                FsmResult::Continue((fsm, outcome)) => {
                    written += outcome.bytes_written;
                    idle = used == input.len() && outcome.bytes_written == 0;
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

    /// Stored data `[offset, offset + len)` of entry `rank` from the run of entries
    /// around it, or `None` (read it from the archive) when there is no run or the entry's
    /// data does not lie in its part of it.
    fn stored_from_run(&self, rank: usize, offset: u64, len: u64) -> Result<Option<Value>> {
        let Some(got) = self.member(rank)? else {
            return Ok(None);
        };
        let Some(data) = parse_local_header(&got.bytes).and_then(|n| n.checked_add(LOCAL_HEADER))
        else {
            return Ok(None);
        };
        let from = data
            .checked_add(offset)
            .and_then(|f| usize::try_from(f).ok());
        let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
        Ok(match (from, to) {
            (Some(f), Some(t)) if t <= got.bytes.len() => Some(Value {
                bytes: got.bytes[f..t].to_vec(),
                version: got.version,
            }),
            _ => None,
        })
    }

    fn entry(&self, key: &str) -> Result<Option<(&Entry, usize)>> {
        let Some((entry, rank)) = self.entries.get(key) else {
            return Ok(None);
        };
        match entry.method {
            Method::Store | Method::Deflate => Ok(Some((entry, *rank))),
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

/// The folder to open the archive at, given the names of its files: "" when a root
/// marker is at the top, else the one top-level folder holding every file, when it holds
/// a marker at its top (or whenever there are no markers to look for).
fn root_folder<'a>(names: impl Iterator<Item = &'a str> + Clone, markers: &[String]) -> String {
    let marker = |name: &str| markers.iter().any(|m| m == name);
    if names.clone().any(marker) {
        return String::new();
    }
    let Some(top) = names
        .clone()
        .next()
        .map(|n| n.split('/').next().unwrap_or(""))
    else {
        return String::new();
    };
    let folder = format!("{top}/");
    let single = names.clone().all(|n| n.starts_with(&folder));
    let marked = markers.is_empty()
        || names
            .clone()
            .any(|n| n.strip_prefix(&folder).is_some_and(marker));
    if single && marked {
        folder
    } else {
        String::new()
    }
}

impl Store for ZipStore {
    fn read(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let Some((entry, rank)) = self.entry(key)? else {
            return Ok(None);
        };
        let Some(range) = range else {
            return self.read_entry(key, entry, rank).map(Some);
        };
        let (offset, len) = range.clip(entry.uncompressed_size);
        if entry.method == Method::Store {
            if let Some(got) = self.stored_from_run(rank, offset, len)? {
                return Ok(Some(got));
            }
            // Stored data is read in place: a shard's inner chunk costs one request.
            let start = self.data_offset(key, entry)?;
            let got = self.blob.read(start.saturating_add(offset), len)?;
            if got.bytes.len() as u64 != len {
                return Err(self.entry_error(key, "entry data past the end of the archive"));
            }
            return Ok(Some(got));
        }
        let mut whole = self.read_entry(key, entry, rank)?;
        whole.bytes.truncate((offset + len) as usize);
        whole.bytes.drain(..offset as usize);
        Ok(Some(whole))
    }

    fn head(&self, key: &str) -> Result<Option<Head>> {
        Ok(self.entry(key)?.map(|(entry, _)| Head {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Version;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A stored (uncompressed) zip archive of `files`, in their order, as Python's
    /// `zipfile` writes one.
    fn archive(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut directory = Vec::new();
        let le16 = |v: &mut Vec<u8>, x: usize| v.extend_from_slice(&(x as u16).to_le_bytes());
        let le32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
        for (name, data) in files {
            let mut crc = flate2::Crc::new();
            crc.update(data);
            let offset = out.len() as u32;
            // version 20, no flags, stored, 1980-01-01 00:00
            let common = |v: &mut Vec<u8>| {
                for x in [20, 0, 0, 0, 0x21] {
                    le16(v, x);
                }
                le32(v, crc.sum());
                le32(v, data.len() as u32);
                le32(v, data.len() as u32);
                le16(v, name.len());
                le16(v, 0);
            };
            le32(&mut out, 0x0403_4b50);
            common(&mut out);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            le32(&mut directory, 0x0201_4b50);
            le16(&mut directory, 20);
            common(&mut directory);
            for x in [0, 0, 0] {
                le16(&mut directory, x);
            }
            le32(&mut directory, 0);
            le32(&mut directory, offset);
            directory.extend_from_slice(name.as_bytes());
        }
        let at = out.len() as u32;
        out.extend_from_slice(&directory);
        le32(&mut out, 0x0605_4b50);
        for x in [0, 0, files.len(), files.len()] {
            le16(&mut out, x);
        }
        le32(&mut out, directory.len() as u32);
        le32(&mut out, at);
        le16(&mut out, 0);
        out
    }

    /// An archive in memory that counts its reads and asks for `request`-byte requests.
    struct Counted {
        bytes: Vec<u8>,
        reads: AtomicUsize,
        request: u64,
    }

    impl Blob for std::sync::Arc<Counted> {
        fn size(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read(&self, offset: u64, len: u64) -> Result<Value> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let (offset, len) = ByteRange::Span { offset, len }.clip(self.size());
            Ok(Value {
                bytes: self.bytes[offset as usize..(offset + len) as usize].to_vec(),
                version: self.version(),
            })
        }
        fn name(&self) -> &str {
            "mem.zip"
        }
        fn version(&self) -> Version {
            Version::Label("1".into())
        }
        fn caps(&self) -> Caps {
            Caps {
                request_bytes: self.request,
                ..Caps::local()
            }
        }
    }

    fn files() -> Vec<(String, Vec<u8>)> {
        let mut files = vec![("zarr.json".to_string(), b"{}".to_vec())];
        for i in 0..10u8 {
            files.push((format!("c/{i}"), vec![i; 100 + i as usize]));
        }
        files
    }

    fn open(request: u64, names: &[(String, Vec<u8>)]) -> (Arc<Counted>, ZipStore) {
        let files: Vec<(&str, Vec<u8>)> =
            names.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
        let blob = Arc::new(Counted {
            bytes: archive(&files),
            reads: AtomicUsize::new(0),
            request,
        });
        let markers = vec!["zarr.json".to_string()];
        let store = ZipStore::open(Box::new(blob.clone()), &markers).unwrap();
        (blob, store)
    }

    #[test]
    fn a_remote_archive_reads_entries_in_runs_a_local_one_entry_by_entry() {
        let files = files();
        for (request, most) in [(8 << 20, 1), (0, usize::MAX)] {
            let (blob, store) = open(request, &files);
            let opened = blob.reads.load(Ordering::Relaxed);
            for (name, data) in &files {
                assert_eq!(&store.read(name, None).unwrap().unwrap().bytes, data);
                let part = ByteRange::Span { offset: 1, len: 5 };
                let got = store.read(name, Some(part)).unwrap().unwrap().bytes;
                assert_eq!(got, data[1..data.len().min(6)]);
            }
            let reads = blob.reads.load(Ordering::Relaxed) - opened;
            if request == 0 {
                assert!(
                    reads >= files.len(),
                    "{reads} reads of {} entries",
                    files.len()
                );
            } else {
                assert!(reads <= most, "{reads} reads of {} entries", files.len());
            }
        }
    }

    #[test]
    fn the_root_folder_is_found_by_the_markers_its_opener_gives() {
        let nested: Vec<(String, Vec<u8>)> = files()
            .into_iter()
            .map(|(n, d)| (format!("top.zarr/{n}"), d))
            .collect();
        let (_, store) = open(0, &nested);
        assert_eq!(store.list_dir("").unwrap().keys, ["zarr.json"]);
        // A folder without a marker at its top is not the root.
        let deeper: Vec<(String, Vec<u8>)> = files()
            .into_iter()
            .map(|(n, d)| (format!("top/a/{n}"), d))
            .collect();
        let (_, store) = open(0, &deeper);
        assert_eq!(store.list_dir("").unwrap().prefixes, ["top"]);
        // With no markers given, the only top-level folder is.
        let files: Vec<(&str, Vec<u8>)> = deeper
            .iter()
            .map(|(n, d)| (n.as_str(), d.clone()))
            .collect();
        let blob = Arc::new(Counted {
            bytes: archive(&files),
            reads: AtomicUsize::new(0),
            request: 0,
        });
        let store = ZipStore::open(Box::new(blob), &[]).unwrap();
        assert_eq!(store.list_dir("").unwrap().prefixes, ["a"]);
    }
}
