//! The zarrs baseline of scripts/bench.sh (section z).
//!
//!     zarrs-read STORE ARRAY [--sha256]
//!
//! Opens ARRAY (a path inside the local Zarr store STORE, e.g. `zstd` or `/group/a`) with
//! zarrs' filesystem store, reads the whole array into memory as C-order bytes
//! (`retrieve_array_subset` of the full subset, with zarrs' default codec options and
//! concurrency), and prints one line to stdout:
//!
//!     SECONDS BYTES [SHA256]
//!
//! SECONDS covers opening the array (its metadata) and the read; BYTES is the number of
//! bytes read. With `--sha256`, the SHA-256 of those bytes follows, computed after the
//! clock has stopped. An array zarrs cannot open (a codec or data type it does not know)
//! exits 3, a failed read 1.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use zarrs::array::{Array, ArrayBytes};
use zarrs::filesystem::FilesystemStore;

const USAGE: &str = "usage: zarrs-read STORE ARRAY [--sha256]";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let sha = if let Some(i) = args.iter().position(|a| a == "--sha256") {
        args.remove(i);
        true
    } else {
        false
    };
    let [store, array] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match read(store, array, sha) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(Failed::Open(e)) => {
            eprintln!("zarrs-read: {store} {array}: cannot open: {e}");
            ExitCode::from(3)
        }
        Err(Failed::Read(e)) => {
            eprintln!("zarrs-read: {store} {array}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where a read failed: opening the array, or reading it.
enum Failed {
    Open(Box<dyn std::error::Error>),
    Read(Box<dyn std::error::Error>),
}

fn read(store: &str, array: &str, sha: bool) -> Result<String, Failed> {
    let path = if array.starts_with('/') {
        array.to_string()
    } else {
        format!("/{array}")
    };
    let t0 = Instant::now();
    let store = Arc::new(FilesystemStore::new(store).map_err(|e| Failed::Open(e.into()))?);
    let array = Array::open(store, &path).map_err(|e| Failed::Open(e.into()))?;
    let bytes: ArrayBytes<'static> = array
        .retrieve_array_subset(&array.subset_all())
        .map_err(|e| Failed::Read(e.into()))?;
    let bytes = bytes.into_fixed().map_err(|e| Failed::Open(e.into()))?;
    let seconds = t0.elapsed().as_secs_f64();
    let mut line = format!("{seconds:.6} {}", bytes.len());
    if sha {
        let digest = Sha256::digest(&bytes);
        line.push(' ');
        for b in digest {
            line.push_str(&format!("{b:02x}"));
        }
    }
    Ok(line)
}
