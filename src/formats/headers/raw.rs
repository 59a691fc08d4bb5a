//! The array's own flat file: its elements, nothing else.

use crate::formats::{Built, Context, Segment, ViewFormat};
use crate::Result;

pub struct Raw;

impl ViewFormat for Raw {
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
