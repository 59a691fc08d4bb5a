//! The array's own flat file: its elements, nothing else.

use crate::formats::{Built, Context, Format, Segment};
use crate::Result;

pub struct Raw;

impl Format for Raw {
    fn name(&self) -> &'static str {
        "raw"
    }

    fn suffix(&self) -> &'static str {
        ""
    }

    fn build(&self, ctx: &Context) -> Result<Built> {
        Ok(ctx.flat_array()?.map(|_| vec![Segment::array(ctx.path())]))
    }
}
