//! Going to the background and stopping on a signal: `zarrfs mount` starts itself again
//! as a daemon out of the terminal's session and waits until that daemon reports the
//! mount up; the daemon then lets go of its output. SIGINT, SIGTERM and SIGHUP are blocked
//! in every thread and taken by one that unmounts.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Error, Result};

/// Set in the environment of the background daemon: it prints `ready` on stdout once
/// the mount is up.
const READY_ENV: &str = "ZARRFS_READY_PIPE";

/// Start this program again in the background and wait until it reports the mount up.
pub fn spawn_daemon(mountpoint: &Path) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::startup_from("current exe", e))?;
    let mut command = Command::new(exe);
    command
        .args(std::env::args_os().skip(1))
        .env(READY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    // SAFETY: setsid is async-signal-safe. The daemon leaves the terminal's session, so
    // closing the terminal does not reach it.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| Error::startup_from("start daemon", e))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    if line.trim() == "ready" {
        return Ok(());
    }
    let status = child.wait().map_err(|e| Error::startup_from("daemon", e))?;
    Err(Error::startup(format!(
        "mounting at {} failed ({status})",
        mountpoint.display()
    )))
}

/// In the background daemon: tell `zarrfs mount`, waiting in front, that the mount is up,
/// and let go of the output it was started with.
pub fn report_ready() {
    if is_daemon() {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready").and_then(|_| out.flush());
        detach_output();
    }
}

/// Run `stop` with the signal on a thread of its own once a stop signal comes (the
/// signals must be blocked first, see [`block_signals`]).
pub fn on_stop_signal(stop: impl FnOnce(i32) + Send + 'static) {
    std::thread::spawn(move || stop(wait_for_signal()));
}

/// Let go of the stdout and stderr the daemon was started with: whoever started it
/// (a shell pipe, mount(8) through mount.fuse3) waits for them to close. The log goes to
/// a file or syslog (see the CLI's logging).
fn detach_output() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto our own stdout and stderr descriptors.
        unsafe {
            libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO);
            libc::dup2(null.as_raw_fd(), libc::STDERR_FILENO);
        }
    }
}

/// Whether this process is the background daemon started by `zarrfs mount` (it logs to
/// a file or syslog, since it lets go of stderr once mounted).
pub fn is_daemon() -> bool {
    std::env::var_os(READY_ENV).is_some()
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Block the stop signals in this thread and every thread it starts later.
pub fn block_signals() {
    let set = signal_set();
    // SAFETY: changes this thread's signal mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn wait_for_signal() -> i32 {
    let set = signal_set();
    let mut signal = 0;
    // SAFETY: the signals are blocked in every thread, so sigwait receives them.
    unsafe { libc::sigwait(&set, &mut signal) };
    signal
}
