//! A file being made in a group's folder of a writable mount, before it is an array:
//! `NAME.npy` (its bytes staged on disk, in the staging folder) or a sidecar
//! `.NAME.json` (its text in memory, bounded). Once it holds a whole `.npy` (header and
//! data) or a whole JSON object, it makes array `NAME` ([`crate::write::new_array`]).

use std::fs::File;
use std::io::Cursor;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rangemap::RangeSet;
use serde_json::{Map, Value};

use super::new_array::Spec;
use super::staged::{staging_error, MAX_FILE};
use super::Staged;
use crate::error::{Error, Result};
use crate::metadata::dtype::{self, DataType};
use crate::read::geometry::Layout;
use crate::read::view::Order;

/// What a new file makes its array from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewKind {
    Npy,
    Sidecar,
}

impl NewKind {
    /// The kind of file `name` is and the name of the array it makes, when it makes one.
    pub fn of(name: &str) -> Option<(NewKind, &str)> {
        if let Some(array) = name.strip_suffix(".npy") {
            return Some((NewKind::Npy, array));
        }
        let array = name.strip_prefix('.')?.strip_suffix(".json")?;
        Some((NewKind::Sidecar, array))
    }
}

/// The largest `.npy` header read (numpy's own bound is 4 GiB; real ones are short).
const MAX_HEADER: u64 = 1 << 20;

/// A file being made.
pub struct NewFile {
    /// The node path of the array it makes, and its own name.
    array: String,
    name: String,
    kind: NewKind,
    /// A `.npy`'s staging file and where it is (taken when the array is made).
    file: Mutex<Option<File>>,
    at: PathBuf,
    /// A sidecar's text.
    text: Mutex<Vec<u8>>,
    size: Mutex<u64>,
    written: Mutex<RangeSet<u64>>,
    /// The array was made from it.
    made: AtomicBool,
    /// Held by a write or by making the array.
    turn: Mutex<()>,
}

/// What a whole `.npy` header says, and where its data starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyInfo {
    pub dtype: DataType,
    pub big_endian: bool,
    pub fortran: bool,
    pub shape: Vec<u64>,
    pub data_offset: u64,
    pub data_len: u64,
}

impl NewFile {
    /// A new file `name` making the array at `array`; a `.npy` staged in a new file `at`.
    pub fn create(array: &str, name: &str, kind: NewKind, at: PathBuf) -> Result<NewFile> {
        let file = match kind {
            NewKind::Npy => Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&at)
                    .map_err(|e| staging_error(&at, e))?,
            ),
            NewKind::Sidecar => None,
        };
        Ok(NewFile {
            array: array.to_string(),
            name: name.to_string(),
            kind,
            file: Mutex::new(file),
            at,
            text: Mutex::new(Vec::new()),
            size: Mutex::new(0),
            written: Mutex::new(RangeSet::new()),
            made: AtomicBool::new(false),
            turn: Mutex::new(()),
        })
    }

    pub fn array(&self) -> &str {
        &self.array
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> NewKind {
        self.kind
    }

    /// Where a `.npy`'s bytes are staged.
    pub fn file_path(&self) -> &std::path::Path {
        &self.at
    }

    pub fn size(&self) -> u64 {
        *self.size.lock()
    }

    pub fn made(&self) -> bool {
        self.made.load(Ordering::Acquire)
    }

    /// Wait for the file's writes and the making of its array to take turns.
    pub fn turn(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.turn.lock()
    }

    fn limit(&self) -> u64 {
        match self.kind {
            NewKind::Npy => MAX_FILE,
            NewKind::Sidecar => super::attributes::MAX_SIDECAR as u64,
        }
    }

    /// Write `data` at `offset` (the caller holds the turn).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.made() {
            return Err(Error::BadWrite(format!(
                "{}: array /{} was made from it already",
                self.name, self.array
            )));
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| *end <= self.limit())
            .ok_or_else(|| {
                Error::BadWrite(format!("{}: larger than {} bytes", self.name, self.limit()))
            })?;
        if data.is_empty() {
            return Ok(());
        }
        match self.kind {
            NewKind::Npy => {
                let file = self.file.lock();
                let file = file.as_ref().ok_or(Error::ReadOnly)?;
                file.write_all_at(data, offset)
                    .map_err(|e| staging_error(&self.at, e))?;
            }
            NewKind::Sidecar => {
                let mut text = self.text.lock();
                let end = end as usize;
                if text.len() < end {
                    text.resize(end, 0);
                }
                text[end - data.len()..end].copy_from_slice(data);
            }
        }
        self.written.lock().insert(offset..end);
        let mut size = self.size.lock();
        *size = (*size).max(end);
        Ok(())
    }

    /// Make the file `size` bytes (the caller holds the turn).
    pub fn set_size(&self, size: u64) -> Result<()> {
        if size > self.limit() || self.made() {
            return Err(Error::BadWrite(format!("{}: a size of {size}", self.name)));
        }
        match self.kind {
            NewKind::Npy => {
                let file = self.file.lock();
                let file = file.as_ref().ok_or(Error::ReadOnly)?;
                file.set_len(size).map_err(|e| staging_error(&self.at, e))?;
            }
            NewKind::Sidecar => self.text.lock().resize(size as usize, 0),
        }
        if size < self.size() {
            self.written.lock().remove(size..u64::MAX);
        }
        *self.size.lock() = size;
        Ok(())
    }

    /// Read from `offset` into `buf`: the bytes given (none past the end, or once the
    /// array was made from a `.npy`).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let n = usize::try_from(self.size().saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        match self.kind {
            NewKind::Npy => {
                let file = self.file.lock();
                let Some(file) = file.as_ref() else {
                    return Ok(0);
                };
                file.read_exact_at(&mut buf[..n], offset)
                    .map_err(|e| staging_error(&self.at, e))?;
            }
            NewKind::Sidecar => {
                let text = self.text.lock();
                let start = offset as usize;
                buf[..n].copy_from_slice(&text[start..start + n]);
            }
        }
        Ok(n)
    }

    /// A `.npy`'s header, once it is whole (`None` until then).
    pub fn npy_header(&self) -> Result<Option<NpyInfo>> {
        let size = self.size();
        let file = self.file.lock();
        let Some(file) = file.as_ref() else {
            return Ok(None);
        };
        let bad = |why: String| Error::BadWrite(format!("{}: {why}", self.name));
        let mut prefix = [0u8; 12];
        if size < prefix.len() as u64 {
            return Ok(None);
        }
        file.read_exact_at(&mut prefix, 0)
            .map_err(|e| staging_error(&self.at, e))?;
        if &prefix[..6] != b"\x93NUMPY" {
            return Err(bad("not a .npy file".into()));
        }
        let header_end = match prefix[6] {
            1 => 10 + u64::from(u16::from_le_bytes([prefix[8], prefix[9]])),
            2 | 3 => {
                12 + u64::from(u32::from_le_bytes([
                    prefix[8], prefix[9], prefix[10], prefix[11],
                ]))
            }
            v => return Err(bad(format!(".npy version {v}"))),
        };
        if header_end > MAX_HEADER {
            return Err(bad(format!("a header of {header_end} bytes")));
        }
        if size < header_end {
            return Ok(None);
        }
        let mut header = vec![0u8; header_end as usize];
        file.read_exact_at(&mut header, 0)
            .map_err(|e| staging_error(&self.at, e))?;
        let mut cursor = Cursor::new(header.as_slice());
        // The parser multiplies the shape out unchecked (a panic on overflow where
        // arithmetic is checked): that is a bad header too.
        let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            npyz::NpyHeader::from_reader(&mut cursor)
        }))
        .map_err(|_| bad("a header whose shape overflows".into()))?
        .map_err(|e| bad(format!("header: {e}")))?;
        let descr = descr_json(&parsed.dtype()).ok_or_else(|| bad("its data type".into()))?;
        let (dtype, swap) = dtype::parse_v2(&descr, &self.name).map_err(|e| bad(e.to_string()))?;
        let all = dtype.swap_units();
        let big_endian = !swap.is_empty() && swap == all;
        if !swap.is_empty() && !big_endian {
            return Err(bad("fields of both byte orders".into()));
        }
        let item = dtype
            .size()
            .ok_or_else(|| bad("variable-length elements".into()))? as u64;
        let shape = parsed.shape().to_vec();
        let data_len = shape
            .iter()
            .try_fold(item, |acc, n| acc.checked_mul(*n))
            .filter(|n| *n <= MAX_FILE)
            .ok_or_else(|| bad("too large".into()))?;
        Ok(Some(NpyInfo {
            dtype,
            big_endian,
            fortran: parsed.order() == npyz::Order::Fortran,
            shape,
            data_offset: cursor.position(),
            data_len,
        }))
    }

    /// A whole `.npy`'s array (`None` while its data is not all there), the layout of
    /// its data, and its data as the staging of the new array's file. Fails when more
    /// bytes were written than the header says.
    pub fn npy_array(&self) -> Result<Option<(Spec, Layout, NpyInfo)>> {
        let Some(info) = self.npy_header()? else {
            return Ok(None);
        };
        let end = info.data_offset + info.data_len;
        if self.size() < end {
            return Ok(None);
        }
        if self.size() > end {
            return Err(Error::BadWrite(format!(
                "{}: {} bytes, {} more than its header says",
                self.name,
                self.size(),
                self.size() - end
            )));
        }
        let spec = Spec {
            shape: info.shape.clone(),
            dtype: Some(info.dtype.clone()),
            ..Spec::default()
        };
        let layout = Layout {
            order: if info.fortran { Order::F } else { Order::C },
            big_endian: info.big_endian,
        };
        Ok(Some((spec, layout, info)))
    }

    /// The staging of the new array's file: the `.npy`'s data, as written (taken: the
    /// file reads as empty from then on).
    pub fn take_staged(&self, info: &NpyInfo) -> Result<Staged> {
        let file = self.file.lock().take().ok_or(Error::ReadOnly)?;
        let mut written = RangeSet::new();
        let data = info.data_offset..info.data_offset + info.data_len;
        for r in self.written.lock().overlapping(&data) {
            let (a, b) = (r.start.max(data.start), r.end.min(data.end));
            written.insert(a - data.start..b - data.start);
        }
        Ok(Staged::adopt(
            &self.array,
            file,
            self.at.clone(),
            info.data_offset,
            info.data_len,
            written,
        ))
    }

    /// A sidecar's array, once its text is one whole JSON object (`None` until then).
    /// `v2`: the hierarchy is Zarr v2 (`data_type` a numpy type; `compressor`/`filters`).
    pub fn sidecar_array(&self, v2: bool) -> Result<Option<Spec>> {
        let text = self.text.lock().clone();
        let Ok(doc) = serde_json::from_slice::<Value>(&text) else {
            return Ok(None);
        };
        sidecar_spec(&self.name, &doc, v2).map(Some)
    }

    /// The array was made from the file.
    pub fn set_made(&self) {
        self.made.store(true, Ordering::Release);
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if self.file.get_mut().is_some() {
            if self.made() || self.size() == 0 {
                let _ = std::fs::remove_file(&self.at);
                super::Writes::forget_note(&self.at);
            } else {
                log::warn!(
                    "{}: no array /{} was made from it (not a whole .npy); its bytes are kept in {}",
                    self.name,
                    self.array,
                    self.at.display()
                );
            }
        }
    }
}

/// numpy's description (a typestr, or a list of fields) of a `.npy` data type, as JSON.
fn descr_json(d: &npyz::DType) -> Option<Value> {
    match d {
        npyz::DType::Plain(t) => Some(Value::from(t.to_string())),
        npyz::DType::Record(fields) => fields
            .iter()
            .map(|f| {
                let mut shape = Vec::new();
                let mut inner = &f.dtype;
                while let npyz::DType::Array(n, d) = inner {
                    shape.push(Value::from(*n));
                    inner = d;
                }
                let mut field = vec![Value::from(f.name.clone()), descr_json(inner)?];
                if !shape.is_empty() {
                    field.push(Value::Array(shape));
                }
                Some(Value::Array(field))
            })
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        npyz::DType::Array(..) => None,
    }
}

/// The keys a new array's sidecar may hold: what the mount's sidecars show.
const SIDECAR_KEYS: &[&str] = &[
    "zarr_format",
    "shape",
    "data_type",
    "dtype",
    "descr",
    "chunks",
    "inner_chunks",
    "chunk_key_encoding",
    "codecs",
    "compressor",
    "filters",
    "fill_value",
    "attributes",
    "dimension_names",
];

/// The array a new sidecar `doc` asks for (in a hierarchy of Zarr v2 with `v2`).
pub fn sidecar_spec(name: &str, doc: &Value, v2: bool) -> Result<Spec> {
    let bad = |why: String| Error::BadWrite(format!("{name}: {why}"));
    let o = doc
        .as_object()
        .ok_or_else(|| bad("not a JSON object".into()))?;
    if let Some(key) = o.keys().find(|k| !SIDECAR_KEYS.contains(&k.as_str())) {
        return Err(bad(format!("{key:?} is not a key of a sidecar")));
    }
    let format = if v2 { 2 } else { 3 };
    match o.get("zarr_format") {
        None => {}
        Some(f) if f.as_u64() == Some(format) || f.as_str() == Some(&format.to_string()) => {}
        Some(f) => {
            return Err(bad(format!(
                "zarr_format {f} in a Zarr v{format} hierarchy"
            )))
        }
    }
    let counts = |key: &str| -> Result<Option<Vec<u64>>> {
        match o.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
                .map(Some)
                .ok_or_else(|| bad(format!("{key:?} is not a list of counts"))),
        }
    };
    let shape = counts("shape")?.ok_or_else(|| bad("no \"shape\"".into()))?;
    let (dtype, data_type) = match (o.get("data_type"), o.get("dtype")) {
        (Some(d), _) if v2 => (dtype::parse_v2(d, name)?.0, Some(d.clone())),
        (Some(d), _) => (dtype::parse_v3(d, name)?, Some(d.clone())),
        (None, Some(Value::String(t))) => (dtype::parse_typestr(t, name)?.0, None),
        _ => return Err(bad("no \"data_type\"".into())),
    };
    let attributes = match o.get("attributes") {
        None => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => return Err(bad("\"attributes\" is not a JSON object".into())),
    };
    let dimension_names = match o.get("dimension_names") {
        Some(Value::Array(d)) if d.len() == shape.len() => Some(Value::Array(d.clone())),
        Some(Value::Null) | None => None,
        Some(_) => return Err(bad("\"dimension_names\" is not one name per axis".into())),
    };
    Ok(Spec {
        shape,
        dtype: Some(dtype),
        data_type,
        fill_value: o.get("fill_value").cloned(),
        chunks: counts("chunks")?,
        codecs: o.get("codecs").cloned(),
        compressor: o.get("compressor").cloned(),
        filters: o.get("filters").cloned(),
        attributes,
        dimension_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("zarrfs-new-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// A `.npy` as numpy writes it: version 1.0, the header padded to 64 bytes.
    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let mut out = raw_npy(&format!(
            "{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}"
        ));
        out.extend(data);
        out
    }

    #[test]
    fn a_whole_npy_makes_its_array_and_a_partial_one_waits() {
        let bytes = npy(">i2", true, "(2, 3)", &[0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6]);
        let f = NewFile::create("g/a", "a.npy", NewKind::Npy, scratch("a.npy")).unwrap();
        f.write(0, &bytes[..70]).unwrap();
        assert!(
            f.npy_array().unwrap().is_none(),
            "the data is not all there"
        );
        f.write(70, &bytes[70..]).unwrap();
        let (spec, layout, info) = f.npy_array().unwrap().unwrap();
        assert_eq!(spec.shape, vec![2, 3]);
        assert_eq!(spec.dtype, Some(DataType::Int(2)));
        assert_eq!((layout.order, layout.big_endian), (Order::F, true));
        assert_eq!(
            (info.data_offset, info.data_len),
            (bytes.len() as u64 - 12, 12)
        );
        assert_eq!(info.data_offset % 64, 0);
        let staged = f.take_staged(&info).unwrap();
        assert_eq!(staged.ranges(), vec![0..12]);
        let mut buf = [0u8; 4];
        staged.read_at(2, &mut buf).unwrap();
        assert_eq!(buf, [0, 2, 0, 3]);
        let all = 0..12;
        staged.committed(std::slice::from_ref(&all));
        f.set_made();
        drop(staged);
        f.write(0, b"x").unwrap_err();
        let g = NewFile::create("b", "b.npy", NewKind::Npy, scratch("b.npy")).unwrap();
        g.write(0, &npy("<f4", false, "(1,)", &[0, 0, 0, 0, 9]))
            .unwrap();
        assert!(matches!(g.npy_array(), Err(Error::BadWrite(_))));
        let h = NewFile::create("c", "c.npy", NewKind::Npy, scratch("c.npy")).unwrap();
        h.write(0, b"\x93NUMPZ\x01\x00\x00\x00\x00\x00").unwrap();
        assert!(matches!(h.npy_header(), Err(Error::BadWrite(_))));
    }

    /// A `.npy` file of version 1.0 whose header text is `text` (padded as numpy pads).
    fn raw_npy(text: &str) -> Vec<u8> {
        let mut header = text.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        out
    }

    #[test]
    fn hostile_npy_headers_are_refused_without_a_panic() {
        let nested = format!(
            "{{'descr': {}'<f4'{}, 'fortran_order': False, 'shape': (1,), }}",
            "[".repeat(20_000),
            "]".repeat(20_000)
        );
        let cases = [
            raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"),
            raw_npy("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }"),
            raw_npy("{'descr': '<f4', 'fortran_order': 'maybe', 'shape': (3,), }"),
            raw_npy("{'descr': '<f4', 'shape': (3,), }"),
            raw_npy("not a dict at all"),

            raw_npy(&nested),
            b"\x93NUMPY\x09\x00\x10\x00{}".to_vec(),
            b"\x93NUMPY\x02\x00\xff\xff\xff\x7f".to_vec(),
        ];
        for (i, bytes) in cases.iter().enumerate() {
            let f = NewFile::create(
                "h",
                "h.npy",
                NewKind::Npy,
                scratch(&format!("hostile-{i}.npy")),
            )
            .unwrap();
            f.write(0, bytes).unwrap();
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.npy_array()));
            match got {
                Ok(Err(Error::BadWrite(_))) => {}
                Ok(other) => panic!("case {i}: {:?}", other.map(|o| o.map(|(s, _, _)| s.shape))),
                Err(_) => panic!("case {i}: a panic"),
            }
        }
    }

    #[test]
    fn a_sidecar_asks_for_shape_and_type_and_checks_its_keys() {
        let f = NewFile::create("g/t", ".t.json", NewKind::Sidecar, scratch("t.json")).unwrap();
        f.write(0, br#"{"shape": [4, 5], "data_type": "uint16""#)
            .unwrap();
        assert!(f.sidecar_array(false).unwrap().is_none(), "not whole yet");
        f.write(f.size(), br#", "attributes": {"units": "K"}}"#)
            .unwrap();
        let spec = f.sidecar_array(false).unwrap().unwrap();
        assert_eq!(spec.shape, vec![4, 5]);
        assert_eq!(spec.dtype, Some(DataType::UInt(2)));
        assert_eq!(spec.attributes["units"], "K");
        let v2 = sidecar_spec(
            "x",
            &serde_json::json!({"shape": [3], "dtype": ">f8"}),
            true,
        )
        .unwrap();
        assert_eq!(v2.dtype, Some(DataType::Float(8)));
        for bad in [
            serde_json::json!({"shape": [3]}),
            serde_json::json!({"shape": [3], "data_type": "int8", "chunk": [1]}),
            serde_json::json!({"shape": "3", "data_type": "int8"}),
            serde_json::json!({"shape": [3], "data_type": "int8", "zarr_format": 2}),
        ] {
            assert!(sidecar_spec("x", &bad, false).is_err(), "{bad}");
        }
    }
}
