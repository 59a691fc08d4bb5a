//! Process-wide memory settings for programs that stream chunks (the daemon, `cat`).

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
