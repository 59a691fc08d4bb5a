//! A small demo hierarchy written by zarrfs's own encoders: a v3 group with a zstd array
//! and a sharded array, an implicit group, and a v2 array — enough to try the mount.

use std::path::Path;

use serde_json::{json, Value};

use crate::codec::region::Region;
use crate::codec::{CodecChain, UnitData, UnitRepr};
use crate::metadata::{v2, v3, ArrayMetadata, NodeMetadata};
use crate::{Error, Result};

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Invalid(format!("{}: {e}", path.display()))
}

fn write_file(root: &Path, key: &str, bytes: &[u8]) -> Result<()> {
    let path = root.join(key);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    std::fs::write(&path, bytes).map_err(io(&path))
}

/// Encode every chunk of `data` (C order, little-endian) and write it below `root`.
pub fn write_chunks(root: &Path, meta: &ArrayMetadata, data: &[u8]) -> Result<()> {
    let item = meta
        .dtype
        .size()
        .ok_or_else(|| Error::Invalid("demo arrays are fixed-size".into()))?;
    let repr = UnitRepr {
        shape: meta.chunk_shape.clone(),
        dtype: meta.dtype.clone(),
        fill: meta.fill.clone(),
    };
    let chain = CodecChain::build(&meta.codecs, &repr)?;
    let grid = meta.grid_shape();
    let count: u64 = grid.iter().product();
    for linear in 0..count {
        let mut idx = vec![0u64; grid.len()];
        let mut rest = linear;
        for d in (0..grid.len()).rev() {
            idx[d] = rest % grid[d];
            rest /= grid[d];
        }
        let origin: Vec<u64> = idx
            .iter()
            .zip(&meta.chunk_shape)
            .map(|(i, c)| i * c)
            .collect();
        let extent: Vec<u64> = origin
            .iter()
            .zip(&meta.chunk_shape)
            .zip(&meta.shape)
            .map(|((o, c), s)| (*c).min(s - o))
            .collect();
        let mut chunk = repr.filled()?.into_fixed()?;
        Region {
            src_shape: &meta.shape,
            src_at: &origin,
            dst_shape: &meta.chunk_shape,
            dst_at: &vec![0; origin.len()],
            region: &extent,
            item,
            dst_base: 0,
        }
        .copy(data, &mut chunk);
        let encoded = chain.encode(UnitData::Fixed(chunk))?;
        write_file(root, &meta.chunk_key(&idx), &encoded)?;
    }
    Ok(())
}

pub(crate) fn v3_array(root: &Path, path: &str, doc: Value, data: &[u8]) -> Result<()> {
    let key = format!("{path}/zarr.json");
    let NodeMetadata::Array(meta) = v3::parse_node(&doc, path, &key)? else {
        return Err(Error::Invalid("demo metadata is not an array".into()));
    };
    write_file(
        root,
        &key,
        &serde_json::to_vec_pretty(&doc).unwrap_or_default(),
    )?;
    write_chunks(root, &meta, data)
}

fn group(root: &Path, path: &str, attributes: Value) -> Result<()> {
    let doc = json!({"zarr_format": 3, "node_type": "group", "attributes": attributes});
    let key = if path.is_empty() {
        "zarr.json".to_string()
    } else {
        format!("{path}/zarr.json")
    };
    write_file(
        root,
        &key,
        &serde_json::to_vec_pretty(&doc).unwrap_or_default(),
    )
}

/// Write the demo hierarchy into `dir` (created if needed).
pub fn write(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    group(
        dir,
        "",
        json!({"title": "zarrfs demo", "written_by": "zarrfs demo"}),
    )?;

    // temperature: float32 (24, 90, 180), a smooth field, zstd.
    let (t, ny, nx) = (24usize, 90usize, 180usize);
    let mut temps = Vec::with_capacity(t * ny * nx * 4);
    for k in 0..t {
        for j in 0..ny {
            let lat = (j as f32 / ny as f32 - 0.5) * std::f32::consts::PI;
            for i in 0..nx {
                let lon = i as f32 / nx as f32 * 2.0 * std::f32::consts::PI;
                let v = 14.0 + 16.0 * lat.cos() - 6.0 * (lon + k as f32 * 0.26).sin() * lat.sin();
                temps.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    v3_array(
        dir,
        "temperature",
        json!({
            "zarr_format": 3, "node_type": "array", "shape": [t, ny, nx], "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [6, 45, 90]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": "NaN",
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "zstd", "configuration": {"level": 3, "checksum": false}}],
            "attributes": {"units": "degC", "long_name": "surface temperature"},
            "dimension_names": ["time", "lat", "lon"]
        }),
        &temps,
    )?;

    // surface/elevation: int16 (180, 360), sharded with zstd inner chunks.
    group(dir, "surface", json!({"description": "sharded arrays"}))?;
    let mut elevation = Vec::with_capacity(180 * 360 * 2);
    for j in 0..180i32 {
        for i in 0..360i32 {
            let v = ((j - 90) * (i - 180) / 7 + (i * 13 + j * 7) % 50) as i16;
            elevation.extend_from_slice(&v.to_le_bytes());
        }
    }
    v3_array(
        dir,
        "surface/elevation",
        json!({
            "zarr_format": 3, "node_type": "array", "shape": [180, 360], "data_type": "int16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [90, 180]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [45, 90],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 3, "checksum": false}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end"}}],
            "attributes": {"units": "m"},
            "dimension_names": ["lat", "lon"]
        }),
        &elevation,
    )?;

    // legacy/counts: a v2 uint32 array with zlib, under a folder with no group metadata
    // (an implicit group).
    let counts: Vec<u8> = (0..100u32 * 100)
        .flat_map(|v| (v * 7 % 1000).to_le_bytes())
        .collect();
    let zarray = json!({
        "zarr_format": 2, "shape": [100, 100], "chunks": [32, 32], "dtype": "<u4",
        "compressor": {"id": "zlib", "level": 5}, "fill_value": 0, "order": "C", "filters": null
    });
    let meta = v2::parse_array(&zarray, None, "legacy/counts", "legacy/counts/.zarray")?;
    write_file(
        dir,
        "legacy/counts/.zarray",
        &serde_json::to_vec_pretty(&zarray).unwrap_or_default(),
    )?;
    write_file(
        dir,
        "legacy/counts/.zattrs",
        br#"{"description": "a Zarr v2 array"}"#,
    )?;
    write_chunks(dir, &meta, &counts)
}
