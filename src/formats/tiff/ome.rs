//! OME-TIFF pyramids of OME-Zarr images. Beside every group with OME-NGFF `multiscales`
//! (0.4: in the group's attributes; 0.5: under `ome`), `NAME.ome.tif` shows the image as
//! a tiled pyramidal OME-TIFF (see `pyramid`): the multiscale's datasets, full
//! resolution first, as SubIFD levels, tiles the size of each level's chunks (rounded
//! up to TIFF's multiple of 16, at most 1024), and an OME-XML description with the
//! sizes, the dimension order, the physical sizes and units of the first level's scale
//! and the channels' names and colours from `omero`. The planes are the first level's
//! leading indices (t, c, z) in C order; a level whose leading sizes differ from the
//! first's ends the pyramid there (logged). The multiscale is read by
//! `conventions/ome.rs`; this file writes the TIFF and its OME-XML.

use serde_json::{Map, Value};

use super::pyramid::{self, Level, Pyramid};
use crate::formats::conventions::ome::{self, Axis, Dim};
use crate::formats::scalar::Scalar;
use crate::formats::{log_once, non_empty, xml_escape, Built, Context, Format, Placement};
use crate::read::view::Order;
use crate::Result;

pub struct OmeTiff;

impl Format for OmeTiff {
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
        let Some((multiscale, omero)) = ome::multiscale(&attrs) else {
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
                extra: &[],
            })
        });
        if let Err(why) = &built {
            log_once(format!("/{}: no OME-TIFF: {why}", ctx.path()));
        }
        Ok(built)
    }
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
    channels: Vec<ome::Channel>,
}

fn image(
    ctx: &Context,
    multiscale: &Map<String, Value>,
    omero: Option<&Value>,
) -> std::result::Result<Image, String> {
    let datasets = ome::datasets(multiscale)?;
    let (path, base) = ome::dataset(ctx, 0, &datasets[0])?;
    let rank = base.shape.len();
    if rank < 2 {
        return Err(format!(
            "level 0 ({path}) has rank {rank} (an image needs 2 or more)"
        ));
    }
    let scalar = Scalar::of(&base.dtype)?;
    ome_type(scalar)?;
    non_empty(&base)?;
    let scale = ome::scale(&datasets[0], multiscale, rank);
    let mut levels = vec![pyramid::level_of(&path, &base)];
    for (i, dataset) in datasets.iter().enumerate().skip(1) {
        let (path, meta) = ome::dataset(ctx, i, dataset)?;
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
        levels.push(pyramid::level_of(&path, &meta));
    }
    let axes = ome::axes(multiscale, rank)?;
    let planes = base.shape[..rank - 2]
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or("too many planes")?;
    let channels = ome::channels(omero);
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
