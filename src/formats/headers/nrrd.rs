//! Detached NRRD `.nhdr` (Teem, 3D Slicer, ITK, pynrrd): type, sizes fastest axis first,
//! raw encoding, byte order and the raw file as `data file`; complex elements are a
//! fastest axis of two (kind `complex`).

use crate::formats::scalar::Scalar;
use crate::formats::{file_shape, non_empty, Absent, Built, Context, Format};
use crate::metadata::ArrayMetadata;
use crate::read::view::Layout;

pub struct Nrrd;

impl Format for Nrrd {
    fn name(&self) -> &'static str {
        "nrrd"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["nhdr"]
    }

    fn suffix(&self) -> &'static str {
        ".nhdr"
    }

    fn needs_raw(&self) -> bool {
        true
    }

    fn build(&self, ctx: &Context) -> crate::Result<Built> {
        ctx.detached(header)
    }
}

/// NRRD's most dimensions (`NRRD_DIM_MAX`).
const MAX_DIMS: usize = 16;

fn type_name(scalar: Scalar) -> Option<&'static str> {
    Some(match scalar {
        Scalar::Bool | Scalar::UInt(1) => "uchar",
        Scalar::Int(1) => "signed char",
        Scalar::Int(2) => "short",
        Scalar::UInt(2) => "ushort",
        Scalar::Int(4) => "int",
        Scalar::UInt(4) => "uint",
        Scalar::Int(8) => "longlong",
        Scalar::UInt(8) => "ulonglong",
        Scalar::Float(4) | Scalar::Complex(8) => "float",
        Scalar::Float(8) | Scalar::Complex(16) => "double",
        _ => return None,
    })
}

pub fn header(meta: &ArrayMetadata, layout: Layout, data_file: &str) -> Result<Vec<u8>, Absent> {
    let scalar = Scalar::of(&meta.dtype)?;
    let kind = type_name(scalar).ok_or_else(|| scalar.unsupported("NRRD"))?;
    non_empty(meta)?;
    if data_file.contains('\n') {
        return Err("a file name with a newline".into());
    }
    let mut sizes = file_shape(meta, layout);
    sizes.reverse();
    if sizes.is_empty() {
        sizes.push(1);
    }
    let complex = matches!(scalar, Scalar::Complex(_));
    if complex {
        sizes.insert(0, 2);
    }
    if sizes.len() > MAX_DIMS {
        return Err(format!(
            "{} axes (NRRD has at most {MAX_DIMS})",
            sizes.len()
        ));
    }
    let dims: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let mut text = format!(
        "NRRD0004\n\
         # zarrfs view of {}\n\
         type: {kind}\n\
         dimension: {}\n\
         sizes: {}\n",
        meta.meta_key.replace('\n', " "),
        sizes.len(),
        dims.join(" "),
    );
    if complex {
        let mut kinds = vec!["complex"];
        kinds.resize(sizes.len(), "domain");
        text.push_str(&format!("kinds: {}\n", kinds.join(" ")));
    }
    text.push_str("encoding: raw\n");
    if scalar.size() > 1 {
        let endian = if layout.big_endian { "big" } else { "little" };
        text.push_str(&format!("endian: {endian}\n"));
    }
    text.push_str(&format!("data file: {data_file}\n"));
    Ok(text.into_bytes())
}
