//! An object's version, asked for once (a HEAD) and remembered: one question per key at
//! a time, whose answer the threads that asked meanwhile share.

use std::sync::Arc;
use std::time::Instant;

use super::{Cache, MAX_KNOWN};
use crate::error::Result;
use crate::store::Head;

/// A question for an object's version under way ([`Cache::head`]), and its answer
/// (`None`: it failed).
pub(super) struct Asking {
    asked: Instant,
    answer: std::sync::OnceLock<Option<Option<Head>>>,
}

/// Ends a question when dropped (answered, failed, or unwound): threads waiting for it
/// are woken, and the next to ask asks anew.
struct Answered<'a> {
    cache: &'a Cache,
    key: &'a str,
    asking: &'a Arc<Asking>,
}

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        let _ = self.asking.answer.set(None);
        let mut out = self.cache.asking.lock();
        if out
            .get(self.key)
            .is_some_and(|a| Arc::ptr_eq(a, self.asking))
        {
            out.remove(self.key);
        }
    }
}

impl Cache {
    /// The object's size and version as this process last asked of it: once for the
    /// process's life, or once per refresh interval, and not before `since` when given.
    pub(super) fn head(&self, key: &str, since: Option<Instant>) -> Result<Option<Head>> {
        if let Some((asked, v)) = self.known.lock().get(key) {
            let fresh = self.revalidate.is_none_or(|d| asked.elapsed() < d)
                && since.is_none_or(|since| *asked >= since);
            if fresh {
                return Ok(v.clone());
            }
        }
        // One question per key at a time: a shard's inner chunks are read by many
        // threads at once, and each would ask.
        let (asking, first) = {
            let mut out = self.asking.lock();
            match out.get(key) {
                Some(a) if since.is_none_or(|since| a.asked >= since) => (a.clone(), false),
                _ => {
                    let a = Arc::new(Asking {
                        asked: Instant::now(),
                        answer: std::sync::OnceLock::new(),
                    });
                    out.insert(key.to_string(), a.clone());
                    (a, true)
                }
            }
        };
        if !first {
            return match asking.answer.wait() {
                Some(v) => Ok(v.clone()),
                // It failed: ask again, to report the error of this read.
                None => self.inner.head(key),
            };
        }
        let _done = Answered {
            cache: self,
            key,
            asking: &asking,
        };
        let got = self.inner.head(key);
        if let Ok(v) = &got {
            let mut known = self.known.lock();
            if known.len() >= MAX_KNOWN {
                known.clear();
            }
            known.insert(key.to_string(), (asking.asked, v.clone()));
            let _ = asking.answer.set(Some(v.clone()));
        }
        got
    }
}
