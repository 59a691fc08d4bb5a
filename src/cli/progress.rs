//! The progress bar of `zarrfs cat`: on stderr when it is a terminal and the output is
//! not (a file or a pipe), off with `-q`.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar for `total` bytes (`None`: unknown, a spinner), or `None` when it is not
/// wanted: `quiet`, stderr not a terminal, or stdout a terminal.
pub fn bar(total: Option<u64>, quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() || std::io::stdout().is_terminal() {
        return None;
    }
    let bar = match total {
        Some(len) => ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
            .with_style(
                ProgressStyle::with_template(
                    "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template("{spinner} {binary_bytes} {binary_bytes_per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    Some(bar)
}

/// A writer that moves `bar` by the bytes written through it.
pub struct Counting<W> {
    pub inner: W,
    pub bar: Option<ProgressBar>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice]) -> std::io::Result<usize> {
        let n = self.inner.write_vectored(bufs)?;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(buf)?;
        if let Some(bar) = &self.bar {
            bar.inc(buf.len() as u64);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W> Counting<W> {
    /// Leaves the finished bar on the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
