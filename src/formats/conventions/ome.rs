//! OME-NGFF multiscale images as a group's attributes describe them (0.4: in the
//! attributes; 0.5: under `ome`): the first multiscale, its axes as OME's dimensions, its
//! datasets (the levels, full resolution first), each level's scale, and the channels'
//! names and colours from `omero`.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::formats::Context;
use crate::hierarchy::{join, normalize};
use crate::metadata::ArrayMetadata;

/// A channel's name and colour (RGBA as OME's signed 32-bit integer).
pub type Channel = (Option<String>, Option<i32>);

/// The first multiscale of a group's attributes and its `omero` block.
pub fn multiscale(attrs: &Map<String, Value>) -> Option<(&Map<String, Value>, Option<&Value>)> {
    let root = attrs
        .get("ome")
        .and_then(Value::as_object)
        .filter(|ome| ome.contains_key("multiscales"))
        .unwrap_or(attrs);
    let first = root.get("multiscales")?.as_array()?.first()?.as_object()?;
    Some((first, root.get("omero")))
}

/// The OME dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    T,
    C,
    Z,
    Y,
    X,
}

impl Dim {
    pub fn letter(self) -> char {
        match self {
            Dim::T => 'T',
            Dim::C => 'C',
            Dim::Z => 'Z',
            Dim::Y => 'Y',
            Dim::X => 'X',
        }
    }
}

/// An axis of the multiscale.
#[derive(Debug)]
pub struct Axis {
    pub dim: Dim,
    pub unit: Option<String>,
}

/// The axes of a multiscale of rank `rank`: the last two are y and x, those before
/// them time, channel or a third space axis (z), each at most once.
pub fn axes(multiscale: &Map<String, Value>, rank: usize) -> Result<Vec<Axis>, String> {
    let listed: Vec<(String, Option<String>, Option<String>)> = match multiscale.get("axes") {
        // OME-NGFF 0.1 and 0.2 have no axes: five, t c z y x.
        None if rank <= 5 => ["t", "c", "z", "y", "x"][5 - rank..]
            .iter()
            .map(|n| (n.to_string(), None, None))
            .collect(),
        None => return Err(format!("rank {rank} with no axes")),
        Some(Value::Array(list)) => list
            .iter()
            .map(|a| match a {
                Value::String(name) => Ok((name.clone(), None, None)),
                Value::Object(o) => {
                    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
                    Ok((text("name").unwrap_or_default(), text("type"), text("unit")))
                }
                _ => Err("an axis that is neither a name nor an object".to_string()),
            })
            .collect::<std::result::Result<_, _>>()?,
        Some(_) => return Err("axes is not a list".into()),
    };
    if listed.len() != rank {
        return Err(format!("{} axes for rank {rank}", listed.len()));
    }
    if rank < 2 {
        return Err(format!("rank {rank} (an image needs 2 or more)"));
    }
    let mut seen = Vec::new();
    let mut axes = Vec::with_capacity(rank);
    for (i, (name, kind, unit)) in listed.into_iter().enumerate() {
        let dim = match (kind.as_deref(), name.as_str()) {
            (Some("space") | None, _) if i == rank - 1 => Dim::X,
            (Some("space") | None, _) if i == rank - 2 => Dim::Y,
            (Some("space"), _) | (None, "z") => Dim::Z,
            (Some("time"), _) | (None, "t") => Dim::T,
            (Some("channel"), _) | (None, "c") => Dim::C,
            (kind, name) => {
                return Err(format!(
                    "axis {name:?} (type {}) has no OME dimension",
                    kind.unwrap_or("none")
                ))
            }
        };
        if seen.contains(&dim) {
            return Err(format!("two axes are OME's {}", dim.letter()));
        }
        seen.push(dim);
        axes.push(Axis { dim, unit });
    }
    Ok(axes)
}

/// The datasets (levels) of a multiscale, at least one.
pub fn datasets(multiscale: &Map<String, Value>) -> Result<&Vec<Value>, String> {
    multiscale
        .get("datasets")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| "no datasets".to_string())
}

/// The node path and metadata of dataset `i` of the multiscale of the group of `ctx`:
/// its path must stay inside the group.
pub fn dataset(
    ctx: &Context,
    i: usize,
    dataset: &Value,
) -> Result<(String, Arc<ArrayMetadata>), String> {
    let path = dataset
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.split('/').any(|part| part == ".."))
        .ok_or_else(|| format!("dataset {i} has no path inside the group"))?;
    let path = normalize(&join(ctx.path(), path));
    let meta = ctx
        .array(&path)
        .map_err(|e| format!("level {i} ({path}): {e}"))?;
    Ok((path, meta))
}

/// The scale of each of the `rank` axes of `dataset`: its `scale` transforms times the
/// multiscale's own (1 where none is given).
pub fn scale(dataset: &Value, multiscale: &Map<String, Value>, rank: usize) -> Vec<f64> {
    let mut scale = vec![1.0; rank];
    for transforms in [
        dataset.get("coordinateTransformations"),
        multiscale.get("coordinateTransformations"),
    ] {
        for t in transforms.and_then(Value::as_array).into_iter().flatten() {
            if t.get("type").and_then(Value::as_str) != Some("scale") {
                continue;
            }
            let values: Vec<f64> = t
                .get("scale")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            if values.len() == rank {
                scale.iter_mut().zip(values).for_each(|(s, v)| *s *= v);
            }
        }
    }
    scale
}

/// The names and colours of the channels of an `omero` block.
pub fn channels(omero: Option<&Value>) -> Vec<Channel> {
    omero
        .and_then(|o| o.get("channels"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| {
                    let name = c.get("label").and_then(Value::as_str).map(str::to_string);
                    let color = c
                        .get("color")
                        .and_then(Value::as_str)
                        .filter(|h| h.len() == 6)
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .map(|rgb| ((rgb << 8) | 0xFF) as i32);
                    (name, color)
                })
                .collect()
        })
        .unwrap_or_default()
}
