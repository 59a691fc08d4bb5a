//! The FUSE front: the mount (`mount.rs`: startup checks, the session, umount), going to
//! the background and stopping on signals (`background.rs`), what is mounted where
//! (`mountinfo.rs`), and the fuser adapter (`fuse.rs`), which calls the serving
//! core of [`crate::fs::io`] and only translates requests and replies; the kernel's
//! caches dropped on a refresh (`invalidate.rs`) and local folders watched for changes
//! (`watch.rs`).

pub mod background;
pub mod descriptor;
pub mod fuse;
pub mod invalidate;
pub mod mount;
pub mod mount_failure;
pub mod mountinfo;
pub mod watch;
