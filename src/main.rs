//! The zarrfs command line: argument parsing, logging, and calls into the library.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use zarrfs::array::Array;
use zarrfs::cache::ChunkCache;
use zarrfs::hierarchy::{Hierarchy, Node};
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
    C,
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
        #[arg(long, value_enum, default_value = "c")]
        order: OrderArg,
        #[arg(long, value_enum, default_value = "little")]
        endian: EndianArg,
    },
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
    // Enough cache for one row of read units in the streaming direction, plus slack.
    let grid = array.unit_grid();
    let row_units: u64 = match order {
        Order::C => grid.iter().skip(1).product(),
        Order::F => grid.iter().rev().skip(1).product(),
    };
    let unit = array.unit_bytes().max(1 << 16) as u64;
    let budget = (row_units.saturating_add(2))
        .saturating_mul(unit)
        .max(64 << 20);
    let cache = Arc::new(ChunkCache::new(
        usize::try_from(budget).unwrap_or(usize::MAX),
    ));
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    if array.meta.dtype.is_var() {
        write_var_lines(&array, &cache, order, &mut out)?;
    } else {
        let view = View::new(array, cache, Layout { order, big_endian })?;
        view.write_all(&mut out, 8 << 20)?;
    }
    out.flush()
        .map_err(|e| Error::Invalid(format!("write: {e}")))
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
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
            writeln!(out, "{text}").map_err(|e| Error::Invalid(format!("write: {e}")))
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zarrfs: {e}");
            ExitCode::FAILURE
        }
    }
}
