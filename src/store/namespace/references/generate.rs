//! The generated parts of a kerchunk reference set (version 1): Jinja `templates` in
//! target URLs, and `gen` entries, each a cartesian product of keys over its dimensions,
//! rendered with a step budget and a bound on the keys made.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value as Json;

use super::{Ref, ReferenceStore};
use crate::error::{Error, Result};
use crate::store::location::Location;

/// Keys a set's `gen` entries may make at most.
pub(super) const MAX_GENERATED: u64 = 10_000_000;
/// Steps one template rendering may take.
const TEMPLATE_FUEL: u64 = 100_000;

impl ReferenceStore {
    /// The keys of the `gen` entries: each a cartesian product over its dimensions.
    pub(super) fn generate(
        &mut self,
        gen: &[Json],
        renderer: &Renderer,
        base: &Location,
        ids: &mut BTreeMap<Location, Arc<Location>>,
    ) -> Result<()> {
        let label = self.label.clone();
        let mut total: u64 = 0;
        for entry in gen {
            let field = |name: &str| -> Result<String> {
                match entry.get(name) {
                    Some(Json::String(s)) => Ok(s.clone()),
                    Some(Json::Number(n)) => Ok(n.to_string()),
                    _ => Err(Error::metadata(&label, format!("gen: no {name}"))),
                }
            };
            let (key, url, offset, length) = (
                field("key")?,
                field("url")?,
                field("offset")?,
                field("length")?,
            );
            let Some(Json::Object(dims)) = entry.get("dimensions") else {
                return Err(Error::metadata(&label, "gen: no dimensions"));
            };
            let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
            let mut count: u64 = 1;
            for (name, spec) in dims {
                let values = dimension(spec).ok_or_else(|| {
                    Error::metadata(&label, format!("gen: dimension {name}: bad range {spec}"))
                })?;
                count = count.saturating_mul(values.len() as u64);
                if count.saturating_add(total) > MAX_GENERATED {
                    return Err(Error::metadata(
                        &label,
                        format!("gen: more than {MAX_GENERATED} keys"),
                    ));
                }
                axes.push((name.clone(), values));
            }
            total += count;
            let mut index = vec![0usize; axes.len()];
            for _ in 0..count {
                let ctx: BTreeMap<String, i64> = axes
                    .iter()
                    .zip(&index)
                    .map(|((n, v), i)| (n.clone(), v[*i]))
                    .collect();
                let render = |t: &str| {
                    renderer
                        .render_with(t, &ctx)
                        .map_err(|e| Error::metadata(&label, format!("gen: {e}")))
                };
                let number = |t: &str| -> Result<u64> {
                    let text = render(t)?;
                    text.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n <= i64::MAX as u64)
                        .ok_or_else(|| Error::metadata(&label, format!("gen: bad number {text:?}")))
                };
                let k = render(&key)?;
                let (o, l) = (number(&offset)?, number(&length)?);
                if o.checked_add(l).is_none_or(|end| end > i64::MAX as u64) {
                    return Err(Error::metadata(&label, "gen: offset + length past 2^63"));
                }
                let u = render(&url)?;
                let target = self.target(&u, base, ids);
                self.insert(
                    k,
                    Ref::Range {
                        target,
                        offset: o,
                        len: Some(l),
                    },
                );
                // The next index, the last axis fastest.
                for d in (0..index.len()).rev() {
                    index[d] += 1;
                    if index[d] < axes[d].1.len() {
                        break;
                    }
                    index[d] = 0;
                }
            }
        }
        Ok(())
    }
}

/// The values of one `gen` dimension: `{"start", "stop", "step"}` or a list of integers.
pub(super) fn dimension(spec: &Json) -> Option<Vec<i64>> {
    match spec {
        Json::Array(items) => items.iter().map(Json::as_i64).collect(),
        Json::Object(r) => {
            let get = |k: &str, d: i64| r.get(k).map_or(Some(d), Json::as_i64);
            let (start, stop, step) = (get("start", 0)?, get("stop", 0)?, get("step", 1)?);
            if step <= 0 || stop < start {
                return None;
            }
            let n = stop.checked_sub(start)?.checked_add(step - 1)? / step;
            if n as u64 > MAX_GENERATED {
                return None;
            }
            Some((0..n).map(|i| start + i * step).collect())
        }
        _ => None,
    }
}

/// Jinja rendering of URLs (with the set's `templates`) and `gen` fields, bounded in steps.
pub(super) struct Renderer {
    env: minijinja::Environment<'static>,
    /// The set's templates, as the values templates see.
    templates: BTreeMap<String, minijinja::Value>,
}

impl Renderer {
    pub(super) fn new(templates: BTreeMap<String, String>) -> Renderer {
        let mut env = minijinja::Environment::new();
        env.set_fuel(Some(TEMPLATE_FUEL));
        Renderer {
            env,
            templates: templates
                .into_iter()
                .map(|(k, v)| (k, minijinja::Value::from(v)))
                .collect(),
        }
    }

    /// `text` with the set's templates substituted (only when it holds `{{`).
    pub(super) fn render(&self, text: &str) -> std::result::Result<String, String> {
        self.render_with(text, &BTreeMap::new())
    }

    /// `text` rendered with the templates and the `gen` indices `ctx`.
    fn render_with(
        &self,
        text: &str,
        ctx: &BTreeMap<String, i64>,
    ) -> std::result::Result<String, String> {
        if !text.contains("{{") {
            return Ok(text.to_string());
        }
        let mut all = self.templates.clone();
        all.extend(
            ctx.iter()
                .map(|(k, v)| (k.clone(), minijinja::Value::from(*v))),
        );
        self.env
            .render_str(text, &all)
            .map_err(|e| format!("template {text:?}: {e}"))
    }
}
