//! OME-TIFF pyramids of OME-Zarr images. Beside every group with OME-NGFF `multiscales`
//! (0.4: in the group's attributes; 0.5: under `ome`), `NAME.ome.tif` shows the image as
//! a tiled pyramidal OME-TIFF (see `pyramid`): the multiscale's datasets, full
//! resolution first, as SubIFD levels, tiles the size of each level's chunks (rounded
//! up to TIFF's multiple of 16, at most 1024), and an OME-XML description with the
//! sizes, the dimension order, the physical sizes and units of the first level's scale
//! and the channels' names and colours from `omero`. The planes are the first level's
//! leading indices (t, c, z) in C order; a level whose leading sizes differ from the
//! first's ends the pyramid there (logged).

use serde_json::{Map, Value};

use super::pyramid::{self, Level, Pyramid};
use super::scalar::Scalar;
use super::{log_once, non_empty, xml_escape, Built, Context, Placement, ViewFormat};
use crate::hierarchy::{join, normalize};
use crate::metadata::ArrayMetadata;
use crate::read::view::Order;
use crate::Result;

pub struct OmeTiff;

impl ViewFormat for OmeTiff {
    fn name(&self) -> &'static str {
        "ome-tiff"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["ome", "ometiff"]
    }

    fn suffix(&self) -> &'static str {
        ".ome.tif"
    }

    fn placement(&self) -> Placement {
        Placement::Group
    }

    fn build(&self, ctx: &Context) -> Result<Built> {
        let attrs = ctx.attributes(ctx.path())?;
        let Some((multiscale, omero)) = multiscale(&attrs) else {
            return Ok(Err("no OME-NGFF multiscales".into()));
        };
        let built = image(ctx, multiscale, omero).and_then(|image| {
            if ctx.layout().order == Order::F {
                return Err("OME-TIFF planes are C order; the mount is F order".into());
            }
            let description = image.xml(ctx.file_name(), ctx.layout().big_endian);
            pyramid::segments(&Pyramid {
                planes: image.planes,
                scalar: image.scalar,
                big_endian: ctx.layout().big_endian,
                description: &description,
                levels: &image.levels,
            })
        });
        if let Err(why) = &built {
            log_once(format!("/{}: no OME-TIFF: {why}", ctx.path()));
        }
        Ok(built)
    }
}

/// The first multiscale of a group's attributes and its `omero` block.
fn multiscale(attrs: &Map<String, Value>) -> Option<(&Map<String, Value>, Option<&Value>)> {
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
enum Dim {
    T,
    C,
    Z,
    Y,
    X,
}

impl Dim {
    fn letter(self) -> char {
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
struct Axis {
    dim: Dim,
    unit: Option<String>,
}

/// The axes of a multiscale of rank `rank`: the last two are y and x, those before
/// them time, channel or a third space axis (z), each at most once.
fn axes(multiscale: &Map<String, Value>, rank: usize) -> std::result::Result<Vec<Axis>, String> {
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

/// What the OME-TIFF of an image shows.
struct Image {
    axes: Vec<Axis>,
    /// The first level's shape.
    shape: Vec<u64>,
    /// The first level's scale per axis (1 where none is given).
    scale: Vec<f64>,
    scalar: Scalar,
    planes: u64,
    levels: Vec<Level>,
    /// Names and colours of the channels.
    channels: Vec<(Option<String>, Option<i32>)>,
}

fn image(
    ctx: &Context,
    multiscale: &Map<String, Value>,
    omero: Option<&Value>,
) -> std::result::Result<Image, String> {
    let datasets = multiscale
        .get("datasets")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
        .ok_or("no datasets")?;
    let level_array = |i: usize, dataset: &Value| {
        let path = dataset
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.split('/').any(|part| part == ".."))
            .ok_or_else(|| format!("dataset {i} has no path inside the group"))?;
        let path = normalize(&join(ctx.path(), path));
        let meta = ctx
            .array(&path)
            .map_err(|e| format!("level {i} ({path}): {e}"))?;
        Ok::<_, String>((path, meta))
    };
    let (path, base) = level_array(0, &datasets[0])?;
    let rank = base.shape.len();
    if rank < 2 {
        return Err(format!(
            "level 0 ({path}) has rank {rank} (an image needs 2 or more)"
        ));
    }
    let scalar = Scalar::of(&base.dtype)?;
    ome_type(scalar)?;
    non_empty(&base)?;
    let scale = scale(&datasets[0], multiscale, rank);
    let mut levels = vec![level(&path, &base)];
    for (i, dataset) in datasets.iter().enumerate().skip(1) {
        let (path, meta) = level_array(i, dataset)?;
        let same = meta.shape.len() == rank
            && meta.dtype == base.dtype
            && meta.shape[..rank - 2] == base.shape[..rank - 2];
        if !same {
            log_once(format!(
                "/{}: OME-TIFF: the pyramid ends before level {i} ({path}): its data type \
                 or leading sizes differ from level 0's",
                ctx.path()
            ));
            break;
        }
        levels.push(level(&path, &meta));
    }
    let axes = axes(multiscale, rank)?;
    let planes = base.shape[..rank - 2]
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or("too many planes")?;
    let channels = omero
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
        .unwrap_or_default();
    Ok(Image {
        axes,
        shape: base.shape.clone(),
        scale,
        scalar,
        planes,
        levels,
        channels,
    })
}

/// The scale of each of the `rank` axes of `dataset`: its `scale` transforms times the
/// multiscale's own (1 where none is given).
fn scale(dataset: &Value, multiscale: &Map<String, Value>, rank: usize) -> Vec<f64> {
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

/// A level's planes and its tiles, the size of its (inner) chunks' last two sides.
fn level(path: &str, meta: &ArrayMetadata) -> Level {
    let rank = meta.shape.len();
    let inner = meta
        .codecs
        .first()
        .filter(|c| c.name == "sharding_indexed")
        .and_then(|c| c.config.get("chunk_shape"))
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_u64).collect::<Vec<u64>>())
        .filter(|v| v.len() == rank);
    let chunk = inner.as_deref().unwrap_or(&meta.chunk_shape);
    let side = |axis: usize| {
        let c = chunk.get(axis).copied().unwrap_or(256);
        c.min(meta.shape[axis]).clamp(16, 1024).next_multiple_of(16)
    };
    Level {
        path: path.to_string(),
        rows: meta.shape[rank - 2],
        cols: meta.shape[rank - 1],
        tile: (side(rank - 2), side(rank - 1)),
    }
}

/// OME's pixel type of an element.
fn ome_type(scalar: Scalar) -> std::result::Result<&'static str, String> {
    Ok(match scalar {
        Scalar::Bool | Scalar::UInt(1) => "uint8",
        Scalar::UInt(2) => "uint16",
        Scalar::UInt(4) => "uint32",
        Scalar::Int(1) => "int8",
        Scalar::Int(2) => "int16",
        Scalar::Int(4) => "int32",
        Scalar::Float(4) => "float",
        Scalar::Float(8) => "double",
        Scalar::Complex(8) => "complex",
        Scalar::Complex(16) => "double-complex",
        other => return Err(other.unsupported("OME")),
    })
}

/// OME's symbol of an OME-NGFF (UDUNITS-2) length or time unit.
fn unit_symbol(unit: &str) -> Option<&'static str> {
    Some(match unit {
        "angstrom" => "Å",
        "attometer" => "am",
        "centimeter" => "cm",
        "decimeter" => "dm",
        "femtometer" => "fm",
        "foot" => "ft",
        "inch" => "in",
        "kilometer" => "km",
        "meter" => "m",
        "micrometer" => "µm",
        "mile" => "mi",
        "millimeter" => "mm",
        "nanometer" => "nm",
        "parsec" => "pc",
        "picometer" => "pm",
        "yard" => "yd",
        "attosecond" => "as",
        "centisecond" => "cs",
        "day" => "d",
        "decisecond" => "ds",
        "femtosecond" => "fs",
        "hour" => "h",
        "microsecond" => "µs",
        "millisecond" => "ms",
        "minute" => "min",
        "nanosecond" => "ns",
        "picosecond" => "ps",
        "second" => "s",
        _ => return None,
    })
}

impl Image {
    /// The size of OME dimension `dim` (1 when the image has no such axis).
    fn size(&self, dim: Dim) -> u64 {
        self.axes
            .iter()
            .position(|a| a.dim == dim)
            .map_or(1, |i| self.shape[i])
    }

    /// OME's DimensionOrder: X and Y, then the leading axes fastest first (C order
    /// makes the last leading axis the fastest), then the dimensions the image lacks.
    fn dimension_order(&self) -> String {
        let mut order: Vec<Dim> = vec![Dim::X, Dim::Y];
        let leading = self.axes.iter().rev().map(|a| a.dim);
        for d in leading.chain([Dim::Z, Dim::C, Dim::T]) {
            if !order.contains(&d) {
                order.push(d);
            }
        }
        order.into_iter().map(Dim::letter).collect()
    }

    /// The OME-XML document of the image named `name`.
    fn xml(&self, name: &str, big_endian: bool) -> String {
        let ome_type = ome_type(self.scalar).unwrap_or("uint8");
        let mut pixels = format!(
            "<Pixels ID=\"Pixels:0\" DimensionOrder=\"{}\" Type=\"{ome_type}\" SizeX=\"{}\" \
             SizeY=\"{}\" SizeZ=\"{}\" SizeC=\"{}\" SizeT=\"{}\" BigEndian=\"{big_endian}\" \
             Interleaved=\"false\" SignificantBits=\"{}\"",
            self.dimension_order(),
            self.size(Dim::X),
            self.size(Dim::Y),
            self.size(Dim::Z),
            self.size(Dim::C),
            self.size(Dim::T),
            self.scalar.size() * 8,
        );
        for (axis, &scale) in self.axes.iter().zip(&self.scale) {
            let attribute = match axis.dim {
                Dim::X => "PhysicalSizeX",
                Dim::Y => "PhysicalSizeY",
                Dim::Z => "PhysicalSizeZ",
                Dim::T => "TimeIncrement",
                Dim::C => continue,
            };
            let unit = match axis.unit.as_deref().map(unit_symbol) {
                Some(None) => continue,
                Some(Some(symbol)) => format!(" {attribute}Unit=\"{symbol}\""),
                None => String::new(),
            };
            if scale > 0.0 && scale.is_finite() {
                pixels.push_str(&format!(" {attribute}=\"{scale:?}\"{unit}"));
            }
        }
        pixels.push('>');
        for c in 0..self.size(Dim::C) {
            let (label, color) = self.channels.get(c as usize).cloned().unwrap_or_default();
            pixels.push_str(&format!(
                "<Channel ID=\"Channel:0:{c}\" SamplesPerPixel=\"1\""
            ));
            if let Some(label) = label {
                pixels.push_str(&format!(" Name=\"{}\"", xml_escape(&label)));
            }
            if let Some(color) = color {
                pixels.push_str(&format!(" Color=\"{color}\""));
            }
            pixels.push_str("/>");
        }
        pixels.push_str(&format!(
            "<TiffData IFD=\"0\" PlaneCount=\"{}\"/></Pixels>",
            self.planes
        ));
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <OME xmlns=\"http://www.openmicroscopy.org/Schemas/OME/2016-06\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
             xsi:schemaLocation=\"http://www.openmicroscopy.org/Schemas/OME/2016-06 \
             http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd\" \
             Creator=\"zarrfs {}\"><Image ID=\"Image:0\" Name=\"{}\">{pixels}</Image></OME>",
            env!("CARGO_PKG_VERSION"),
            xml_escape(name),
        )
    }
}
