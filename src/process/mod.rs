//! What every zarrfs process sets up, whichever front it runs: where its log goes
//! ([`logging`]) and how its heap holds chunk buffers and gives free memory back
//! ([`memory`]).

pub mod logging;
pub mod memory;
