//! Shared helpers for the end-to-end tests: the fixture manifest written by
//! `scripts/make_fixtures.py` and sha256 of byte streams.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fixture folder: `$ZARRFS_FIXTURES` or `target/fixtures`. Missing fixtures are an
/// error: run `scripts/test.sh`, which writes them.
pub fn fixtures_dir() -> PathBuf {
    let dir = std::env::var_os("ZARRFS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fixtures"));
    assert!(
        dir.join("manifest.json").is_file(),
        "no fixtures at {}: run scripts/test.sh (it writes them with zarr-python)",
        dir.display()
    );
    dir
}

pub struct Manifest {
    pub dir: PathBuf,
    pub doc: Value,
}

impl Manifest {
    pub fn load() -> Manifest {
        let dir = fixtures_dir();
        let text = std::fs::read_to_string(dir.join("manifest.json")).expect("read manifest");
        Manifest {
            doc: serde_json::from_str(&text).expect("parse manifest"),
            dir,
        }
    }

    pub fn arrays(&self) -> &[Value] {
        self.doc["arrays"].as_array().expect("arrays")
    }

    pub fn groups(&self) -> &[Value] {
        self.doc["groups"].as_array().expect("groups")
    }

    /// The folder of store `name`.
    pub fn store_dir(&self, name: &str) -> PathBuf {
        let stores = self.doc["stores"].as_array().expect("stores");
        let store = stores
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("store {name} not in manifest"));
        self.dir.join(store["dir"].as_str().expect("dir"))
    }
}

/// A `Write` that hashes what it is given.
#[derive(Default)]
pub struct HashWriter {
    pub hasher: Sha256,
    pub len: u64,
}

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl HashWriter {
    pub fn hex(self) -> String {
        hex(&self.hasher.finalize())
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The four (label, order, big-endian) combinations a fixed-size array is checked in.
pub const LAYOUTS: [(&str, bool, bool); 4] = [
    ("C_little", false, false),
    ("F_little", true, false),
    ("C_big", false, true),
    ("F_big", true, true),
];
