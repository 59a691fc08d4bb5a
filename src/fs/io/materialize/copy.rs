//! One materialized copy while it fills: the backing file and which of its byte ranges
//! already hold the array file's bytes. Reads the daemon serves write their bytes in as
//! they go, and a background build fills only the gaps, so an array read front to back
//! once is copied without a second decode.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use rangemap::RangeSet;

pub struct Copy {
    file: Arc<File>,
    size: u64,
    filled: RangeSet<u64>,
}

impl Copy {
    /// An empty copy of a file of `size` bytes in `file`.
    pub fn new(file: File, size: u64) -> Copy {
        Copy {
            file: Arc::new(file),
            size,
            filled: RangeSet::new(),
        }
    }

    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// `range` clipped to the file's end.
    pub fn clip(&self, range: Range<u64>) -> Range<u64> {
        range.start.min(self.size)..range.end.min(self.size)
    }

    /// Whether every byte of `range` is in the copy.
    pub fn holds(&self, range: &Range<u64>) -> bool {
        range.is_empty() || self.filled.gaps(range).next().is_none()
    }

    /// `range` now holds the file's bytes.
    pub fn mark(&mut self, range: Range<u64>) {
        let range = self.clip(range);
        if !range.is_empty() {
            self.filled.insert(range);
        }
    }

    /// The first range not yet in the copy.
    pub fn first_gap(&self) -> Option<Range<u64>> {
        self.filled.gaps(&(0..self.size)).next()
    }

    pub fn complete(&self) -> bool {
        self.first_gap().is_none()
    }

    /// Bytes in the copy so far.
    pub fn filled_bytes(&self) -> u64 {
        self.filled.iter().map(|r| r.end - r.start).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(size: u64) -> Copy {
        let file = tempfile_in_tmp();
        Copy::new(file, size)
    }

    fn tempfile_in_tmp() -> File {
        let path = std::env::temp_dir().join(format!("zarrfs-copy-test-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        file
    }

    #[test]
    fn ranges_merge_and_the_copy_completes_only_when_every_byte_is_in() {
        let mut c = copy(100);
        assert_eq!(c.first_gap(), Some(0..100));
        c.mark(10..20);
        c.mark(30..40);
        assert!(c.holds(&(12..18)));
        assert!(!c.holds(&(15..35)));
        assert!(c.holds(&(5..5)));
        assert_eq!(c.first_gap(), Some(0..10));
        c.mark(0..10);
        c.mark(20..30);
        assert!(c.holds(&(0..40)));
        assert_eq!(c.first_gap(), Some(40..100));
        assert_eq!(c.filled_bytes(), 40);
        // Past the end is clipped, not recorded.
        c.mark(90..1000);
        assert_eq!(c.filled_bytes(), 50);
        assert!(!c.complete());
        c.mark(40..90);
        assert!(c.complete());
        assert_eq!(c.first_gap(), None);
        assert_eq!(c.clip(95..200), 95..100);
        assert_eq!(c.clip(150..200), 100..100);
    }
}
