//! MetaImage `.mhd` (ITK, 3D Slicer, ParaView, Fiji): the sizes fastest axis first, the
//! element type, the byte order and the raw file as `ElementDataFile`; complex elements
//! are two channels.

use crate::formats::scalar::Scalar;
use crate::formats::{file_shape, non_empty, Absent, Built, Context, Format};
use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;

pub struct Mhd;

impl Format for Mhd {
    fn name(&self) -> &'static str {
        "mhd"
    }

    fn suffix(&self) -> &'static str {
        ".mhd"
    }

    fn needs_raw(&self) -> bool {
        true
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        ctx.detached(header)
    }
}

/// The most dimensions MetaIO reads.
const MAX_DIMS: usize = 10;

fn element_type(scalar: Scalar) -> Option<(&'static str, u8)> {
    Some(match scalar {
        Scalar::Bool | Scalar::UInt(1) => ("MET_UCHAR", 1),
        Scalar::Int(1) => ("MET_CHAR", 1),
        Scalar::Int(2) => ("MET_SHORT", 1),
        Scalar::UInt(2) => ("MET_USHORT", 1),
        Scalar::Int(4) => ("MET_INT", 1),
        Scalar::UInt(4) => ("MET_UINT", 1),
        Scalar::Int(8) => ("MET_LONG_LONG", 1),
        Scalar::UInt(8) => ("MET_ULONG_LONG", 1),
        Scalar::Float(4) => ("MET_FLOAT", 1),
        Scalar::Float(8) => ("MET_DOUBLE", 1),
        Scalar::Complex(8) => ("MET_FLOAT", 2),
        Scalar::Complex(16) => ("MET_DOUBLE", 2),
        _ => return None,
    })
}

pub fn header(meta: &ArrayMetadata, layout: Layout, data_file: &str) -> Result<Vec<u8>, Absent> {
    let scalar = Scalar::of(&meta.dtype)?;
    let (kind, channels) = element_type(scalar).ok_or_else(|| scalar.unsupported("MetaImage"))?;
    if meta.shape.len() > MAX_DIMS {
        return Err(format!(
            "rank {} (MetaImage reads at most {MAX_DIMS})",
            meta.shape.len()
        ));
    }
    non_empty(meta)?;
    if data_file.contains('\n') {
        return Err("a file name with a newline".into());
    }
    let mut sizes = file_shape(meta, layout);
    sizes.reverse();
    // MetaImage has no 0-d or 1-d images: a line of one row.
    sizes.resize(sizes.len().max(2), 1);
    let dims: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let msb = if layout.big_endian { "True" } else { "False" };
    let mut text = format!(
        "ObjectType = Image\n\
         NDims = {}\n\
         BinaryData = True\n\
         BinaryDataByteOrderMSB = {msb}\n\
         CompressedData = False\n\
         DimSize = {}\n\
         HeaderSize = 0\n\
         ElementType = {kind}\n\
         ElementByteOrderMSB = {msb}\n",
        sizes.len(),
        dims.join(" "),
    );
    if channels > 1 {
        text.push_str(&format!("ElementNumberOfChannels = {channels}\n"));
    }
    text.push_str(&format!("ElementDataFile = {data_file}\n"));
    Ok(text.into_bytes())
}
