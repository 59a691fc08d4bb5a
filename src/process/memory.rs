//! Process-wide memory settings for programs that stream chunks (the daemon, `cat`), and
//! the daemon's return of free heap memory to the system.

/// Decoded chunks are large and short-lived. Serve them from a few heaps that keep their
/// pages (a fixed mmap threshold above chunk sizes, no trimming), so that buffers are
/// reused without page faults, and the fixed arena count bounds what freed memory can
/// linger beside the cache.
pub fn tune_allocator() {
    // SAFETY: mallopt only tunes the allocator; called before worker threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// Free heap bytes that stay resident at most before the heaps give their free pages
/// back to the system (see [`return_free_memory`]).
pub const KEEP_FREE: u64 = 32 << 20;

/// How often [`return_free_memory`] looks at the heaps.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Give free heap memory back to the system, on a thread of its own for the process's
/// life, whenever more than [`KEEP_FREE`] bytes of it are resident: what is resident
/// beyond what is allocated, less the least seen so far (the program's own pages, and
/// allocations not written yet). Buffers freed and allocated again at once (a stream of
/// chunks, see [`tune_allocator`]) keep their pages; buffers freed together (decodes and
/// fetched runs in flight when many readers end, the chunks of a file read through) no
/// longer stay resident beside a full cache for the process's life.
pub fn return_free_memory() {
    let spawned = std::thread::Builder::new().name("memory".into()).spawn(|| {
        let mut least = i64::MAX;
        loop {
            std::thread::sleep(LOOK_EVERY);
            let Some(resident) = resident() else {
                continue;
            };
            // SAFETY: mallinfo2 only reads the allocator's statistics.
            let info = unsafe { libc::mallinfo2() };
            let allocated = info.uordblks.saturating_add(info.hblkhd) as u64;
            let apart = i64::try_from(resident).unwrap_or(i64::MAX)
                - i64::try_from(allocated).unwrap_or(i64::MAX);
            least = least.min(apart);
            if apart.saturating_sub(least) > KEEP_FREE as i64 {
                // SAFETY: malloc_trim only gives free pages of the heaps back.
                unsafe { libc::malloc_trim(0) };
            }
        }
    });
    if let Err(e) = spawned {
        log::warn!("free memory stays with the daemon: no thread to give it back ({e})");
    }
}

/// The process's resident memory in bytes (`/proc/self/statm`).
fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads system configuration.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(page.max(0) as u64))
}

/// The machine's physical memory in bytes (0 when the system does not say).
pub fn physical() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

/// The decoded-chunk cache of a mount by default: an eighth of `memory`, at least
/// 256 MiB and at most 4 GiB. Room for the slabs of units that several large F-order
/// readers hold at once, and for random re-reads of an array of a few GiB.
pub fn default_cache(memory: u64) -> usize {
    let bytes = (memory / 8).clamp(256 << 20, 4 << 30);
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cache_is_an_eighth_of_memory_within_bounds() {
        assert_eq!(default_cache(24 << 30), 3 << 30);
        assert_eq!(default_cache(1 << 30), 256 << 20);
        assert_eq!(default_cache(0), 256 << 20);
        assert_eq!(default_cache(256 << 30), 4 << 30);
        assert!(physical() > 0);
    }
}
