//! Mounting: startup checks, backgrounding, signals, umount and logs; the fuser adapter
//! (`fuse.rs`); how each open is served (`io_mode.rs`) and the materialized copies that
//! passthrough opens read (`materialize/`).

pub mod background;
pub mod fault;
pub mod fuse;
pub mod io_mode;
pub mod logging;
pub mod materialize;
pub mod memory;
pub mod mount;
pub mod mount_failure;
pub mod mountinfo;
pub mod watch;
