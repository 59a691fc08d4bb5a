//! The zarrfs command line: argument parsing, logging, and calls into the library
//! (the binary's `main` is [`main`]).

#[cfg(feature = "fuse")]
mod args;
mod cat;
mod docs;
mod flags;
pub mod inspect;
mod progress;
#[cfg(feature = "fuse")]
mod refresh;
mod values;
mod write;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[cfg(feature = "fuse")]
use crate::daemon::mount::MountConfig;
use crate::error::output_error;
use crate::formats::{FormatKind, Segment};
#[cfg(any(feature = "fuse", feature = "serve"))]
use crate::fs::io::IoMode;
#[cfg(feature = "fuse")]
use crate::fs::FsOptions;
use crate::process::logging;
use crate::{Error, Result};
use cat::{cat, view_segments};
#[cfg(any(feature = "fuse", feature = "serve"))]
use flags::TreeArgs;
use flags::{cat_formats, header_formats, open, ArrayArgs, StoreArgs};
#[cfg(feature = "fuse")]
use flags::{parse_io, parse_materialize, Materialize};

#[derive(Parser)]
#[command(
    name = "zarrfs",
    version,
    about = "Mount a Zarr hierarchy; every array is a flat file"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write an array's flat bytes (or JSON lines for variable-length data) to stdout.
    Cat {
        #[command(flatten)]
        array: ArrayArgs,
        /// Write a complete file of this format: the flat bytes behind its header.
        #[arg(long = "as", default_value = "raw", value_parser = cat_formats())]
        format: FormatKind,
        /// No progress bar (shown on stderr when it is a terminal and stdout is not).
        #[arg(short, long)]
        quiet: bool,
    },
    /// Print a detached header (ENVI, MetaImage, NRRD, GDAL VRT) for the raw file that
    /// `zarrfs cat` writes, so image tools open it with no parameters.
    Header {
        #[command(flatten)]
        array: ArrayArgs,
        #[arg(long = "as", value_parser = header_formats())]
        format: FormatKind,
        /// The raw file the header points at (default: the array's name).
        #[arg(long, value_name = "NAME")]
        data_file: Option<String>,
    },
    /// Write a whole array from its flat bytes (stdin, or --from FILE) through the same
    /// staging and commit a --writable mount uses: the input's size, in whole rows of the
    /// slowest axis, sets its shape (local folder stores).
    Write {
        #[command(flatten)]
        array: ArrayArgs,
        /// Read the bytes from FILE instead of stdin.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Where the input is staged before it is committed (default: a private folder
        /// under the system's temporary folder).
        #[arg(long, value_name = "DIR")]
        write_staging: Option<PathBuf>,
    },
    /// Mount a store: groups become directories, arrays flat files (read-only unless
    /// --writable). Also `zarrfs STORE MOUNTPOINT -o OPTIONS` (what mount(8) runs for
    /// fuse.zarrfs): every flag is an -o option too (cache_size=2GiB), mount(8)/fstab
    /// options are ignored.
    #[cfg(feature = "fuse")]
    Mount {
        /// A folder, s3://, gs://, az://, http(s):// URL, a .zip at any of them, or a kerchunk
        /// reference set (JSON file).
        store: String,
        /// A folder, or /dev/fd/N: serve the /dev/fuse descriptor N, inherited
        /// open, of a mount a helper made.
        mountpoint: PathBuf,
        #[command(flatten)]
        store_args: StoreArgs,
        /// Stay in the foreground (Ctrl-C unmounts).
        #[arg(short, long)]
        foreground: bool,
        #[command(flatten)]
        tree: TreeArgs,
        /// How reads reach the daemon: through the kernel page cache (cache), straight
        /// into the reader's buffer with readahead in the daemon (direct), or per open
        /// (auto: direct when other files of the mount are being read, unless the page
        /// cache may hold the file).
        #[arg(long, default_value = "auto", value_parser = parse_io)]
        io: IoMode,
        /// Serve arrays read through once (or opened again) from a decoded copy in memory
        /// by the kernel (FUSE passthrough), within this budget: bytes with a unit, `off`,
        /// or `auto` (as root on a kernel with passthrough: a quarter of the memory, at
        /// most 4 GiB).
        #[arg(long, default_value = "auto", value_parser = parse_materialize)]
        materialize: Materialize,
        /// With a refresh interval, a local folder is watched with inotify and a changed
        /// metadata document shows at once; --no-watch leaves it to the interval.
        #[arg(long)]
        no_watch: bool,
        /// Take writes: an array's raw file opened for writing is staged on local disk
        /// and committed into the store's chunks at each close or fsync (local folder
        /// stores). Without it the mount is read-only.
        #[arg(long)]
        writable: bool,
        /// Where a writable mount stages written bytes (default: a private folder under
        /// the system's temporary folder).
        #[arg(long, value_name = "DIR")]
        write_staging: Option<PathBuf>,
        /// How long an open for writing waits for another writer of the same array to
        /// close it before it fails with EBUSY (10s, 500ms, 0).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        write_wait: std::time::Duration,
        /// What the message of each commit of a writable Icechunk branch starts with (the
        /// file and its byte count follow).
        #[arg(long, value_name = "TEXT")]
        commit_message: Option<String>,
        /// The chunks of arrays made through a writable mount (NAME.npy, .NAME.json):
        /// about SIZE bytes each over the slowest axes (4MiB), or a shape (1,256,256).
        #[arg(long, value_name = "SIZE|SHAPE", default_value = "4MiB", value_parser = values::parse_new_chunks)]
        new_chunks: crate::write::new_array::NewChunks,
        /// The codecs of arrays made through a writable mount: none, zstd[:LEVEL],
        /// gzip[:LEVEL], blosc-lz4 or blosc-zstd, and shard:INNER_SIZE for shards of
        /// --new-chunks with inner chunks of about INNER_SIZE bytes (v3).
        #[arg(long, value_name = "LIST", default_value = "zstd:3", value_parser = values::parse_new_codecs)]
        new_codecs: crate::write::new_array::NewCodecs,
        #[command(flatten)]
        log: logging::LogArgs,
        /// FUSE options (allow_other, allow_root, default_permissions, ...), store
        /// options (endpoint=..., region=..., allow_http=true, ...) and any flag above
        /// as key=value (order=F, cache_size=2GiB, log_file=PATH).
        #[arg(short = 'o', value_delimiter = ',')]
        options: Vec<String>,
    },
    /// Serve the tree a mount of the same flags shows over HTTP and WebDAV (read-only),
    /// in the foreground until SIGINT or SIGTERM: GET and HEAD with ranges, HTML and JSON
    /// listings, PROPFIND. Loopback only, unless --token-file or --public.
    #[cfg(feature = "serve")]
    Serve {
        /// A folder, s3://, gs://, az://, http(s):// URL, a .zip at any of them, or a kerchunk
        /// reference set (JSON file).
        store: String,
        #[command(flatten)]
        store_args: StoreArgs,
        #[command(flatten)]
        tree: TreeArgs,
        /// The address to listen on (port 0: any free port, printed at startup).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
        http: std::net::SocketAddr,
        /// Every request must carry the token in this file's first line: as HTTP Basic's
        /// password (any user name) or `Authorization: Bearer TOKEN`.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Listen on an address other than loopback without a token: anyone who reaches
        /// it reads the store.
        #[arg(long)]
        public: bool,
        /// Connections served at once; one more closes the one idle the longest.
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        #[command(flatten)]
        log: logging::LogArgs,
        /// Store options (endpoint=..., region=..., allow_http=true, ...).
        #[arg(short = 'o', value_delimiter = ',')]
        options: Vec<String>,
    },
    /// Unmount a zarrfs mount, including a stale one left by a killed daemon.
    #[cfg(feature = "fuse")]
    Umount { mountpoint: PathBuf },
    /// Have a mount read PATH (a file or folder inside it, or the mountpoint: all of it)
    /// from its store again now; a setxattr of user.zarrfs.refresh on PATH does the same.
    #[cfg(feature = "fuse")]
    Refresh { path: PathBuf },
    /// Write a small demo hierarchy (v3 with zstd and sharding, v2, an implicit group).
    Demo { dir: PathBuf },
    /// Print the hierarchy: nodes, kinds, shapes, data types, chunks, codecs, attributes.
    Inspect {
        /// A folder, s3://, gs://, az://, http(s):// URL, a .zip at any of them, or a kerchunk
        /// reference set (JSON file).
        store: String,
        path: Option<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store_args: StoreArgs,
        /// Store options (endpoint=..., region=..., allow_http=true, ...).
        #[arg(short = 'o', value_delimiter = ',')]
        options: Vec<String>,
    },
    /// Print the man page (roff): `zarrfs man > zarrfs.1`.
    Man,
    /// Print a shell completion script: `zarrfs completions bash > /etc/bash_completion.d/zarrfs`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        #[cfg(feature = "fuse")]
        Command::Mount {
            store,
            store_args,
            mountpoint,
            foreground,
            tree,
            io,
            materialize,
            no_watch,
            writable,
            write_staging,
            write_wait,
            commit_message,
            new_chunks,
            new_codecs,
            log: _,
            options,
        } => {
            let (store_options, fuse_options) = values::split_options(&options);
            let store_cfg = store_args.config(store_options)?;
            crate::daemon::mount::mount(MountConfig {
                store,
                store_cfg,
                mountpoint,
                foreground,
                fs: FsOptions {
                    write_wait,
                    commit_message,
                    new_defaults: crate::write::new_array::NewDefaults {
                        chunks: new_chunks,
                        codecs: new_codecs,
                    },
                    ..tree.fs_options(
                        writable
                            .then(|| write_staging.unwrap_or_else(crate::write::default_staging)),
                    )
                },
                threads: tree.threads,
                io,
                materialize: materialize.0,
                refresh: tree.refresh.0,
                watch: !no_watch,
                options: fuse_options,
            })
        }
        #[cfg(feature = "serve")]
        Command::Serve {
            store,
            store_args,
            tree,
            http,
            token_file,
            public,
            max_connections,
            log: _,
            options,
        } => {
            let store_cfg = store_args.config(options.iter().map(String::as_str))?;
            crate::serve::serve(crate::serve::ServeConfig {
                fs: tree.fs_options(None),
                store,
                store_cfg,
                threads: tree.threads,
                io: IoMode::Direct,
                refresh: tree.refresh.0,
                addr: http,
                token_file,
                public,
                max_connections: max_connections as usize,
            })
        }
        #[cfg(feature = "fuse")]
        Command::Umount { mountpoint } => crate::daemon::mount::unmount(&mountpoint),
        #[cfg(feature = "fuse")]
        Command::Refresh { path } => refresh::refresh(&path),
        Command::Demo { dir } => {
            crate::hierarchy::demo::write(&dir)?;
            println!("wrote a demo hierarchy to {}", dir.display());
            Ok(())
        }
        Command::Cat {
            array,
            format,
            quiet,
        } => cat(
            array.hierarchy()?,
            &array.path,
            array.layout(),
            format,
            quiet,
        ),
        Command::Header {
            array,
            format,
            data_file,
        } => {
            let h = array.hierarchy()?;
            let segments = view_segments(&h, &array.path, format, array.layout(), data_file)?;
            let mut out = std::io::stdout().lock();
            for segment in segments {
                match segment {
                    Segment::Bytes(bytes) => out.write_all(&bytes).map_err(output_error)?,
                    Segment::Array { path, .. } | Segment::Tiles { path, .. } => {
                        return Err(Error::Internal(format!("/{path}: data in a header view")))
                    }
                }
            }
            out.flush().map_err(output_error)
        }
        Command::Write {
            array,
            from,
            write_staging,
        } => {
            let h = array.hierarchy()?;
            let staging = write_staging.unwrap_or_else(crate::write::default_staging);
            let input = match &from {
                Some(path) => {
                    let file = std::fs::File::open(path).map_err(|source| Error::Io {
                        key: path.display().to_string(),
                        source,
                    })?;
                    // A regular file is read where it is; anything else is staged.
                    match file.metadata() {
                        Ok(m) if m.is_file() => write::Input::File(file, path.clone()),
                        _ => write::Input::Stream(Box::new(file)),
                    }
                }
                None => write::Input::Stream(Box::new(std::io::stdin().lock())),
            };
            let line = write::write(&h, &array.path, array.layout(), input, &staging)?;
            eprintln!("{line}");
            Ok(())
        }
        Command::Inspect {
            store,
            path,
            json,
            store_args,
            options,
        } => {
            let h = open(&store, &store_args, &options)?;
            let nodes = inspect::tree(&h, path.as_deref().unwrap_or(""))?;
            let mut out = std::io::stdout().lock();
            let text = if json {
                serde_json::to_string_pretty(&nodes).unwrap_or_default()
            } else {
                let mut lines = vec![format!("zarr format {}", h.format_label())];
                lines.extend(nodes.iter().map(inspect::describe));
                lines.join("\n")
            };
            writeln!(out, "{text}").map_err(output_error)
        }
        Command::Man => {
            let page = docs::man_page(Cli::command()).map_err(output_error)?;
            std::io::stdout().write_all(&page).map_err(output_error)
        }
        Command::Completions { shell } => {
            let script = docs::completions(Cli::command(), shell);
            std::io::stdout().write_all(&script).map_err(output_error)
        }
    }
}

/// Sets up logging for `cli`: a mount daemon in the background logs to its log file or
/// syslog, everything else to stderr.
fn init_logging(cli: &Cli) -> Result<()> {
    let (log, foreground) = match &cli.command {
        #[cfg(feature = "fuse")]
        Command::Mount {
            log, foreground, ..
        } => (log.clone(), *foreground),
        // A server logs a line per request, at info.
        #[cfg(feature = "serve")]
        Command::Serve { log, .. } => {
            let mut log = log.clone();
            log.log_level = log.log_level.or(Some(log::LevelFilter::Info));
            (log, true)
        }
        _ => (logging::LogArgs::default(), true),
    };
    #[cfg(feature = "fuse")]
    let is_daemon = crate::daemon::background::is_daemon();
    #[cfg(not(feature = "fuse"))]
    let is_daemon = false;
    let sink = match (&log.log_file, foreground, is_daemon) {
        (Some(path), true, _) | (Some(path), false, true) => logging::Sink::File(path),
        (Some(path), false, false) => {
            // The starting process logs to the terminal; the file is checked now.
            logging::open_log(path).map_err(Error::Invalid)?;
            logging::Sink::Stderr
        }
        (None, false, true) => logging::Sink::Syslog,
        (None, _, _) => logging::Sink::Stderr,
    };
    logging::init(sink, log.log_level).map_err(Error::Invalid)
}

/// The `zarrfs` command: parse the arguments, run the command, exit 0 or 1.
pub fn main() -> ExitCode {
    // `zarrfs STORE DIR -o OPTIONS` (mount(8), fstab) into `zarrfs mount ...`.
    #[cfg(feature = "fuse")]
    let argv = match args::normalize(std::env::args_os().collect(), &Cli::command()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("zarrfs: {e}");
            return ExitCode::from(2);
        }
    };
    #[cfg(not(feature = "fuse"))]
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = Cli::parse_from(argv);
    if let Err(e) = init_logging(&cli) {
        eprintln!("zarrfs: {e}");
        return ExitCode::FAILURE;
    }
    // A panic (a bug; bad input is an error) is one log line. On a worker the request
    // fails and the daemon goes on (see crate::pool); here the command exits 1.
    std::panic::set_hook(Box::new(|info| log::error!("internal error: {info}")));
    let result = std::panic::catch_unwind(|| run(cli)).unwrap_or_else(|panic| {
        Err(Error::Invalid(format!(
            "internal error: {}",
            crate::pool::panic_message(&panic)
        )))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`zarrfs cat ... | head`) is not an error.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("zarrfs: {e}");
            ExitCode::FAILURE
        }
    }
}
