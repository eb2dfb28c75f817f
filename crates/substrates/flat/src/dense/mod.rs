//! M1, dense vectors over a flat store (*Harness the Memory*, §M1).
//!
//! **Write**: each event's rendered text ([`Event::render`]) is embedded
//! through `services.embedder` in batches of [`DenseConfig::embed_batch`],
//! normalised to unit length, and appended to its namespace. **Read**: the
//! query's [`Query::retrieval_text`] is embedded, the top-k units by cosine
//! are found, and they are rendered in time order under
//! [`Query::allowance`] with [`render_in_time_order`](submem_kit::render_in_time_order)
//! ([`PackPolicy::SkipUnfit`](submem_kit::PackPolicy::SkipUnfit)); [`Recall::sources`] carry the cosine scores.
//!
//! **Index**: a namespace below [`DenseConfig::exact_threshold`] live units is
//! searched by an exact scan; at the threshold an HNSW graph (hnsw_rs, cosine
//! as `1 − a·b` on unit vectors) is built and kept up to date; from
//! [`DenseConfig::partition_threshold`] a partitioned index replaces the graph
//! (k-means centroids, one-bit codes scanned in the partitions nearest the
//! query, candidates rescored exactly; see `partitions.rs`), which builds
//! ~20× faster and keeps recall where the graph loses it. Persisting saves
//! the index itself (hnsw_rs's dump, or the centroids and each unit's
//! partition; checked by length and SHA-256 on restore), so a restored store
//! answers exactly like the saved one and a large one is back in seconds.
//!
//! **Deviation from the paper**: the paper's M1 has no management; here
//! [`Substrate::manage`] compacts namespaces whose forgotten (tombstoned)
//! units exceed [`DenseConfig::compact_share`], which forgetting needs.
//!
//! **Blocking**: index inserts run inline on the calling task; batches of 64
//! or more are inserted in parallel on rayon's pool. The write that crosses
//! a threshold builds that index at once (the graph: 0.2 s for 2k units;
//! the partitions: ~3 s for 100k on 2 cores, trained again each time the
//! namespace has grown threefold), and each later unit costs under a
//! millisecond; callers
//! ingesting very large namespaces on a busy runtime should write from
//! `spawn_blocking` or a dedicated runtime. Reads hold only a read lock of
//! their namespace.

mod config;
mod graph;
mod ns;
mod partitions;
mod persist;
pub(crate) mod vector;

pub use config::DenseConfig;

use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, Namespace, Query, ReadTrace, Recall,
    Result, Services, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::embed::{check_vectors, embed_checked, EmbedError};
use submem_kit::RankedUnit;

use crate::error::FlatError;
use crate::unit::{check_new_ids, exists_in, tokens_u32, NewUnit, StoredUnit};
use ns::DenseNs;
use submem_kit::spaces::{self, Spaces};

/// Method id used in errors and the manifest ([`crate::M1`]).
pub(crate) const METHOD: &str = "M1";

type Space = Arc<RwLock<DenseNs>>;

/// M1: dense top-k retrieval over every stored unit.
///
/// ```no_run
/// # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
/// use submem_core::{Namespace, Query, Substrate};
/// use submem_flat::{DenseConfig, DenseMemory};
/// let m1 = DenseMemory::new(services, DenseConfig::default())?;
/// let ns = Namespace::new("alice")?;
/// let recall = m1.read(&Query::question(ns, "Where did I park?", 4096)).await?;
/// println!("{}", recall.text);
/// # Ok(()) }
/// ```
pub struct DenseMemory {
    services: Services,
    config: DenseConfig,
    dim: usize,
    spaces: Spaces<Space>,
}

impl std::fmt::Debug for DenseMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseMemory")
            .field("config", &self.config)
            .field("dim", &self.dim)
            .field("embedder", &self.services.embedder.name())
            .finish_non_exhaustive()
    }
}

impl DenseMemory {
    /// A new, empty dense memory using `services.embedder` and
    /// `services.tokens`.
    pub fn new(services: Services, config: DenseConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let dim = services.embedder.dimension();
        if dim == 0 {
            return Err(Error::InvalidInput(
                "the embedder reports dimension 0".into(),
            ));
        }
        Ok(DenseMemory {
            services,
            config,
            dim,
            spaces: Spaces::new(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &DenseConfig {
        &self.config
    }

    /// Vector length (the embedder's dimension).
    pub fn dimension(&self) -> usize {
        self.dim
    }

    fn space(&self, ns: &Namespace) -> Option<Arc<RwLock<DenseNs>>> {
        self.spaces.read().get(ns).cloned()
    }

    fn space_or_create(&self, ns: &Namespace) -> Arc<RwLock<DenseNs>> {
        if let Some(s) = self.space(ns) {
            return s;
        }
        let mut spaces = self.spaces.write();
        spaces
            .entry(ns.clone())
            .or_insert_with(|| Arc::new(RwLock::new(DenseNs::new(self.dim))))
            .clone()
    }

    /// Checks vectors given for `expected` texts and normalises them into
    /// one row-major buffer.
    fn check_vectors(&self, vectors: Vec<Vec<f32>>, expected: usize) -> Result<Vec<f32>> {
        check_vectors(&vectors, expected, self.dim)
            .map_err(|e| FlatError::from(e).into_core(METHOD, "write"))?;
        Ok(normalised_rows(vectors, self.dim))
    }

    /// Writes `events` with vectors the caller already has (one per event,
    /// the embedder's dimension; they are normalised here). Same rules as
    /// [`Substrate::write`]; used by benches to time index inserts alone.
    pub fn write_with_vectors(
        &self,
        namespace: &Namespace,
        events: &[Event],
        vectors: Vec<Vec<f32>>,
    ) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let existing = self.space(namespace);
        if let Some(s) = &existing {
            let s = spaces::read(s);
            check_new_sources(events, exists_in(Some(s.ids())))?;
        } else {
            check_new_sources(events, |_| false)?;
        }
        let flat = self.check_vectors(vectors, events.len())?;
        self.insert(namespace, NewUnit::from_events(events), flat)?;
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    /// Embeds `units` (in batches of [`DenseConfig::embed_batch`]) and
    /// stores them, whole or not at all.
    pub(crate) async fn write_units(
        &self,
        namespace: &Namespace,
        units: Vec<NewUnit>,
    ) -> Result<()> {
        let texts: Vec<String> = units.iter().map(|u| u.text.clone()).collect();
        let vectors = embed_checked(&*self.services.embedder, &texts, self.config.embed_batch)
            .await
            .map_err(|e| e.into_core(|shape| FlatError::from(shape).into_core(METHOD, "write")))?;
        self.insert(namespace, units, normalised_rows(vectors, self.dim))
    }

    fn insert(&self, namespace: &Namespace, units: Vec<NewUnit>, flat: Vec<f32>) -> Result<()> {
        let tokens: Vec<u32> = units
            .iter()
            .map(|u| tokens_u32(self.services.tokens.count(&u.text)))
            .collect();
        let space = self.space_or_create(namespace);
        let mut ns = spaces::write(&space);
        // Another task may have written the same ids since validation.
        check_new_ids(&units, exists_in(Some(ns.ids())))?;
        let first = ns.next_position;
        let units = units
            .into_iter()
            .zip(tokens)
            .enumerate()
            .map(|(i, (u, tokens))| StoredUnit {
                source_id: u.source_id,
                text: u.text,
                position: first + i as u64,
                tokens,
            })
            .collect();
        ns.append(units, flat, &self.config);
        Ok(())
    }

    /// Reads with a query vector the caller already has (the embedder's
    /// dimension; normalised here) instead of embedding
    /// [`Query::retrieval_text`]. Same rules as [`Substrate::read`].
    pub fn read_with_vector(&self, query: &Query, vector: &[f32]) -> Result<Recall> {
        query.validate()?;
        let depth = self.config.depth();
        let ranked =
            self.rank_with_vector(&query.namespace, vector, depth.candidates(query.top_k))?;
        Ok(depth.show(ranked, query, &*self.services.tokens))
    }

    /// The namespace's `n` live units nearest to `vector` (best first), each
    /// with its cached token count: the ranking a read packs.
    pub(crate) fn rank_with_vector(
        &self,
        namespace: &Namespace,
        vector: &[f32],
        n: usize,
    ) -> Result<Vec<(RankedUnit, u32)>> {
        let mut q = vector.to_vec();
        check_vectors(std::slice::from_ref(&q), 1, self.dim)
            .map_err(|e| FlatError::from(e).into_core(METHOD, "read"))?;
        submem_core::l2_normalize(&mut q);
        let Some(space) = self.space(namespace) else {
            return Ok(Vec::new());
        };
        let ns = spaces::read(&space);
        Ok(ns
            .search(&q, n, &self.config)
            .into_iter()
            .map(|(slot, score)| {
                let u = &ns.units[slot];
                u.ranked(u.position, score)
            })
            .collect())
    }

    /// Live units in `namespace`.
    pub(crate) fn live(&self, namespace: &Namespace) -> Result<usize> {
        Ok(match self.space(namespace) {
            Some(s) => spaces::read(&s).live(),
            None => 0,
        })
    }

    fn embedder_name(&self) -> String {
        self.services.embedder.name().to_string()
    }
}

/// The query's retrieval text embedded (one embedder call), for `method`'s read.
pub(crate) async fn embed_query(
    services: &Services,
    query: &Query,
    method: &str,
) -> Result<Vec<f32>> {
    let shape = |e: EmbedError| FlatError::from(e).into_core(method, "read");
    let mut vectors = embed_checked(&*services.embedder, &[query.retrieval_text()], 1)
        .await
        .map_err(|e| e.into_core(shape))?;
    vectors.pop().ok_or_else(|| {
        shape(EmbedError::VectorCount {
            expected: 1,
            got: 0,
        })
    })
}

/// `vectors` scaled to unit length, one after another in one buffer.
fn normalised_rows(vectors: Vec<Vec<f32>>, dim: usize) -> Vec<f32> {
    let mut rows = Vec::with_capacity(vectors.len() * dim);
    for mut v in vectors {
        submem_core::l2_normalize(&mut v);
        rows.extend(v);
    }
    rows
}

#[async_trait]
impl Substrate for DenseMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(
            crate::M1,
            Family::FLAT,
            self.config.depth().substrate_name("dense-hnsw"),
        )
    }

    #[tracing::instrument(name = "m1.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        if let Some(s) = self.space(namespace) {
            let s = spaces::read(&s);
            check_new_sources(events, exists_in(Some(s.ids())))?;
        } else {
            check_new_sources(events, |_| false)?;
        }
        self.write_units(namespace, NewUnit::from_events(events))
            .await?;
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    #[tracing::instrument(name = "m1.read", skip_all, fields(ns = %query.namespace, k = query.top_k))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        if self.live(&query.namespace)? == 0 {
            return Ok(Recall::empty());
        }
        let vector = embed_query(&self.services, query, METHOD).await?;
        self.read_with_vector(query, &vector)
    }

    /// The read's ranking, as deep as a fill read ranks or
    /// [`crate::fill::TRACE_DEPTH`] deep for a top-k read
    /// ([`crate::fill::ReadDepth::trace`]).
    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        query.validate()?;
        let depth = self.config.depth();
        let ranked = if self.live(&query.namespace)? == 0 {
            Vec::new()
        } else {
            let vector = embed_query(&self.services, query, METHOD).await?;
            self.rank_with_vector(
                &query.namespace,
                &vector,
                depth.trace_candidates(query.top_k),
            )?
        };
        Ok(Some(depth.trace(
            &ranked,
            query,
            &*self.services.tokens,
            source_ids,
        )))
    }

    /// A fill read ranks once for both (its trace is its own ranking); a
    /// top-k read traces deeper than it reads, so it does both.
    async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<ReadTrace>)> {
        let depth = self.config.depth();
        if !depth.is_fill() || source_ids.is_empty() || self.live(&query.namespace)? == 0 {
            return submem_core::substrate::read_then_trace(self, query, source_ids).await;
        }
        query.validate()?;
        let vector = embed_query(&self.services, query, METHOD).await?;
        let ranked =
            self.rank_with_vector(&query.namespace, &vector, depth.candidates(query.top_k))?;
        Ok(depth.show_traced(ranked, query, &*self.services.tokens, source_ids))
    }

    #[tracing::instrument(name = "m1.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let spaces: Vec<_> = self.spaces.read().values().cloned().collect();
        let mut changed = 0;
        for space in spaces {
            let mut ns = spaces::write(&space);
            if ns.needs_compaction(&self.config) {
                changed += ns.compact(&self.config);
            }
        }
        Ok(ManageReport { changed })
    }

    fn footprint(&self) -> Footprint {
        self.spaces.footprint(|_, space| {
            let ns = spaces::read(space);
            Footprint::verbatim(ns.stored_tokens(), ns.memory_bytes(&self.config))
        })
    }

    #[tracing::instrument(name = "m1.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let spaces: Vec<_> = self
            .spaces
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let bytes = persist::save(dir, self.dim, &self.embedder_name(), &spaces)?;
        self.spaces.set_disk_bytes(bytes);
        Ok(())
    }

    #[tracing::instrument(name = "m1.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        let (loaded, bytes) = persist::load(dir, self.dim, &self.embedder_name())?;
        let loaded: HashMap<Namespace, Space> = loaded
            .into_iter()
            .map(|(k, v)| (k, Arc::new(RwLock::new(v))))
            .collect();
        *self.spaces.write() = loaded;
        self.spaces.set_disk_bytes(bytes);
        Ok(())
    }

    #[tracing::instrument(name = "m1.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        match target {
            Forget::Namespace(ns) => {
                let removed = self.spaces.write().remove(ns);
                match removed {
                    Some(space) => Ok(spaces::read(&space).live()),
                    None => Ok(0),
                }
            }
            Forget::Sources {
                namespace,
                source_ids,
            } => match self.space(namespace) {
                Some(space) => Ok(spaces::write(&space).forget(source_ids)),
                None => Ok(0),
            },
        }
    }
}
