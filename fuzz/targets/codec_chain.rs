//! Fuzz target: the codec chain. The input is a JSON header, 0x1e, then the stored chunk:
//! `{"v2": bool, "dtype": …, "shape": […], "fill_value": …, "codecs": [{name, configuration}…]}`
//! (`dtype` a v3 data type, or a numpy typestring when `v2` is true; codecs in v3 form,
//! v2 compressors as `numcodecs.<id>`). Chunks that metadata validation would refuse are
//! skipped; for the rest, building the chain and decoding the bytes may fail but not
//! panic, and a decoded chunk has exactly the chunk's number of elements.

use serde_json::Value;
use zarrfs::codec::{CodecChain, UnitData, UnitRepr};
use zarrfs::limits::MAX_BUFFER;
use zarrfs::metadata::{dtype, fill, parse_json, CodecSpec};
use zarrfs_fuzz::{CappedAlloc, RECORD};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

fn run(data: &[u8]) {
    let (header, chunk) = match data.iter().position(|b| *b == RECORD) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(doc) = parse_json(header, "header") else {
        return;
    };
    let v2 = doc.get("v2").and_then(Value::as_bool).unwrap_or(false);
    let dtype_json = doc.get("dtype").cloned().unwrap_or(Value::Null);
    let parsed = if v2 {
        dtype::parse_v2(&dtype_json, "header")
    } else {
        dtype::parse_v3(&dtype_json, "header").map(|d| (d, vec![]))
    };
    let Ok((dtype, stored_big)) = parsed else {
        return;
    };
    let Some(shape) = doc
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
    else {
        return;
    };
    let fill_json = doc.get("fill_value").cloned().unwrap_or(Value::Null);
    let Ok(fill) = fill::parse_fill(&fill_json, &dtype, v2, &stored_big, "header") else {
        return;
    };
    let Some(codecs) = doc.get("codecs").and_then(Value::as_array).and_then(|a| {
        a.iter()
            .map(|c| CodecSpec::from_v3(c, "header").ok())
            .collect::<Option<Vec<CodecSpec>>>()
    }) else {
        return;
    };
    let repr = UnitRepr { shape, dtype, fill };
    // What ArrayMetadata::validate lets through: non-zero chunk dimensions, at most 4 GiB.
    let item = repr.dtype.size().unwrap_or(8) as u64;
    if repr.shape.contains(&0)
        || repr
            .num_elements()
            .checked_mul(item)
            .is_none_or(|n| n > MAX_BUFFER as u64)
    {
        return;
    }
    let Ok(chain) = CodecChain::build(&codecs, &repr) else {
        return;
    };
    let _ = chain.max_encoded_len();
    match chain.decode(chunk.to_vec()) {
        Ok(UnitData::Fixed(bytes)) => {
            let expected = repr.fixed_len().ok();
            assert_eq!(Some(bytes.len()), expected, "decoded chunk size");
        }
        Ok(UnitData::Var(elements)) => {
            assert_eq!(
                elements.len() as u64,
                repr.num_elements(),
                "decoded elements"
            );
        }
        Ok(UnitData::Fill(one)) => {
            assert_eq!(Some(one.len()), repr.dtype.size(), "fill element size");
        }
        Err(_) => {}
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| run(data));
}
