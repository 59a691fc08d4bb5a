//! Test fixtures made by hand in a folder: small v2 groups and arrays for the unit tests of
//! every layer above the store.

/// Write a v2 array of `dtype` and `shape` in one uncompressed chunk holding `data`.
pub(crate) fn write_v2_array(dir: &std::path::Path, dtype: &str, shape: usize, data: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    let zarray = format!(
        r#"{{"zarr_format": 2, "shape": [{shape}], "chunks": [{shape}], "dtype": "{dtype}",
            "compressor": null, "filters": null, "fill_value": 0, "order": "C"}}"#
    );
    std::fs::write(dir.join(".zarray"), zarray).unwrap();
    std::fs::write(dir.join("0"), data).unwrap();
}

/// A fresh folder `zarrfs-TAG-PID` in the temp dir holding a v2 group whose array `a`
/// is three bytes, 1 2 3.
pub(crate) fn v2_group_with_array_a(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zarrfs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    write_v2_array(&dir.join("a"), "|u1", 3, &[1, 2, 3]);
    dir
}
