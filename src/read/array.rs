//! One array = metadata + store: fetch and decode the unit (chunk, or inner chunk) at a
//! grid index. Arrays whose whole chain is one sharding codec are read by inner chunk: the
//! shard index first (cached, with the version of the shard it came from), then only the
//! inner chunk's byte range, or the run of neighbouring inner chunks around it
//! (`store::Spans`, within one budget for the arrays of a hierarchy) when the store wants
//! large requests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::codec::sharding::EMPTY;
use crate::codec::{CodecChain, UnitData, UnitRepr};
use crate::error::{Error, Result};
use crate::hierarchy::Hierarchy;
use crate::metadata::ArrayMetadata;
use crate::read::decoding;
use crate::read::recent::Recent;
use crate::store::{ByteRange, Spans, Store, Value, Version};

/// A shard's decoded index, and the version of the shard it was read from.
struct ShardIndex {
    entries: Vec<(u64, u64)>,
    version: Version,
}

/// An openable, readable array.
pub struct Array {
    id: u64,
    /// How many times this mount rewrote the array's chunks (see [`Array::rewritten`]):
    /// part of its id, so that no unit decoded before a rewrite is served after it.
    rewrites: AtomicU64,
    /// How its stored bytes decode (see [`super::scope::decoding`]).
    decoding: String,
    /// Whether the store may name units' bytes ([`Store::names_bytes`]).
    names_bytes: bool,
    /// The ids of units lately asked for (an array's store is at one version, so a
    /// unit's id never changes; asking the store again costs a lookup per read).
    unit_ids: Mutex<Recent<Vec<u64>, u64>>,
    pub meta: Arc<ArrayMetadata>,
    store: Arc<dyn Store>,
    /// The codec chain; `None` when a decoded chunk would be larger than zarrfs decodes
    /// (chunks never written still read as fill value).
    chain: Option<CodecChain>,
    /// The shape of one read unit: the chunk, or the inner chunk of a shard.
    unit_shape: Vec<u64>,
    unit_repr: UnitRepr,
    shard_indexes: Mutex<Recent<String, Option<Arc<ShardIndex>>>>,
    /// Shards lately hinted to the store (see [`Array::will_need`]).
    hinted_shards: Mutex<Recent<String, ()>>,
    /// Runs of inner chunks fetched together (stores that want large requests), within
    /// the budget of its store's arrays.
    spans: Spans,
    /// Bytes fetched from the store so far (for benchmarks and tests).
    fetched: AtomicU64,
    /// Stored bytes of the units decoded into another buffer so far, and how many units
    /// (see [`Array::load_bytes`]).
    stored: AtomicU64,
    stored_units: AtomicU64,
}

/// The chunk representation of `meta` and its codec chain, as opening the array builds
/// them; `None` for the chain when a decoded chunk would be larger than zarrfs decodes
/// (chunks never written still read as fill value). An error when the codecs cannot be
/// built: the array cannot be opened.
fn chain_of(meta: &ArrayMetadata) -> Result<(UnitRepr, Option<CodecChain>)> {
    let repr = UnitRepr {
        shape: meta.chunk_shape.clone(),
        dtype: meta.dtype.clone(),
        fill: meta.fill.clone(),
    };
    let chain = match CodecChain::build(&meta.codecs, &repr) {
        Ok(chain) => Some(chain),
        Err(_) if !meta.dtype.is_var() && repr.fixed_len().is_err() => None,
        Err(e) => return Err(e.at_key(&meta.meta_key)),
    };
    Ok((repr, chain))
}

/// The size of the flat file of the array `meta` describes (elements × item size), found
/// without opening the array: what a listing's `stat` of each array asks, answered with
/// nothing kept. An error where opening the array fails too (its codecs cannot be built,
/// its size overflows); `None` for a variable-length type, whose file is text made of
/// every chunk.
pub fn flat_size(meta: &ArrayMetadata) -> Result<Option<u64>> {
    let Some(item) = meta.dtype.size() else {
        return Ok(None);
    };
    chain_of(meta)?;
    meta.shape
        .iter()
        .try_fold(item as u64, |n, &d| n.checked_mul(d))
        .map(Some)
        .ok_or_else(|| {
            Error::unsupported(
                &meta.meta_key,
                format!("shape {:?}: a file larger than 16 EiB", meta.shape),
            )
        })
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array").field("meta", &self.meta).finish()
    }
}

impl Array {
    /// Bytes worth one request to the array's store (0: a local store).
    pub fn request_bytes(&self) -> u64 {
        self.store.caps().request_bytes
    }

    /// The array at node path `path` of `h`, read from the store as it was at the version
    /// its metadata was read at ([`Hierarchy::array_and_store`]): how the filesystem and
    /// `cat` open an array.
    pub fn at(h: &Hierarchy, path: &str) -> Result<Arc<Array>> {
        let (meta, store) = h.array_and_store(path)?;
        Ok(Arc::new(Array::with_spans(
            meta,
            store,
            h.spans().share_read_once(),
        )?))
    }

    /// The array on `store`, with a budget of coalesced runs of its own (see
    /// [`Array::with_spans`]).
    pub fn open(meta: Arc<ArrayMetadata>, store: Arc<dyn Store>) -> Result<Array> {
        let caps = store.caps();
        let spans = Spans::read_once(crate::store::budget_for(
            caps.concurrency,
            caps.request_bytes,
        ));
        Array::with_spans(meta, store, spans)
    }

    /// The array on `store`, fetching runs of neighbouring inner chunks of a shard with
    /// `spans` (read once: each inner chunk is decoded into the cache). A sequential read
    /// of a sharded array takes inner chunks from every shard of a shard layer at once
    /// (Morton order spreads a slab over each shard): the runs stay until read, within
    /// the budget `spans` shares with the store's other arrays.
    pub fn with_spans(
        meta: Arc<ArrayMetadata>,
        store: Arc<dyn Store>,
        spans: Spans,
    ) -> Result<Array> {
        let (repr, chain) = chain_of(&meta)?;
        let unit_shape = match chain.as_ref().and_then(CodecChain::sole_sharding) {
            Some(s) => s.inner_shape.clone(),
            None => meta.chunk_shape.clone(),
        };
        let unit_repr = UnitRepr {
            shape: unit_shape.clone(),
            ..repr
        };
        let capacity = 1024;
        Ok(Array {
            id: super::scope::array_id(&store, &meta),
            rewrites: AtomicU64::new(0),
            decoding: super::scope::decoding(&meta),
            names_bytes: store.names_bytes(),
            unit_ids: Mutex::new(Recent::new(capacity)),
            meta,
            store,
            chain,
            unit_shape,
            unit_repr,
            shard_indexes: Mutex::new(Recent::new(capacity)),
            hinted_shards: Mutex::new(Recent::new(capacity)),
            spans,
            fetched: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            stored_units: AtomicU64::new(0),
        })
    }

    /// The id of this version of the array in caches (see [`super::scope`]), and of
    /// its chunks as this mount last rewrote them.
    pub fn id(&self) -> u64 {
        self.id ^ (self.rewrites.load(Ordering::Acquire) << 40)
    }

    /// This mount rewrote chunks of the array in its store: units decoded before are
    /// filed under an id no read asks for again (a load in flight files its unit there
    /// too), and shard indexes are read again. The id the units were filed under.
    pub fn rewritten(&self) -> u64 {
        let before = self.id();
        self.rewrites.fetch_add(1, Ordering::AcqRel);
        self.shard_indexes.lock().clear();
        self.unit_ids.lock().clear();
        before
    }

    /// The id of read unit `idx` in caches: by the bytes it is decoded from where the
    /// store names them (shared by the versions that hold them), else the array's.
    pub fn unit_id(&self, idx: &[u64]) -> u64 {
        if !self.names_bytes {
            return self.id();
        }
        if let Some(&id) = self.unit_ids.lock().get(idx) {
            return id;
        }
        let id = self.unit_id_of(idx);
        self.unit_ids.lock().put(idx.to_vec(), id);
        id
    }

    /// [`Array::unit_id`] when it is known without asking the store: always for a store
    /// that does not name bytes, else once it was asked.
    pub fn unit_id_now(&self, idx: &[u64]) -> Option<u64> {
        if !self.names_bytes {
            return Some(self.id());
        }
        self.unit_ids.lock().get(idx).copied()
    }

    /// [`Array::unit_id`], asked of the store.
    fn unit_id_of(&self, idx: &[u64]) -> u64 {
        let key = match self.chain.as_ref().and_then(CodecChain::sole_sharding) {
            None => self.meta.chunk_key(idx),
            Some(shard) => self.shard_key(&shard.inner_grid, idx),
        };
        match self.store.identity(&key) {
            Some(identity) => super::scope::content_id(&self.decoding, identity),
            None => self.id(),
        }
    }

    /// Whether its units may be named by their bytes, and so shared with other versions
    /// (see [`Array::unit_id`]).
    pub fn shares_units(&self) -> bool {
        self.names_bytes
    }

    pub fn unit_shape(&self) -> &[u64] {
        &self.unit_shape
    }

    pub fn unit_grid(&self) -> Vec<u64> {
        self.meta
            .shape
            .iter()
            .zip(&self.unit_shape)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }

    /// Bytes of one decoded read unit (0 for variable-length types).
    pub fn unit_bytes(&self) -> usize {
        self.unit_repr.fixed_len().unwrap_or(0)
    }

    /// Bytes a unit's decode makes, as [`decoding::decode_sized`] weighs it: unknown (the
    /// most) for variable-length units.
    fn turn_bytes(&self) -> usize {
        match self.unit_bytes() {
            0 => usize::MAX,
            n => n,
        }
    }

    /// Bytes a unit's load holds at its height: the decoded unit and, when its chain
    /// decodes the stored bytes into another buffer (a compressed chunk), those too, by
    /// the mean of the units read so far (as many as decoded before the first).
    pub fn load_bytes(&self) -> usize {
        let unit = self.unit_bytes();
        let decodes_apart = match self.chain.as_ref() {
            Some(chain) => match chain.sole_sharding() {
                Some(shard) => shard.inner.decodes_into_another_buffer(),
                None => chain.decodes_into_another_buffer(),
            },
            None => false,
        };
        if !decodes_apart {
            return unit;
        }
        let stored = match self.stored_units.load(Ordering::Relaxed) {
            0 => unit as u64,
            n => self.stored.load(Ordering::Relaxed) / n,
        };
        unit.saturating_add(usize::try_from(stored).unwrap_or(usize::MAX))
    }

    /// Note a unit's stored bytes, about to be decoded (see [`Array::load_bytes`]).
    fn note_stored(&self, bytes: &[u8]) {
        self.stored.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.stored_units.fetch_add(1, Ordering::Relaxed);
    }

    pub fn bytes_fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    fn fetch(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Vec<u8>>> {
        Ok(self.fetch_value(key, range)?.map(|v| v.bytes))
    }

    /// The bytes with the version they came from.
    fn fetch_value(&self, key: &str, range: Option<ByteRange>) -> Result<Option<Value>> {
        let got = self.store.read(key, range)?;
        if let Some(v) = &got {
            self.fetched
                .fetch_add(v.bytes.len() as u64, Ordering::Relaxed);
        }
        Ok(got)
    }

    /// The key of the shard holding inner chunk `idx` (`inner_grid` inner chunks a shard).
    fn shard_key(&self, inner_grid: &[u64], idx: &[u64]) -> String {
        let shard_idx: Vec<u64> = idx.iter().zip(inner_grid).map(|(i, g)| i / g).collect();
        self.meta.chunk_key(&shard_idx)
    }

    /// Tell the store that the read unit at `idx` will be read soon (the chunk, or the
    /// whole shard holding it, hinted once while it is among the last shards hinted).
    pub fn will_need(&self, idx: &[u64]) {
        match self.chain.as_ref().and_then(CodecChain::sole_sharding) {
            None => self.store.will_need(&self.meta.chunk_key(idx)),
            Some(shard) => {
                let key = self.shard_key(&shard.inner_grid, idx);
                if self.hinted_shards.lock().put(key.clone(), ()).is_none() {
                    self.store.will_need(&key);
                }
            }
        }
    }

    /// The decoded read unit at `idx` (full unit shape, C order, little-endian), with a
    /// unit of fill value materialized.
    pub fn read_unit(&self, idx: &[u64]) -> Result<UnitData> {
        match self.read_unit_or_fill(idx)? {
            UnitData::Fill(_) => self.unit_repr.filled(),
            data => Ok(data),
        }
    }

    /// The decoded read unit at `idx`, or [`UnitData::Fill`] (one element) when it holds
    /// only the fill value because it was never written: its memory does not grow with
    /// the unit's size.
    pub fn read_unit_or_fill(&self, idx: &[u64]) -> Result<UnitData> {
        match self.chain.as_ref().and_then(CodecChain::sole_sharding) {
            None => {
                let key = self.meta.chunk_key(idx);
                match (self.fetch(&key, None)?, &self.chain) {
                    (None, _) => self.unit_repr.fill_marker(),
                    (Some(bytes), Some(chain)) => {
                        self.note_stored(&bytes);
                        decoding::decode_sized(self.turn_bytes(), || chain.decode(bytes))
                            .map_err(|e| e.at_key(&key))
                    }
                    (Some(_), None) => Err(Error::unsupported(
                        &key,
                        format!(
                            "a chunk of shape {:?}: larger than {} GiB decoded",
                            self.unit_shape,
                            crate::limits::MAX_BUFFER >> 30
                        ),
                    )),
                }
            }
            Some(shard) => {
                let key = self.shard_key(&shard.inner_grid, idx);
                let Some(index) = self.shard_index(&key)? else {
                    return self.unit_repr.fill_marker();
                };
                let mut inner = 0usize;
                for (i, g) in idx.iter().zip(&shard.inner_grid) {
                    inner = inner * *g as usize + (i % g) as usize;
                }
                let &(offset, nbytes) = index
                    .entries
                    .get(inner)
                    .ok_or_else(|| Error::corrupt(&key, "shard index too short"))?;
                if offset == EMPTY && nbytes == EMPTY {
                    return self.unit_repr.fill_marker();
                }
                if let Some(max) = shard.inner.max_encoded_len() {
                    if nbytes as usize > max {
                        return Err(Error::corrupt(&key, "inner chunk larger than possible"));
                    }
                }
                let span = |offset, len| {
                    self.fetch_value(&key, Some(ByteRange::Span { offset, len }))?
                        .filter(|v| v.bytes.len() as u64 == len)
                        .ok_or_else(|| Error::corrupt(&key, "inner chunk lies outside the shard"))
                };
                let members = || {
                    let stored = |&e: &(u64, u64)| (e != (EMPTY, EMPTY)).then_some(e);
                    index.entries.iter().map(stored).collect()
                };
                let request = self.store.caps().request_bytes;
                let coalesced =
                    self.spans
                        .read(&key, &index.version, members, inner, request, span)?;
                let bytes = match coalesced {
                    Some(bytes) => bytes,
                    None => span(offset, nbytes)?.bytes,
                };
                self.note_stored(&bytes);
                decoding::decode_sized(self.turn_bytes(), || shard.inner.decode(bytes))
                    .map_err(|e| e.at_key(&key))
            }
        }
    }

    /// The decoded index of shard `key`, or `None` when the shard does not exist.
    fn shard_index(&self, key: &str) -> Result<Option<Arc<ShardIndex>>> {
        if let Some(hit) = self.shard_indexes.lock().get(key) {
            return Ok(hit.clone());
        }
        let Some(shard) = self.chain.as_ref().and_then(CodecChain::sole_sharding) else {
            return Ok(None);
        };
        let len = shard.index_len as u64;
        let range = if shard.index_at_end {
            ByteRange::Suffix(len)
        } else {
            ByteRange::Span { offset: 0, len }
        };
        let index = match self.fetch_value(key, Some(range))? {
            None => None,
            Some(v) if v.bytes.len() as u64 != len => {
                return Err(Error::corrupt(key, "shard shorter than its index"))
            }
            Some(Value { bytes, version }) => Some(Arc::new(ShardIndex {
                entries: shard.decode_index(bytes).map_err(|e| e.at_key(key))?,
                version,
            })),
        };
        self.shard_indexes
            .lock()
            .put(key.to_string(), index.clone());
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    /// A one-dimensional uint8 array of two chunks of 512 bytes, through `codecs`, with
    /// chunk `i`'s stored bytes `chunks[i]`.
    fn array(codecs: &str, chunks: [Vec<u8>; 2]) -> Array {
        let mut store = MemoryStore::new();
        let doc = format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [1024], "data_type": "uint8",
                "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [512]}}}},
                "chunk_key_encoding": {{"name": "default"}}, "fill_value": 0,
                "codecs": [{codecs}]}}"#
        );
        store.insert("zarr.json", doc.into_bytes());
        let [c0, c1] = chunks;
        store.insert("c/0", c0);
        store.insert("c/1", c1);
        let store: Arc<dyn Store> = Arc::new(store);
        let meta = Hierarchy::open(store.clone()).unwrap().array("").unwrap();
        Array::open(meta, store).unwrap()
    }

    #[test]
    fn a_load_holds_the_stored_bytes_of_a_compressed_unit_beside_the_decoded_ones() {
        let noise: Vec<u8> = (0..512u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let zeros = zstd::encode_all(&[0u8; 512][..], 3).unwrap();
        let noisy = zstd::encode_all(&noise[..], 3).unwrap();
        let (s0, s1) = (zeros.len(), noisy.len());
        let zstd = array(
            r#"{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 3, "checksum": false}}"#,
            [zeros, noisy],
        );
        // Before any read: as many stored bytes as decoded ones.
        assert_eq!(zstd.load_bytes(), 512 + 512);
        assert_eq!(zstd.read_unit(&[0]).unwrap(), UnitData::Fixed(vec![0; 512]));
        assert_eq!(zstd.load_bytes(), 512 + s0);
        assert_eq!(
            zstd.read_unit(&[1]).unwrap(),
            UnitData::Fixed(noise.clone())
        );
        assert_eq!(zstd.load_bytes(), 512 + (s0 + s1) / 2);
        // Stored bytes that are the unit's own (no compressor) count once.
        let raw = array(r#"{"name": "bytes"}"#, [vec![7; 512], noise]);
        raw.read_unit(&[0]).unwrap();
        assert_eq!(raw.load_bytes(), 512);
    }

    fn store() -> Arc<dyn Store> {
        let mut store = MemoryStore::new();
        store.insert(
            "zarr.json",
            br#"{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int16",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}"#
                .to_vec(),
        );
        Arc::new(store)
    }

    #[test]
    fn an_array_is_named_by_its_store_metadata_key_and_metadata_version() {
        let store = store();
        let meta = Hierarchy::open(store.clone()).unwrap().array("").unwrap();
        assert!(meta.version.is_known(), "{:?}", meta.version);
        let id = |meta: &Arc<ArrayMetadata>, store: &Arc<dyn Store>| {
            Array::open(meta.clone(), store.clone()).unwrap().id()
        };
        // Opened again at the same version: the same units.
        assert_eq!(id(&meta, &store), id(&meta, &store));
        // A new version of its metadata: new units.
        let mut changed = (*meta).clone();
        changed.version = Version::Label("rewritten".into());
        assert_ne!(id(&Arc::new(changed), &store), id(&meta, &store));
        // Unknown versions never share.
        let mut unknown = (*meta).clone();
        unknown.version = Version::Unknown;
        let unknown = Arc::new(unknown);
        assert_ne!(id(&unknown, &store), id(&unknown, &store));
        // Another store with the same keys and versions: its own units.
        let other = self::store();
        let other_meta = Hierarchy::open(other.clone()).unwrap().array("").unwrap();
        assert_eq!(other_meta.version, meta.version);
        assert_ne!(id(&other_meta, &other), id(&meta, &store));
    }

    /// A store that names chunk `c/0`'s bytes (as an Icechunk repository names a chunk
    /// object), and no other key's.
    struct Named(Arc<dyn Store>);

    impl Store for Named {
        fn read(
            &self,
            key: &str,
            range: Option<crate::store::ByteRange>,
        ) -> crate::error::Result<Option<crate::store::Value>> {
            self.0.read(key, range)
        }
        fn list_dir(&self, prefix: &str) -> crate::error::Result<crate::store::Listing> {
            self.0.list_dir(prefix)
        }
        fn head(&self, key: &str) -> crate::error::Result<Option<crate::store::Head>> {
            self.0.head(key)
        }
        fn will_need(&self, key: &str) {
            self.0.will_need(key)
        }
        fn caps(&self) -> crate::store::Caps {
            self.0.caps()
        }
        fn identity(&self, key: &str) -> Option<String> {
            (key == "c/0").then(|| "chunk object 1".to_string())
        }
        fn names_bytes(&self) -> bool {
            true
        }
    }

    #[test]
    fn units_named_by_their_bytes_are_shared_by_versions_that_decode_alike() {
        let store: Arc<dyn Store> = Arc::new(Named(store()));
        let meta = Hierarchy::open(store.clone()).unwrap().array("").unwrap();
        let open = |meta: ArrayMetadata| Array::open(Arc::new(meta), store.clone()).unwrap();
        let a = open((*meta).clone());
        // Another version, grown: chunk 0 is the same object.
        let mut grown = (*meta).clone();
        grown.version = Version::Label("grown".into());
        grown.shape = vec![6];
        let b = open(grown);
        assert_ne!(a.id(), b.id());
        assert_eq!(a.unit_id(&[0]), b.unit_id(&[0]));
        assert!(a.shares_units());
        // Chunks the store does not name stay the array version's own.
        assert_eq!(a.unit_id(&[1]), a.id());
        assert_ne!(a.unit_id(&[1]), b.unit_id(&[1]));
        // The same object decoded another way (another data type): other units.
        let mut other = (*meta).clone();
        other.version = Version::Label("retyped".into());
        other.dtype_json = serde_json::json!("uint16");
        assert_ne!(open(other).unit_id(&[0]), a.unit_id(&[0]));
    }
}
