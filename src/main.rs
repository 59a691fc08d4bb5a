//! The zarrfs command line: argument parsing, logging, and calls into the library.

use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use zarrfs::array::Array;
use zarrfs::cache::ChunkCache;
use zarrfs::error::output_error;
use zarrfs::fs::FsOptions;
use zarrfs::hierarchy::{Hierarchy, Node};
use zarrfs::mount::MountConfig;
use zarrfs::prefetch::{Prefetcher, PREFETCH_PER_CORE};
use zarrfs::store::FolderStore;
use zarrfs::view::{write_var_lines, Layout, Order, View};
use zarrfs::{inspect, Error, Result};

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

#[derive(Clone, Copy, ValueEnum)]
enum OrderArg {
    #[value(name = "C", alias = "c")]
    C,
    #[value(name = "F", alias = "f")]
    F,
}

#[derive(Clone, Copy, ValueEnum)]
enum EndianArg {
    Little,
    Big,
}

#[derive(Subcommand)]
enum Command {
    /// Write an array's flat bytes (or JSON lines for variable-length data) to stdout.
    Cat {
        store: PathBuf,
        path: String,
        #[arg(long, value_enum, default_value = "C")]
        order: OrderArg,
        #[arg(long, value_enum, default_value = "little")]
        endian: EndianArg,
    },
    /// Mount a store: groups become directories, arrays flat read-only files.
    Mount {
        store: PathBuf,
        mountpoint: PathBuf,
        /// Stay in the foreground (Ctrl-C unmounts).
        #[arg(short, long)]
        foreground: bool,
        #[arg(long, value_enum, default_value = "C")]
        order: OrderArg,
        #[arg(long, value_enum, default_value = "little")]
        endian: EndianArg,
        /// Decoded-chunk cache budget: bytes, or with a unit (512MiB, 2G).
        #[arg(long, default_value = "1GiB", value_parser = zarrfs::mount::parse_size)]
        cache_size: usize,
        /// Worker threads for reads (default: the number of cores).
        #[arg(long)]
        threads: Option<usize>,
        /// FUSE options (allow_other, allow_root, default_permissions, ...).
        #[arg(short = 'o', value_delimiter = ',')]
        options: Vec<String>,
    },
    /// Unmount a zarrfs mount, including a stale one left by a killed daemon.
    Umount { mountpoint: PathBuf },
    /// Write a small demo hierarchy (v3 with zstd and sharding, v2, an implicit group).
    Demo { dir: PathBuf },
    /// Print the hierarchy: nodes, kinds, shapes, data types, chunks, codecs, attributes.
    Inspect {
        store: PathBuf,
        path: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

fn open(store: &PathBuf) -> Result<Hierarchy> {
    let store = FolderStore::open(store)?;
    Hierarchy::open(Arc::new(store))
}

fn cat(store: &PathBuf, path: &str, order: Order, big_endian: bool) -> Result<()> {
    let h = open(store)?;
    let meta = match h.node(path)? {
        Node::Array(meta) => meta,
        _ => return Err(Error::Invalid(format!("{path}: not an array"))),
    };
    let array = Arc::new(Array::open(meta, h.store().clone())?);
    // Room for the layer of read units being streamed and the next two, decoded ahead.
    let grid = array.unit_grid();
    let row_units: u64 = match order {
        Order::C => grid.iter().skip(1).product(),
        Order::F => grid.iter().rev().skip(1).product(),
    };
    let unit = array.unit_bytes().max(1 << 16) as u64;
    // At most half the machine's memory: a huge layer then costs repeated decodes, not
    // the process.
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let half_memory = (pages.max(0) as u64).saturating_mul(page.max(0) as u64) / 2;
    let budget = row_units
        .saturating_mul(4)
        .saturating_mul(unit)
        .min(half_memory)
        .max(64 << 20);
    let cache = Arc::new(ChunkCache::new(
        usize::try_from(budget).unwrap_or(usize::MAX),
    ));
    zarrfs::memory::tune_allocator();
    // Straight to file descriptor 1: std's stdout is line-buffered and scans for newlines.
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::Invalid(format!("stdout: {e}")))?;
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::from(fd));
    if array.meta.dtype.is_var() {
        write_var_lines(&array, &cache, order, &mut out)?;
    } else {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let view = View::new(array, cache, Layout { order, big_endian })?
            .with_prefetch(Prefetcher::new(threads * PREFETCH_PER_CORE));
        view.write_all(&mut out, 8 << 20)?;
    }
    out.flush().map_err(output_error)
}

fn order_of(order: OrderArg) -> Order {
    match order {
        OrderArg::C => Order::C,
        OrderArg::F => Order::F,
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Mount {
            store,
            mountpoint,
            foreground,
            order,
            endian,
            cache_size,
            threads,
            options,
        } => {
            let threads = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            zarrfs::mount::mount(MountConfig {
                store,
                mountpoint,
                foreground,
                fs: FsOptions {
                    layout: Layout {
                        order: order_of(order),
                        big_endian: matches!(endian, EndianArg::Big),
                    },
                    cache_bytes: cache_size,
                    prefetch_threads: threads * PREFETCH_PER_CORE,
                },
                threads,
                options,
            })
        }
        Command::Umount { mountpoint } => zarrfs::mount::unmount(&mountpoint),
        Command::Demo { dir } => {
            zarrfs::demo::write(&dir)?;
            println!("wrote a demo hierarchy to {}", dir.display());
            Ok(())
        }
        Command::Cat {
            store,
            path,
            order,
            endian,
        } => {
            let order = match order {
                OrderArg::C => Order::C,
                OrderArg::F => Order::F,
            };
            cat(&store, &path, order, matches!(endian, EndianArg::Big))
        }
        Command::Inspect { store, path, json } => {
            let h = open(&store)?;
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
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    // A panic (a bug; bad input is an error) is one log line. On a worker the request
    // fails and the daemon goes on (see zarrfs::pool); here the command exits 1.
    std::panic::set_hook(Box::new(|info| log::error!("internal error: {info}")));
    let cli = Cli::parse();
    let result = std::panic::catch_unwind(|| run(cli)).unwrap_or_else(|panic| {
        Err(Error::Invalid(format!(
            "internal error: {}",
            zarrfs::pool::panic_message(&panic)
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
