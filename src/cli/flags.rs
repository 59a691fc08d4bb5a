//! The flags commands share, with their value parsers: where the store is and how to
//! reach it (`StoreArgs`), what a tree shows and how it is read (`TreeArgs`, for `mount`
//! and `serve`), one array and the layout of its flat file (`ArrayArgs`, for `cat`,
//! `header` and `write`).

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use super::values;
use crate::formats::{FormatKind, FormatSet, Placement};
use crate::fs::io::IoMode;
use crate::fs::FsOptions;
use crate::hierarchy::Hierarchy;
use crate::read::view::{Layout, Order};
use crate::store::StoreConfig;
use crate::Result;

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum OrderArg {
    #[value(name = "C", alias = "c")]
    C,
    #[value(name = "F", alias = "f")]
    F,
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum EndianArg {
    Little,
    Big,
}

/// Where the store is and how to reach it (the options of every command taking STORE).
#[derive(clap::Args, Clone)]
pub(super) struct StoreArgs {
    /// Unsigned requests: public buckets, no credentials.
    #[arg(long)]
    pub(super) anonymous: bool,
    /// Open STORE as a zip archive whatever its name (names ending in .zip always are).
    #[arg(long)]
    pub(super) zip: bool,
    /// Seconds allowed for one request to a remote store.
    #[arg(long, default_value_t = 30.0, value_parser = values::parse_seconds)]
    pub(super) timeout: f64,
    /// Retries of a failed request to a remote store, with backoff.
    #[arg(long, default_value_t = 3)]
    pub(super) retries: usize,
    /// Requests to a remote store in flight at most.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub(super) max_requests: u16,
    /// Keep fetched chunk bytes of a remote store in this folder, shared by every mount
    /// of the store (entries keyed by URL, key and ETag).
    #[arg(long, value_name = "DIR")]
    pub(super) disk_cache: Option<PathBuf>,
    /// The disk cache's budget: bytes, or with a unit (20GiB); oldest entries go first.
    #[arg(long, default_value = "10GiB", value_parser = values::parse_size)]
    pub(super) disk_cache_size: usize,
    /// A reference set (kerchunk JSON) may read its targets under this folder or URL
    /// prefix too (repeatable); by default only under the set's own folder.
    #[arg(long = "virtual-prefix", value_name = "PREFIX")]
    pub(super) virtual_prefix: Vec<String>,
    /// An Icechunk repository's branch or tag to show (default: branch main).
    #[arg(long = "ref", value_name = "BRANCH|TAG", conflicts_with = "snapshot")]
    pub(super) reference: Option<String>,
    /// An Icechunk repository's snapshot to show, by its ID.
    #[arg(long, value_name = "ID")]
    pub(super) snapshot: Option<String>,
    /// Show every branch, tag and snapshot of an Icechunk repository as folders
    /// (@branches/NAME, @tags/NAME, @snapshots/ID) beside the default tree.
    #[arg(long)]
    pub(super) versions: bool,
}

/// `--refresh`: an interval, off (`Some(None)`), or the default (`None`).
#[derive(Clone, Copy)]
#[cfg_attr(not(any(feature = "fuse", feature = "serve")), allow(dead_code))]
pub(super) struct Refresh(pub(super) Option<Option<Duration>>);

pub(super) fn parse_refresh(s: &str) -> std::result::Result<Refresh, String> {
    values::parse_refresh(s).map(Refresh)
}

/// `--materialize`: a budget, or the default.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub(super) struct Materialize(pub(super) Option<u64>);

#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub(super) fn parse_materialize(s: &str) -> std::result::Result<Materialize, String> {
    match s {
        "auto" => Ok(Materialize(None)),
        "off" | "no" => Ok(Materialize(Some(0))),
        size => values::parse_size(size).map(|n| Materialize(Some(n as u64))),
    }
}

#[cfg_attr(not(feature = "fuse"), allow(dead_code))]
pub(super) fn parse_io(s: &str) -> std::result::Result<IoMode, String> {
    s.parse()
}

pub(super) fn parse_views(s: &str) -> std::result::Result<FormatSet, String> {
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

pub(super) fn cat_formats() -> impl clap::builder::TypedValueParser<Value = FormatKind> {
    view_formats(false)
}

pub(super) fn header_formats() -> impl clap::builder::TypedValueParser<Value = FormatKind> {
    view_formats(true)
}

impl StoreArgs {
    /// The store configuration, with `-o key=value` store options.
    pub(super) fn config<'a>(
        &self,
        options: impl IntoIterator<Item = &'a str>,
    ) -> Result<StoreConfig> {
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
pub(super) struct TreeArgs {
    #[arg(long, value_enum, default_value = "C")]
    pub(super) order: OrderArg,
    #[arg(long, value_enum, default_value = "little")]
    pub(super) endian: EndianArg,
    /// Decoded-chunk cache budget: bytes, or with a unit (512MiB, 2G), or auto: an
    /// eighth of the memory, at least 256 MiB and at most 4 GiB.
    #[arg(long, default_value = "auto", value_parser = values::parse_cache_size)]
    pub(super) cache_size: usize,
    /// The files each array shows: a comma list of raw, npy, tiff, envi, mhd, nrrd,
    /// vrt, ome-tiff, or all (NAME, NAME.npy, NAME.tif, NAME.hdr, NAME.mhd, NAME.nhdr,
    /// NAME.vrt; NAME.ome.tif beside an OME-Zarr image group).
    #[arg(long, default_value = "raw", value_parser = parse_views)]
    pub(super) views: FormatSet,
    /// Worker threads for reads (default: the number of cores; for a remote store,
    /// --max-requests).
    #[arg(long)]
    pub(super) threads: Option<usize>,
    /// Read the store's metadata again once what was read is this old (1s, 500ms,
    /// 10m), so that grown, new, removed and rewritten arrays show; `off`: never.
    /// Default (auto): 60s for a remote store, off for a local one.
    #[arg(long, default_value = "auto", value_parser = parse_refresh)]
    pub(super) refresh: Refresh,
}

#[cfg_attr(not(any(feature = "fuse", feature = "serve")), allow(dead_code))]
impl TreeArgs {
    pub(super) fn layout(&self) -> Layout {
        layout_of(self.order, self.endian)
    }

    /// The filesystem's settings for these flags (read-only unless `staging`).
    pub(super) fn fs_options(&self, staging: Option<PathBuf>) -> FsOptions {
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
pub(super) struct ArrayArgs {
    /// A folder, s3://, gs://, az://, http(s):// URL, a .zip at any of them, or a kerchunk
    /// reference set (JSON file).
    pub(super) store: String,
    pub(super) path: String,
    #[command(flatten)]
    pub(super) store_args: StoreArgs,
    /// Store options (endpoint=..., region=..., allow_http=true, ...).
    #[arg(short = 'o', value_delimiter = ',')]
    pub(super) options: Vec<String>,
    #[arg(long, value_enum, default_value = "C")]
    pub(super) order: OrderArg,
    #[arg(long, value_enum, default_value = "little")]
    pub(super) endian: EndianArg,
}

impl ArrayArgs {
    pub(super) fn hierarchy(&self) -> Result<Hierarchy> {
        open(&self.store, &self.store_args, &self.options)
    }

    pub(super) fn layout(&self) -> Layout {
        layout_of(self.order, self.endian)
    }
}

/// The hierarchy of `store`, opened with `args` and the `-o` store `options`.
pub(super) fn open(store: &str, args: &StoreArgs, options: &[String]) -> Result<Hierarchy> {
    let cfg = args.config(options.iter().map(String::as_str))?;
    Hierarchy::open(crate::store::open(store, &cfg)?)
}

fn order_of(order: OrderArg) -> Order {
    match order {
        OrderArg::C => Order::C,
        OrderArg::F => Order::F,
    }
}

pub(super) fn layout_of(order: OrderArg, endian: EndianArg) -> Layout {
    Layout {
        order: order_of(order),
        big_endian: matches!(endian, EndianArg::Big),
    }
}
