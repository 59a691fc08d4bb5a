//! The zarrfs command line: argument parsing, logging, and calls into the library
//! (the binary's `main` is [`main`]).

#[cfg(feature = "fuse")]
mod args;
mod docs;
pub mod inspect;
mod progress;
#[cfg(feature = "fuse")]
mod refresh;
mod values;
mod write;

use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

#[cfg(feature = "fuse")]
use crate::daemon::mount::MountConfig;
use crate::error::output_error;
use crate::formats::{self, FormatKind, FormatSet, Placement, Segment};
use crate::fs::io::IoMode;
use crate::fs::FsOptions;
use crate::hierarchy::Hierarchy;
use crate::process::logging;
use crate::read::array::Array;
use crate::read::cache::UnitCache;
use crate::read::prefetch::{Prefetcher, PREFETCH_PER_CORE};
use crate::read::text::write_var_lines;
use crate::read::view::{Layout, Order, View};
use crate::store::StoreConfig;
use crate::{Error, Result};

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

/// Where the store is and how to reach it (the options of every command taking STORE).
#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// Unsigned requests: public buckets, no credentials.
    #[arg(long)]
    anonymous: bool,
    /// Open STORE as a zip archive whatever its name (names ending in .zip always are).
    #[arg(long)]
    zip: bool,
    /// Seconds allowed for one request to a remote store.
    #[arg(long, default_value_t = 30.0, value_parser = values::parse_seconds)]
    timeout: f64,
    /// Retries of a failed request to a remote store, with backoff.
    #[arg(long, default_value_t = 3)]
    retries: usize,
    /// Requests to a remote store in flight at most.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    max_requests: u16,
    /// Keep fetched chunk bytes of a remote store in this folder, shared by every mount
    /// of the store (entries keyed by URL, key and ETag).
    #[arg(long, value_name = "DIR")]
    disk_cache: Option<PathBuf>,
    /// The disk cache's budget: bytes, or with a unit (20GiB); oldest entries go first.
    #[arg(long, default_value = "10GiB", value_parser = values::parse_size)]
    disk_cache_size: usize,
    /// A reference set (kerchunk JSON) may read its targets under this folder or URL
    /// prefix too (repeatable); by default only under the set's own folder.
    #[arg(long = "virtual-prefix", value_name = "PREFIX")]
    virtual_prefix: Vec<String>,
    /// An Icechunk repository's branch or tag to show (default: branch main).
    #[arg(long = "ref", value_name = "BRANCH|TAG", conflicts_with = "snapshot")]
    reference: Option<String>,
    /// An Icechunk repository's snapshot to show, by its ID.
    #[arg(long, value_name = "ID")]
    snapshot: Option<String>,
    /// Show every branch, tag and snapshot of an Icechunk repository as folders
    /// (@branches/NAME, @tags/NAME, @snapshots/ID) beside the default tree.
    #[arg(long)]
    versions: bool,
}

/// `--refresh`: an interval, off (`Some(None)`), or the default (`None`).
#[derive(Clone, Copy)]
#[cfg_attr(not(any(feature = "fuse", feature = "serve")), allow(dead_code))]
struct Refresh(Option<Option<Duration>>);

fn parse_refresh(s: &str) -> std::result::Result<Refresh, String> {
    values::parse_refresh(s).map(Refresh)
}

/// `--materialize`: a budget, or the default.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
struct Materialize(Option<u64>);

#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
fn parse_materialize(s: &str) -> std::result::Result<Materialize, String> {
    match s {
        "auto" => Ok(Materialize(None)),
        "off" | "no" => Ok(Materialize(Some(0))),
        size => values::parse_size(size).map(|n| Materialize(Some(n as u64))),
    }
}

#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
fn parse_io(s: &str) -> std::result::Result<IoMode, String> {
    s.parse()
}

fn parse_views(s: &str) -> std::result::Result<FormatSet, String> {
    s.parse()
}

/// The view formats `--as` takes: array files that hold the data (`cat`), or detached
/// headers (`header`), from the registry.
fn view_formats(detached: bool) -> impl clap::builder::TypedValueParser<Value = FormatKind> {
    let values = FormatKind::all()
        .filter(move |k| k.placement() == Placement::Array && k.format().needs_raw() == detached)
        .map(|k| clap::builder::PossibleValue::new(k.label()).aliases(k.format().aliases()));
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(values).try_map(|s| s.parse::<FormatKind>())
}

fn cat_formats() -> impl clap::builder::TypedValueParser<Value = FormatKind> {
    view_formats(false)
}

fn header_formats() -> impl clap::builder::TypedValueParser<Value = FormatKind> {
    view_formats(true)
}

impl StoreArgs {
    /// The store configuration, with `-o key=value` store options.
    fn config<'a>(&self, options: impl IntoIterator<Item = &'a str>) -> Result<StoreConfig> {
        let mut cfg = StoreConfig {
            anonymous: self.anonymous,
            zip: self.zip,
            timeout: Duration::from_secs_f64(self.timeout),
            retries: self.retries,
            max_requests: self.max_requests as usize,
            disk_cache: self
                .disk_cache
                .clone()
                .map(|dir| (dir, self.disk_cache_size as u64)),
            virtual_prefixes: self.virtual_prefix.clone(),
            icechunk: crate::store::VersionChoice {
                reference: self.reference.clone(),
                snapshot: self.snapshot.clone(),
                all: self.versions,
            },
            root_markers: crate::metadata::ROOT_MARKERS
                .iter()
                .map(|m| m.to_string())
                .collect(),
            ..StoreConfig::default()
        };
        for o in options {
            cfg.add_option(o)?;
        }
        Ok(cfg)
    }
}

/// What the tree shows and how it is read: the flags `mount` and `serve` share.
#[derive(clap::Args, Clone)]
struct TreeArgs {
    #[arg(long, value_enum, default_value = "C")]
    order: OrderArg,
    #[arg(long, value_enum, default_value = "little")]
    endian: EndianArg,
    /// Decoded-chunk cache budget: bytes, or with a unit (512MiB, 2G), or auto: an
    /// eighth of the memory, at least 256 MiB and at most 4 GiB.
    #[arg(long, default_value = "auto", value_parser = values::parse_cache_size)]
    cache_size: usize,
    /// The files each array shows: a comma list of raw, npy, tiff, envi, mhd, nrrd,
    /// vrt, ome-tiff, or all (NAME, NAME.npy, NAME.tif, NAME.hdr, NAME.mhd, NAME.nhdr,
    /// NAME.vrt; NAME.ome.tif beside an OME-Zarr image group).
    #[arg(long, default_value = "raw", value_parser = parse_views)]
    views: FormatSet,
    /// Worker threads for reads (default: the number of cores; for a remote store,
    /// --max-requests).
    #[arg(long)]
    threads: Option<usize>,
    /// Read the store's metadata again once what was read is this old (1s, 500ms,
    /// 10m), so that grown, new, removed and rewritten arrays show; `off`: never.
    /// Default (auto): 60s for a remote store, off for a local one.
    #[arg(long, default_value = "auto", value_parser = parse_refresh)]
    refresh: Refresh,
}

#[cfg_attr(not(any(feature = "fuse", feature = "serve")), allow(dead_code))]
impl TreeArgs {
    fn layout(&self) -> Layout {
        layout_of(self.order, self.endian)
    }

    /// The filesystem's settings for these flags (read-only unless `staging`).
    fn fs_options(&self, staging: Option<PathBuf>) -> FsOptions {
        FsOptions {
            layout: self.layout(),
            cache_bytes: self.cache_size,
            prefetch_threads: 0,
            views: self.views.clone(),
            staging,
            write_wait: std::time::Duration::from_secs(10),
            commit_message: None,
            new_defaults: crate::write::new_array::NewDefaults::default(),
        }
    }
}

/// One array of a store and the layout of its flat file: what `cat` and `header` read.
#[derive(clap::Args)]
struct ArrayArgs {
    /// A folder, s3://, gs://, az://, http(s):// URL, a .zip at any of them, or a kerchunk
    /// reference set (JSON file).
    store: String,
    path: String,
    #[command(flatten)]
    store_args: StoreArgs,
    /// Store options (endpoint=..., region=..., allow_http=true, ...).
    #[arg(short = 'o', value_delimiter = ',')]
    options: Vec<String>,
    #[arg(long, value_enum, default_value = "C")]
    order: OrderArg,
    #[arg(long, value_enum, default_value = "little")]
    endian: EndianArg,
}

impl ArrayArgs {
    fn hierarchy(&self) -> Result<Hierarchy> {
        open(&self.store, &self.store_args, &self.options)
    }

    fn layout(&self) -> Layout {
        layout_of(self.order, self.endian)
    }
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

/// The hierarchy of `store`, opened with `args` and the `-o` store `options`.
fn open(store: &str, args: &StoreArgs, options: &[String]) -> Result<Hierarchy> {
    let cfg = args.config(options.iter().map(String::as_str))?;
    Hierarchy::open(crate::store::open(store, &cfg)?)
}

/// The segments of view `kind` of the array `path` whose raw file is `data_file`
/// (default: the array's name), or an error saying why it has none.
fn view_segments(
    h: &Hierarchy,
    path: &str,
    kind: FormatKind,
    layout: Layout,
    data_file: Option<String>,
) -> Result<Vec<Segment>> {
    let path = crate::hierarchy::normalize(path);
    let name = data_file.unwrap_or_else(|| {
        let name = path.rsplit('/').next().unwrap_or("");
        if name.is_empty() { "array" } else { name }.to_string()
    });
    let read = |array: &str, limit: u64| {
        let mut out = Vec::new();
        write_array(h, array, layout, &mut out, limit)?;
        Ok(out)
    };
    let ctx = formats::Context::new(h, &path, &name, layout, &read);
    kind.format().build(&ctx)?.map_err(|why| {
        Error::unsupported(format!("/{path}"), format!("{} view: {why}", kind.label()))
    })
}

/// The bytes of the file `segments` make, when they can be counted.
fn segments_size(h: &Hierarchy, segments: &[Segment]) -> Option<u64> {
    segments.iter().try_fold(0u64, |total, segment| {
        let len = match segment {
            Segment::Bytes(bytes) => bytes.len() as u64,
            Segment::Array { path, range } => {
                let meta = h.array(path).ok()?;
                let size = meta
                    .shape
                    .iter()
                    .try_fold(meta.dtype.size()? as u64, |n, &d| n.checked_mul(d))?;
                match range {
                    Some((offset, len)) => (*len).min(size.saturating_sub(*offset)),
                    None => size,
                }
            }
            Segment::Tiles { grid, .. } => grid.checked_len()?,
        };
        total.checked_add(len)
    })
}

fn cat(h: Hierarchy, path: &str, layout: Layout, kind: FormatKind, quiet: bool) -> Result<()> {
    // The raw file of an array of variable-length elements is its text: not a flat view.
    let segments = if kind == FormatKind::RAW {
        vec![Segment::array(&crate::hierarchy::normalize(path))]
    } else {
        view_segments(&h, path, kind, layout, None)?
    };
    crate::process::memory::tune_allocator();
    // Straight to file descriptor 1: std's stdout is line-buffered and scans for newlines.
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::Invalid(format!("stdout: {e}")))?;
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::from(fd));
    let mut out = progress::Counting {
        inner: file,
        bar: progress::bar(segments_size(&h, &segments), quiet),
    };
    let mut tiled: Option<(String, View)> = None;
    for segment in segments {
        match segment {
            Segment::Bytes(bytes) => out.write_all(&bytes).map_err(output_error)?,
            Segment::Array { path, range: None } => {
                write_array(&h, &path, layout, &mut out, u64::MAX)?
            }
            Segment::Tiles { path, grid } => {
                // A TIFF's planes follow one another: one view (and its decoded chunks)
                // serves them all.
                let view = match tiled.take() {
                    Some((p, view)) if p == path => view,
                    _ => {
                        let (array, cache) = array_to_stream(&h, &path, layout)?;
                        flat_view(&h, array, cache, layout)?
                    }
                };
                write_tiles(&view, &path, &grid, &mut out)?;
                tiled = Some((path, view));
            }
            Segment::Array { path, .. } => {
                return Err(Error::unsupported(
                    format!("/{path}"),
                    "a part of an array in a view written by cat (the mount serves it)",
                ))
            }
        }
    }
    out.flush().map_err(output_error)?;
    out.finish();
    Ok(())
}

/// Write the file of the array at `path` to `out`: its flat view, or the text of an array
/// of variable-length elements; an error when the flat view is larger than `limit`.
fn write_array(
    h: &Hierarchy,
    path: &str,
    layout: Layout,
    out: &mut impl Write,
    limit: u64,
) -> Result<()> {
    let (array, cache) = array_to_stream(h, path, layout)?;
    if array.meta.dtype.is_var() {
        if limit < u64::MAX {
            return Err(formats::too_large(path, u64::MAX, limit));
        }
        return write_var_lines(&array, &cache, layout.order, out);
    }
    let view = flat_view(h, array, cache, layout)?;
    if view.size() > limit {
        return Err(formats::too_large(path, view.size(), limit));
    }
    view.write_all(out, 8 << 20)
}

/// Write tiles `grid` of `view`, the flat view of the array at `path`, to `out` (a
/// plane of a tiled TIFF's data), a row of tiles at a time.
fn write_tiles(
    view: &View,
    path: &str,
    grid: &formats::TileGrid,
    out: &mut impl Write,
) -> Result<()> {
    // Tile rows never run front to back through the flat view (as for the mount).
    let cursor = &crate::read::readahead::NO_READAHEAD;
    let len = grid.bytes();
    let row_of_tiles = grid
        .tile_bytes()
        .and_then(|t| t.checked_mul(grid.across()))
        .unwrap_or(u64::MAX);
    let block = row_of_tiles.clamp(1 << 20, 64 << 20);
    let mut buf = vec![0u8; usize::try_from(block.min(len)).unwrap_or(1 << 20)];
    let mut at = 0u64;
    while at < len {
        let n = usize::try_from(len - at).map_or(buf.len(), |left| left.min(buf.len()));
        let filled = grid.fill(at, &mut buf[..n], |offset, part| {
            view.read_at(cursor, offset, part)
                .map(Some)
                .map_err(Error::from)
        })?;
        if filled != Some(n) {
            return Err(Error::corrupt(path, "a tile read short"));
        }
        out.write_all(&buf[..n]).map_err(output_error)?;
        at += n as u64;
    }
    Ok(())
}

/// The array at `path` and a decoded-unit cache for streaming it: room for the layer of
/// read units being streamed and the next two, decoded ahead.
fn array_to_stream(
    h: &Hierarchy,
    path: &str,
    layout: Layout,
) -> Result<(Arc<Array>, Arc<UnitCache>)> {
    let array = Array::at(h, path)?;
    let grid = array.unit_grid();
    let row_units: u64 = match layout.order {
        Order::C => grid.iter().skip(1).product(),
        Order::F => grid.iter().rev().skip(1).product(),
    };
    let unit = array.unit_bytes().max(1 << 16) as u64;
    // At most half the machine's memory: a huge layer then costs repeated decodes, not
    // the process.
    let half_memory = crate::process::memory::physical() / 2;
    let budget = row_units
        .saturating_mul(4)
        .saturating_mul(unit)
        .min(half_memory)
        .max(64 << 20);
    let cache = Arc::new(
        UnitCache::new(usize::try_from(budget).unwrap_or(usize::MAX))
            .beside(h.spans().held_meter()),
    );
    Ok((array, cache))
}

/// The flat view of `array` with its units decoded ahead by the store's concurrency.
fn flat_view(
    h: &Hierarchy,
    array: Arc<Array>,
    cache: Arc<UnitCache>,
    layout: Layout,
) -> Result<View> {
    let threads = h.store().caps().concurrency;
    Ok(
        View::new(array, cache, layout)?
            .with_prefetch(Prefetcher::new(threads * PREFETCH_PER_CORE)),
    )
}

fn order_of(order: OrderArg) -> Order {
    match order {
        OrderArg::C => Order::C,
        OrderArg::F => Order::F,
    }
}

fn layout_of(order: OrderArg, endian: EndianArg) -> Layout {
    Layout {
        order: order_of(order),
        big_endian: matches!(endian, EndianArg::Big),
    }
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
