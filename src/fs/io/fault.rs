//! Faults the tests inject into a running daemon through the environment variable
//! `ZARRFS_FAULT`, to check that a bug in one request fails only that request. Unset (as
//! for every user), nothing is injected and each check is one comparison.
//!
//! `ZARRFS_FAULT=inline-read-panic-at:OFFSET`: a read at file offset OFFSET answered on the
//! request loop's own thread (its units all decoded) panics. (`kill-after-puts:N` and
//! `wait-before-put:PATH` are faults of the write path, see [`crate::write::fault`].)

/// The faults of this daemon.
#[derive(Debug, Default, Clone, Copy)]
pub struct Faults {
    inline_read_panic_at: Option<u64>,
}

impl Faults {
    /// The faults `ZARRFS_FAULT` names; none when it is unset or not understood.
    pub fn from_env() -> Faults {
        let Ok(spec) = std::env::var("ZARRFS_FAULT") else {
            return Faults::default();
        };
        let offset = spec
            .strip_prefix("inline-read-panic-at:")
            .and_then(|n| n.parse().ok());
        let of_writes = [
            crate::write::fault::KILL_AFTER_PUTS,
            crate::write::fault::WAIT_BEFORE_PUT,
        ];
        if offset.is_none() && !of_writes.iter().any(|f| spec.starts_with(f)) {
            log::warn!("ZARRFS_FAULT={spec:?}: not a fault this daemon knows; none injected");
        }
        Faults {
            inline_read_panic_at: offset,
        }
    }

    /// Before an inline read at `offset`: panic when that fault is injected.
    pub fn inline_read(&self, offset: u64) {
        if self.inline_read_panic_at == Some(offset) {
            panic!("injected fault: inline read at offset {offset}");
        }
    }
}
