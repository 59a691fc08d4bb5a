//! `zarrfs write STORE PATH [--from FILE]`: write a whole array from its flat bytes
//! (stdin or a file) through the same staging and commit a `--writable` mount uses,
//! without a mount: for scripts and CI. The input's size, in whole rows of the slowest
//! axis, sets the array's new shape; chunks that end up all fill value are deleted.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
use crate::hierarchy::Hierarchy;
use crate::read::geometry::Layout;
use crate::write::{commit, Staged};

/// Bytes read from the input at a time.
const BLOCK: usize = 8 << 20;

/// Where `zarrfs write` reads the array's bytes.
pub enum Input {
    /// A stream (stdin): staged first.
    Stream(Box<dyn Read>),
    /// A regular file: read where it is, never changed.
    File(std::fs::File, std::path::PathBuf),
}

/// Write the array at `path` of `h` from `input`, laid out as `layout`, a stream staged
/// in `staging` (a folder made and removed here). A line saying what was written.
pub fn write(
    h: &Hierarchy,
    path: &str,
    layout: Layout,
    input: Input,
    staging: &Path,
) -> Result<String> {
    let path = crate::hierarchy::normalize(path);
    let (meta, _) = h.array_and_store(&path)?;
    let store = h.store();
    crate::write::writable(store.as_ref(), &meta).map_err(|reason| Error::NotWritable {
        key: format!("/{path}"),
        reason,
    })?;
    let writer = store.writer().ok_or(Error::ReadOnly)?;
    let (staged, offset) = match input {
        Input::File(file, at) => {
            let size = file
                .metadata()
                .map_err(|source| Error::Io {
                    key: at.display().to_string(),
                    source,
                })?
                .len();
            (Staged::reading(&path, file, at, size), size)
        }
        Input::Stream(mut input) => stage(&path, &mut input, staging)?,
    };
    let mut change = writer.begin()?;
    let done = commit(&staged, &meta, store.as_ref(), change.as_mut(), layout)?;
    change.finish(&format!("zarrfs write: /{path}: {offset} bytes"))?;
    drop(staged);
    let _ = std::fs::remove_dir(staging);
    let shape = done.shape.unwrap_or_else(|| meta.shape.clone());
    Ok(format!(
        "/{path}: {offset} bytes written, shape {shape:?}: {} chunks put ({} bytes), {} deleted",
        done.chunks_put, done.bytes_put, done.chunks_deleted
    ))
}

/// Stage `input` whole in a new file of folder `staging`: the staging, and its size.
fn stage(path: &str, input: &mut dyn Read, staging: &Path) -> Result<(Staged, u64)> {
    let io = |source| Error::Io {
        key: staging.display().to_string(),
        source,
    };
    std::fs::create_dir_all(staging).map_err(io)?;
    let at = staging.join(format!("write-{}.staged", std::process::id()));
    let staged = Staged::create(path, 0, at)?;
    let mut buf = vec![0u8; BLOCK];
    let mut offset = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(crate::error::output_error(e)),
        };
        staged.write(offset, &buf[..n], true)?;
        offset += n as u64;
    }
    // Everything past the input goes: the input is the whole array.
    staged.set_size(offset)?;
    Ok((staged, offset))
}
