//! The daemon's heaps give freed memory back to the system (`process::memory`): buffers
//! freed together do not stay resident for the process's life. A test binary of its own,
//! so that no other test's allocations move the process's resident memory meanwhile.

use std::time::{Duration, Instant};

use zarrfs::process::memory::{return_free_memory, tune_allocator, KEEP_FREE};

const MIB: u64 = 1 << 20;

/// The process's resident memory now (VmRSS), in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

#[test]
fn memory_freed_in_a_burst_goes_back_to_the_system() {
    tune_allocator();
    return_free_memory();
    // 256 MiB of chunk-sized buffers, written (resident), then freed together; a small
    // buffer made after them stays, so that they do not lie at the top of a heap.
    let buffers: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8 | 1; 4 << 20]).collect();
    let pin = vec![1u8; 4096];
    let full = resident();
    drop(buffers);
    // All but what the heaps may keep goes back (generous deadline; no timing asserted).
    let want = full - 256 * MIB + KEEP_FREE + 16 * MIB;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut now = resident();
    while now > want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        now = resident();
    }
    assert!(
        now <= want,
        "resident {} MiB after freeing 256 MiB of {} MiB (want at most {} MiB)",
        now / MIB,
        full / MIB,
        want / MIB
    );
    drop(pin);
}
