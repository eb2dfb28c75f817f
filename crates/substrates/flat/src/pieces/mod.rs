//! Piece retrieval (*FlexA-Mem*'s strongest simple baseline): every event is
//! cut into pieces of at most κ tokens ([`submem_kit::pieces`], the cuts
//! FlexA-Mem's excerpts use), the pieces are ranked against the query and
//! packed into the allowance, and the chosen pieces are shown grouped by
//! event in time order, verbatim, with marks where an event's text is left
//! out. No memory is written and no LLM is called.
//!
//! Three rankings: BM25 over the pieces (`m2-pieces`, the paper's piece
//! retrieval; M2's tantivy index and analyser), dense cosine (`m1-pieces`,
//! M1's store of MiniLM vectors) and their reciprocal-rank fusion
//! (`hybrid-pieces`). A turn no longer than κ is one piece, so on short
//! turns these read like the `*-fill` packings; they differ where turns are
//! long (LongMemEval's assistant turns, agent outputs), and there one
//! event's best pieces can be shown without the rest of it.
//!
//! A recall lists an event as [`Resolution::Raw`](submem_core::Resolution)
//! when every one of its pieces is shown (its text is then exactly the
//! event's) and as `Excerpt` otherwise.
//!
//! ## Deviations from the paper
//! - BM25 ties keep tantivy's order (as in `m2-fill`), not the cosine
//!   tie-break: the BM25 variant embeds nothing.
//! - Pieces are ranked up to [`PieceConfig::candidates`] per read.

mod pack;
mod store;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, MethodId, Namespace, Query, Recall,
    Result, Services, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::persist::begin_persist;
use submem_kit::state::StateFile;
use submem_kit::text::StopWords;

use crate::dense::embed_query;
use crate::hybrid::{reciprocal_rank_fusion, DEFAULT_RRF_K};
use crate::{DenseConfig, DenseMemory, ReadDepth, SparseConfig, SparseMemory};
use store::{CutEvent, PieceSpace};
use submem_kit::spaces;

/// The method id of the piece-retrieval baselines.
pub const PIECES: MethodId = MethodId::from_static("Pieces");
const METHOD: &str = "Pieces";
const FORMAT_VERSION: u32 = 1;
const DENSE_DIR: &str = "dense";
const SPARSE_DIR: &str = "sparse";
const STATE_FILE: &str = "pieces.json";
/// κ: FlexA-Mem's default piece length, so the baseline and FlexA-Mem's
/// excerpts cut the same pieces.
pub const DEFAULT_PIECE_TOKENS: usize = 64;
/// Pieces ranked per read: 64-token pieces fill a 32k budget many times over.
pub const DEFAULT_PIECE_CANDIDATES: usize = 2_048;

/// How pieces are ranked against the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PieceRanking {
    /// BM25 (M2's index and analyser).
    Bm25,
    /// Cosine of MiniLM embeddings (M1's store).
    Dense,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

impl PieceRanking {
    fn uses_dense(self) -> bool {
        matches!(self, PieceRanking::Dense | PieceRanking::Hybrid)
    }

    fn uses_sparse(self) -> bool {
        matches!(self, PieceRanking::Bm25 | PieceRanking::Hybrid)
    }

    /// The substrate's name for this ranking.
    pub fn substrate_name(self) -> &'static str {
        match self {
            PieceRanking::Bm25 => "pieces-bm25",
            PieceRanking::Dense => "pieces-dense",
            PieceRanking::Hybrid => "pieces-hybrid",
        }
    }

    /// The persisted store's manifest (a store of one ranking is refused by
    /// another: their indexes differ).
    fn state_file(self) -> StateFile {
        match self {
            PieceRanking::Bm25 => StateFile::new("pieces bm25", FORMAT_VERSION, STATE_FILE),
            PieceRanking::Dense => StateFile::new("pieces dense", FORMAT_VERSION, STATE_FILE),
            PieceRanking::Hybrid => StateFile::new("pieces hybrid", FORMAT_VERSION, STATE_FILE),
        }
    }
}

/// Settings of [`PieceMemory`], and of the `m2-pieces`, `m1-pieces` and
/// `hybrid-pieces` plugins: every field but [`PieceConfig::ranking`],
/// [`PieceConfig::dense`] and [`PieceConfig::sparse`] is a setting under its
/// serde name (`m2-pieces:piece_tokens=32`), listed by `submem substrates`
/// with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PieceConfig {
    /// How pieces are ranked. Not a setting: each plugin's name says it
    /// (default [`PieceRanking::Bm25`], the paper's piece retrieval).
    #[serde(skip)]
    pub ranking: PieceRanking,
    /// κ: the most tokens in one piece. Default [`DEFAULT_PIECE_TOKENS`],
    /// FlexA-Mem's, so both cut the same pieces.
    pub piece_tokens: usize,
    /// Most pieces ranked per read. Default [`DEFAULT_PIECE_CANDIDATES`].
    pub candidates: usize,
    /// The dense store (its `fill` and `candidates` are ignored). Not a
    /// setting of the plugins: they use [`DenseConfig::default`].
    #[serde(skip)]
    pub dense: DenseConfig,
    /// The BM25 index (its `fill` and `candidates` are ignored, and its stop
    /// words are [`PieceConfig::stop_words`]). Not a setting of the plugins:
    /// they use [`SparseConfig::default`].
    #[serde(skip)]
    pub sparse: SparseConfig,
    /// Stop words of the BM25 ranking: `english`, `lucene` or `none`.
    /// Default [`StopWords::English`] (see [`SparseConfig::stop_words`]); it
    /// replaces the stop words of [`PieceConfig::sparse`]. Its setting is
    /// `stopwords`.
    #[serde(rename = "stopwords")]
    pub stop_words: StopWords,
    /// The fusion constant k of 1 / (k + rank) (hybrid ranking only).
    /// Default [`DEFAULT_RRF_K`].
    pub rrf_k: f32,
}

impl Default for PieceConfig {
    /// The defaults of BM25 ranking.
    fn default() -> Self {
        PieceConfig::new(PieceRanking::Bm25)
    }
}

submem_kit::setters!(PieceConfig {
    with_ranking => ranking: PieceRanking,
    with_stop_words => stop_words: StopWords,
});

impl PieceConfig {
    /// The defaults for `ranking`.
    pub fn new(ranking: PieceRanking) -> Self {
        let sparse = SparseConfig::default();
        PieceConfig {
            ranking,
            piece_tokens: DEFAULT_PIECE_TOKENS,
            candidates: DEFAULT_PIECE_CANDIDATES,
            dense: DenseConfig::default(),
            stop_words: sparse.stop_words,
            sparse,
            rrf_k: DEFAULT_RRF_K,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidInput(m.to_string()));
        if self.piece_tokens == 0 {
            return bad("piece_tokens (κ) must be at least 1");
        }
        if self.candidates == 0 {
            return bad("candidates must be at least 1");
        }
        if !(self.rrf_k.is_finite() && self.rrf_k >= 0.0) {
            return bad("rrf_k must be a finite number ≥ 0");
        }
        Ok(())
    }
}

/// Pieces of every event ranked by BM25, dense cosine or both, packed into
/// the allowance and shown grouped by event in time order.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> submem_core::Result<()> {
/// use submem_core::{test_utils::test_services, Event, Namespace, Query, Substrate, Turn};
/// use submem_flat::{PieceConfig, PieceMemory, PieceRanking};
/// let memory = PieceMemory::new(test_services(None), PieceConfig::new(PieceRanking::Bm25))?;
/// let ns = Namespace::new("alice")?;
/// let turn = |id: &str, text: &str| Event::Turn(Turn {
///     session_id: "s1".into(), session_date: None, speaker: "Alice".into(),
///     text: text.into(), source_id: id.into(),
/// });
/// memory.write(&ns, &[turn("D1:1", "I parked on level 3."), turn("D1:2", "Lunch was great.")]).await?;
/// let recall = memory.read(&Query::question(ns, "Which level did I park on?", 4096)).await?;
/// assert_eq!(recall.source_ids().collect::<Vec<_>>(), vec!["D1:1"]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PieceMemory {
    services: Services,
    config: PieceConfig,
    /// Swapped whole by `restore`, so a torn store never replaces a good one.
    inner: RwLock<Arc<Inner>>,
    disk_bytes: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    dense: Option<DenseMemory>,
    sparse: Option<SparseMemory>,
    spaces: RwLock<HashMap<Namespace, PieceSpace>>,
}

impl Inner {
    fn new(services: &Services, config: &PieceConfig) -> Result<Self> {
        let ranking = config.ranking;
        Ok(Inner {
            dense: ranking
                .uses_dense()
                .then(|| {
                    DenseMemory::new(
                        services.clone(),
                        config.dense.clone().with_depth(ReadDepth::TopK),
                    )
                })
                .transpose()?,
            sparse: ranking
                .uses_sparse()
                .then(|| {
                    SparseMemory::new(
                        services.clone(),
                        config
                            .sparse
                            .clone()
                            .with_stop_words(config.stop_words)
                            .with_depth(ReadDepth::TopK),
                    )
                })
                .transpose()?,
            spaces: RwLock::default(),
        })
    }

    fn has_events(&self, ns: &Namespace) -> Result<bool> {
        Ok(spaces::read(&self.spaces)
            .get(ns)
            .is_some_and(|s| !s.events.is_empty()))
    }
}

impl PieceMemory {
    /// A new, empty piece memory; embeds with `services.embedder` unless the
    /// ranking is BM25.
    pub fn new(services: Services, config: PieceConfig) -> Result<Self> {
        config.validate()?;
        let inner = Inner::new(&services, &config)?;
        Ok(PieceMemory {
            services,
            config,
            inner: RwLock::new(Arc::new(inner)),
            disk_bytes: AtomicU64::new(0),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &PieceConfig {
        &self.config
    }

    fn inner(&self) -> Result<Arc<Inner>> {
        Ok(spaces::read(&self.inner).clone())
    }

    /// The pieces of `query`'s namespace ranked best first, each with its
    /// cached token count.
    async fn rank(
        &self,
        inner: &Inner,
        query: &Query,
    ) -> Result<Vec<(submem_kit::RankedUnit, u32)>> {
        let n = self.config.candidates;
        let ns = &query.namespace;
        let sparse = match &inner.sparse {
            Some(s) => Some(s.rank(ns, &query.retrieval_text(), n)?),
            None => None,
        };
        let dense = match &inner.dense {
            Some(d) => {
                let vector = embed_query(&self.services, query, METHOD).await?;
                Some(d.rank_with_vector(ns, &vector, n)?)
            }
            None => None,
        };
        Ok(match (dense, sparse) {
            (Some(d), Some(s)) => reciprocal_rank_fusion(&[d, s], self.config.rrf_k),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => Vec::new(),
        })
    }
}

#[async_trait]
impl Substrate for PieceMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(PIECES, Family::FLAT, self.config.ranking.substrate_name())
    }

    #[tracing::instrument(name = "pieces.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let inner = self.inner()?;
        {
            let spaces = spaces::read(&inner.spaces);
            let stored = spaces.get(namespace);
            check_new_sources(events, |id| {
                stored.is_some_and(|s| s.events.contains_key(id))
            })?;
        }
        let tokens = &*self.services.tokens;
        let cut: Vec<(String, CutEvent)> = events
            .iter()
            .map(|e| {
                let id = e.source_id().to_string();
                (id, CutEvent::cut(e, 0, self.config.piece_tokens, tokens))
            })
            .collect();
        let units: Vec<_> = cut.iter().flat_map(|(id, e)| e.units(id)).collect();
        let stored_units = units.len();
        // The dense store first: it embeds, and stores nothing when that
        // fails; a failed BM25 write takes the dense pieces back out.
        if let Some(dense) = &inner.dense {
            dense.write_units(namespace, units.clone()).await?;
        }
        if let Some(sparse) = &inner.sparse {
            let ids: Vec<String> = units.iter().map(|u| u.source_id.clone()).collect();
            if let Err(e) = sparse.write_units(namespace, units) {
                if let Some(dense) = &inner.dense {
                    let undo = Forget::Sources {
                        namespace: namespace.clone(),
                        source_ids: ids,
                    };
                    if let Err(undo_error) = dense.forget(&undo).await {
                        tracing::error!(%undo_error, "could not take back the dense pieces of a failed write");
                    }
                }
                return Err(e);
            }
        }
        let mut spaces = spaces::write(&inner.spaces);
        let space = spaces.entry(namespace.clone()).or_default();
        for (id, mut event) in cut {
            event.position = space.next_position;
            space.next_position += 1;
            space.events.insert(id, event);
        }
        Ok(WriteReport {
            events: events.len(),
            units: stored_units,
        })
    }

    #[tracing::instrument(name = "pieces.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let inner = self.inner()?;
        if !inner.has_events(&query.namespace)? {
            return Ok(Recall::empty());
        }
        let ranked = self.rank(&inner, query).await?;
        let spaces = spaces::read(&inner.spaces);
        let Some(space) = spaces.get(&query.namespace) else {
            return Ok(Recall::empty());
        };
        Ok(pack::pack(
            &ranked,
            &space.events,
            &*self.services.tokens,
            query.allowance(),
        ))
    }

    async fn manage(&self) -> Result<ManageReport> {
        match &self.inner()?.dense {
            Some(dense) => dense.manage().await,
            None => Ok(ManageReport::default()),
        }
    }

    fn footprint(&self) -> Footprint {
        let Ok(inner) = self.inner() else {
            return Footprint::default();
        };
        let mut fp = Footprint {
            disk_bytes: self.disk_bytes.load(Ordering::Relaxed),
            ..Footprint::default()
        };
        let stores = [
            inner.dense.as_ref().map(|d| d.footprint()),
            inner.sparse.as_ref().map(|s| s.footprint()),
        ];
        for f in stores.into_iter().flatten() {
            fp.memory_bytes += f.memory_bytes;
            fp.disk_bytes += f.disk_bytes;
        }
        for space in spaces::read(&inner.spaces).values() {
            fp.memory_bytes += space.heap_bytes();
            fp.stored_tokens += space.stored_tokens();
        }
        fp.input_tokens = fp.stored_tokens;
        fp
    }

    #[tracing::instrument(name = "pieces.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let inner = self.inner()?;
        begin_persist(dir)?;
        if let Some(dense) = &inner.dense {
            dense.persist(&dir.join(DENSE_DIR)).await?;
        }
        if let Some(sparse) = &inner.sparse {
            sparse.persist(&dir.join(SPARSE_DIR)).await?;
        }
        let spaces = spaces::read(&inner.spaces);
        // Writes the manifest last.
        self.config
            .ranking
            .state_file()
            .save(dir, None, spaces, &self.disk_bytes)
    }

    #[tracing::instrument(name = "pieces.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        let (spaces, bytes): (HashMap<Namespace, PieceSpace>, u64) = self
            .config
            .ranking
            .state_file()
            .load(dir, None, |_, space: &mut PieceSpace| space.check())?;
        // Restore into a fresh store, then swap: a torn part leaves this
        // instance as it was.
        let fresh = Inner::new(&self.services, &self.config)?;
        if let Some(dense) = &fresh.dense {
            dense.restore(&dir.join(DENSE_DIR)).await?;
        }
        if let Some(sparse) = &fresh.sparse {
            sparse.restore(&dir.join(SPARSE_DIR)).await?;
        }
        *spaces::write(&fresh.spaces) = spaces;
        *spaces::write(&self.inner) = Arc::new(fresh);
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        let inner = self.inner()?;
        // The indexes first: if one fails, the events are still listed and
        // the same forget can be asked again.
        let (namespace, inner_target, ids) = {
            let spaces = spaces::read(&inner.spaces);
            match target {
                Forget::Namespace(ns) => (ns, target.clone(), None),
                Forget::Sources {
                    namespace,
                    source_ids,
                } => {
                    let space = spaces.get(namespace);
                    let known: Vec<String> = source_ids
                        .iter()
                        .filter(|id| space.is_some_and(|s| s.events.contains_key(*id)))
                        .cloned()
                        .collect();
                    let pieces = known
                        .iter()
                        .filter_map(|id| space?.events.get(id).map(|e| e.piece_ids(id)))
                        .flatten()
                        .collect();
                    let inner_target = Forget::Sources {
                        namespace: namespace.clone(),
                        source_ids: pieces,
                    };
                    (namespace, inner_target, Some(known))
                }
            }
        };
        if let Some(dense) = &inner.dense {
            dense.forget(&inner_target).await?;
        }
        if let Some(sparse) = &inner.sparse {
            sparse.forget(&inner_target).await?;
        }
        let mut spaces = spaces::write(&inner.spaces);
        Ok(match ids {
            None => spaces.remove(namespace).map_or(0, |s| s.events.len()),
            Some(ids) => match spaces.get_mut(namespace) {
                Some(space) => ids
                    .iter()
                    .filter(|id| space.events.remove(*id).is_some())
                    .count(),
                None => 0,
            },
        })
    }
}

#[cfg(test)]
mod tests;
