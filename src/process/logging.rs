//! Where the log goes: stderr for commands and `mount -f` (systemd units read it), a file
//! with `--log-file`, and syslog / journald (facility daemon) for a background daemon
//! without one, so nothing is lost when the terminal that started it closes.

use std::path::{Path, PathBuf};

use log::LevelFilter;

/// The logging flags of `mount` (also `-o log_file=`, `-o log_level=`).
#[derive(clap::Args, Clone, Default)]
pub struct LogArgs {
    /// Append the daemon's log to this file (default: stderr with -f, else syslog).
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// Least severe level logged: off, error, warn, info, debug, trace (default: warn,
    /// or RUST_LOG).
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<LevelFilter>,
}

/// Where one process logs.
pub enum Sink<'a> {
    Stderr,
    File(&'a Path),
    /// Syslog if the machine has one; else stderr, with a warning that the daemon's log
    /// after startup is discarded.
    Syslog,
}

/// Sets up the logger of this process; `level` overrides RUST_LOG's default level.
pub fn init(sink: Sink, level: Option<LevelFilter>) -> Result<(), String> {
    match sink {
        Sink::Stderr => {
            stderr_logger(level).init();
            Ok(())
        }
        Sink::File(path) => {
            let file = open_log(path)?;
            stderr_logger(level)
                .target(env_logger::Target::Pipe(Box::new(file)))
                .write_style(env_logger::WriteStyle::Never)
                .init();
            Ok(())
        }
        Sink::Syslog => {
            let formatter = syslog::Formatter3164 {
                facility: syslog::Facility::LOG_DAEMON,
                hostname: None,
                process: "zarrfs".into(),
                pid: std::process::id(),
            };
            match syslog::unix(formatter) {
                Ok(logger) => {
                    log::set_boxed_logger(Box::new(syslog::BasicLogger::new(logger)))
                        .map_err(|e| format!("logger: {e}"))?;
                    log::set_max_level(level.unwrap_or(LevelFilter::Warn));
                }
                Err(e) => {
                    stderr_logger(level).init();
                    log::warn!(
                        "no syslog socket at /dev/log ({e}): the daemon's log is discarded \
                         once it is in the background; use --log-file PATH to keep it"
                    );
                }
            }
            Ok(())
        }
    }
}

/// Opens (creating) `path` for appending: checked before the daemon starts, too.
pub fn open_log(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("log file {}: {e}", path.display()))
}

/// fuser's own warnings stay out of the log unless asked for (RUST_LOG, or --log-level
/// debug or trace): it warns of a failed unmount each time the mount was already gone.
const QUIET_FUSER: &str = "warn,fuser=error";

fn stderr_logger(level: Option<LevelFilter>) -> env_logger::Builder {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(QUIET_FUSER));
    builder.format_timestamp_millis();
    if let Some(level) = level {
        builder.filter_level(level);
        if level <= LevelFilter::Info {
            builder.filter_module("fuser", LevelFilter::Error);
        }
    }
    builder
}
