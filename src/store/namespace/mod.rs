//! Namespaces: stores built on sources, whose keys are not the source's own. Zip
//! archives, kerchunk reference sets and the targets their references read, and Icechunk
//! repositories.

#[cfg(feature = "remote")]
pub mod icechunk;
pub mod references;
pub mod targets;
pub mod zip;
