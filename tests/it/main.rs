//! The end-to-end suites in one test binary (one link of the library for them all): one
//! module per suite, `common` their shared helpers. `memory` and `fuzz_regressions`
//! stay binaries of their own: they measure the whole process (its resident memory, its
//! allocator), which other suites running beside them would move.

mod common;

mod cli;
mod container;
mod deploy;
mod descriptor;
mod docs;
mod geo;
mod hostile;
mod icechunk;
mod inodes;
mod layers;
mod library;
mod logging;
mod mount;
mod mount_helper;
mod non_root;
mod ome;
mod python_api;
mod references;
mod refresh;
mod remote;
mod serve;
mod store_suite;
mod stress;
mod tool;
mod view_props;
mod views;
mod wheel;
mod write;
