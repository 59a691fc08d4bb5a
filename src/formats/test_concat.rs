//! A format for tests of the registry: beside a group's folder, `NAME.cat` holds a line
//! naming the group's `title` attribute, then the flat views of the group's fixed-size
//! arrays one after the other (by name), then the first of them again as read whole
//! through the context (a small array).

use super::{Built, Context, Format, Placement, Segment};
use crate::hierarchy::NodeKind;
use crate::Result;

/// The most bytes the trailer may hold.
const TRAILER_LIMIT: u64 = 1 << 20;

pub struct Concat;

impl Format for Concat {
    fn name(&self) -> &'static str {
        "concat"
    }

    fn suffix(&self) -> &'static str {
        ".cat"
    }

    fn placement(&self) -> Placement {
        Placement::Group
    }

    fn build(&self, ctx: &Context) -> Result<Built> {
        let group = ctx.path();
        let mut arrays = Vec::new();
        for (name, kind) in ctx.children(group)? {
            let path = if group.is_empty() {
                name
            } else {
                format!("{group}/{name}")
            };
            if kind == NodeKind::Array && !ctx.array(&path)?.dtype.is_var() {
                arrays.push(path);
            }
        }
        if arrays.len() < 2 {
            return Ok(Err("fewer than two arrays".into()));
        }
        let title = ctx.attributes(group)?.get("title").cloned();
        let title = title.as_ref().and_then(|t| t.as_str()).unwrap_or("-");
        let mut segments = vec![Segment::Bytes(format!("CAT {title}\n").into_bytes())];
        segments.extend(arrays.iter().map(|path| Segment::array(path)));
        segments.push(Segment::Bytes(ctx.array_bytes(&arrays[0], TRAILER_LIMIT)?));
        Ok(Ok(segments))
    }
}
