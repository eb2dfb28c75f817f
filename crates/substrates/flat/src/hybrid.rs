//! Hybrid: reciprocal-rank fusion of M1's dense ranking and M2's BM25 ranking
//! over the same flat store of turns.
//!
//! Dense retrieval finds paraphrases and misses rare names; BM25 finds names,
//! dates and numbers and misses paraphrases. Reciprocal-rank fusion (Cormack,
//! Clarke and Büttcher, SIGIR 2009) scores each unit by `Σ 1 / (k + rank)`
//! over the rankings it appears in (rank 1-based, `k` = 60), which needs no
//! score calibration between the two. Measured with plain Python peers on
//! nine LoCoMo conversations, packing the fused ranking shows more whole
//! evidence turns than packing either ranking alone at every budget.
//!
//! **Write**: every event goes to a [`DenseMemory`] and a [`SparseMemory`]
//! (the dense write first: it embeds, and it stores nothing when the batch is
//! bad; a failed BM25 write takes the dense units back out). **Read**: one
//! query embedding, both rankings to [`HybridConfig::pool`] units, fused,
//! then the top-k (or, with [`ReadDepth::fill`], as many as the budget holds)
//! rendered in time order. **Persist**: the two stores in `dense/` and
//! `sparse/`, then this substrate's manifest.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, MethodId, Namespace, Query, ReadTrace,
    Recall, Result, Services, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::persist::{begin_persist, check_manifest, write_manifest};
use submem_kit::RankedUnit;

use crate::error::FlatError;
use crate::{DenseConfig, DenseMemory, ReadDepth, SparseConfig, SparseMemory};
use submem_kit::spaces;
use submem_kit::text::StopWords;

/// The method id of the hybrid substrate.
pub const HYBRID: MethodId = MethodId::from_static("Hybrid");
/// Method name used in errors.
const METHOD: &str = "Hybrid";
const MANIFEST_NAME: &str = "hybrid rrf";
const FORMAT_VERSION: u32 = 1;
const DENSE_DIR: &str = "dense";
const SPARSE_DIR: &str = "sparse";
/// The fusion constant of Cormack et al. (2009), also rank_bm25 and
/// Elasticsearch's default.
pub const DEFAULT_RRF_K: f32 = 60.0;
/// Units each ranking contributes to a top-k read.
pub const DEFAULT_POOL: usize = 100;

/// Settings of [`HybridMemory`], and of the `hybrid` and `hybrid-fill`
/// plugins: every field but [`HybridConfig::dense`] and
/// [`HybridConfig::sparse`] is a setting under its serde name
/// (`hybrid:pool=200,rrf_k=30`), listed by `submem substrates` with the
/// first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HybridConfig {
    /// The dense side (its `fill` and `candidates` are ignored: the hybrid
    /// reads its ranking). Not a setting of the plugins: they use
    /// [`DenseConfig::default`].
    #[serde(skip)]
    pub dense: DenseConfig,
    /// The BM25 side (its `fill` and `candidates` are ignored likewise, and
    /// its stop words are [`HybridConfig::stop_words`]). Not a setting of the
    /// plugins: they use [`SparseConfig::default`].
    #[serde(skip)]
    pub sparse: SparseConfig,
    /// The fusion constant k of 1 / (k + rank). Larger flattens the
    /// advantage of the first ranks. Default [`DEFAULT_RRF_K`].
    pub rrf_k: f32,
    /// Turns each ranking contributes to a top-k read. At least the query's
    /// top-k is taken; a fill read takes `candidates` instead. Default [`DEFAULT_POOL`].
    pub pool: usize,
    /// Stop words of the BM25 side: `english`, `lucene` or `none`. Default
    /// [`StopWords::English`] (see [`SparseConfig::stop_words`]); it replaces
    /// the stop words of [`HybridConfig::sparse`]. Its setting is
    /// `stopwords`.
    #[serde(rename = "stopwords")]
    pub stop_words: StopWords,
    /// Show ranked turns until the budget is spent instead of the top-k.
    /// Off by default (the `hybrid-fill` plugin turns it on). With
    /// `candidates` it makes [`HybridConfig::depth`].
    pub fill: bool,
    /// Most turns a fill read ranks on each side (fill reads only; unset:
    /// 2,048). A bound on read cost
    /// ([`crate::fill::DEFAULT_FILL_CANDIDATES`] when unset); set without
    /// [`HybridConfig::fill`] it is refused.
    pub candidates: Option<usize>,
}

impl Default for HybridConfig {
    fn default() -> Self {
        let sparse = SparseConfig::default();
        HybridConfig {
            dense: DenseConfig::default(),
            stop_words: sparse.stop_words,
            sparse,
            rrf_k: DEFAULT_RRF_K,
            pool: DEFAULT_POOL,
            fill: false,
            candidates: None,
        }
    }
}

submem_kit::setters!(HybridConfig {
    with_fill => fill: bool,
    with_candidates => candidates: Option<usize>,
    with_pool => pool: usize,
    with_stop_words => stop_words: StopWords,
    with_rrf_k => rrf_k: f32,
});

crate::fill::depth_settings!(HybridConfig);

impl HybridConfig {
    /// The dense side's config: [`HybridConfig::dense`] reading top-k.
    fn dense_side(&self) -> DenseConfig {
        self.dense.clone().with_depth(ReadDepth::TopK)
    }

    /// The BM25 side's config: [`HybridConfig::sparse`] with
    /// [`HybridConfig::stop_words`], reading top-k.
    fn sparse_side(&self) -> SparseConfig {
        self.sparse
            .clone()
            .with_stop_words(self.stop_words)
            .with_depth(ReadDepth::TopK)
    }

    pub(crate) fn validate(&self) -> std::result::Result<(), FlatError> {
        ReadDepth::check_settings(self.fill, self.candidates).map_err(FlatError::Config)?;
        if !(self.rrf_k.is_finite() && self.rrf_k >= 0.0) {
            return Err(FlatError::Config(format!(
                "rrf_k must be a finite number ≥ 0, got {}",
                self.rrf_k
            )));
        }
        if self.pool == 0 {
            return Err(FlatError::Config("pool must be at least 1".into()));
        }
        Ok(())
    }

    fn candidates(&self, top_k: usize) -> usize {
        match self.depth() {
            ReadDepth::TopK => self.pool.max(top_k),
            fill => fill.candidates(top_k),
        }
    }
}

/// Fuses rankings (each best first, with its units' token counts) by
/// reciprocal rank: `Σ 1 / (k + rank)`, rank 1-based. Ties keep the unit
/// that ranked first in the earlier ranking.
pub fn reciprocal_rank_fusion(
    rankings: &[Vec<(RankedUnit, u32)>],
    k: f32,
) -> Vec<(RankedUnit, u32)> {
    let mut fused: Vec<(RankedUnit, u32)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for ranking in rankings {
        for (rank, (unit, tokens)) in ranking.iter().enumerate() {
            let add = 1.0 / (k + rank as f32 + 1.0);
            match at.get(&unit.source_id) {
                Some(&i) => fused[i].0.score += add,
                None => {
                    at.insert(unit.source_id.clone(), fused.len());
                    let mut unit = unit.clone();
                    unit.score = add;
                    fused.push((unit, *tokens));
                }
            }
        }
    }
    // Stable: equal scores keep first-seen order.
    fused.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
    fused
}

/// Dense and BM25 rankings of the same turns, fused by reciprocal rank.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> submem_core::Result<()> {
/// use submem_core::{test_utils::test_services, Event, Namespace, Query, Substrate, Turn};
/// use submem_flat::{HybridConfig, HybridMemory};
/// let memory = HybridMemory::new(test_services(None), HybridConfig::default())?;
/// let ns = Namespace::new("alice")?;
/// let turn = |id: &str, text: &str| Event::Turn(Turn {
///     session_id: "s1".into(), session_date: None, speaker: "Alice".into(),
///     text: text.into(), source_id: id.into(),
/// });
/// memory.write(&ns, &[turn("D1:1", "I parked on level 3."), turn("D1:2", "Lunch was great.")]).await?;
/// let recall = memory.read(&Query::question(ns, "Where did I park?", 4096).with_top_k(1)).await?;
/// assert_eq!(recall.source_ids().collect::<Vec<_>>(), vec!["D1:1"]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HybridMemory {
    services: Services,
    config: HybridConfig,
    /// Swapped whole by `restore`, so a torn half never replaces a good one.
    halves: RwLock<Arc<Halves>>,
}

#[derive(Debug)]
struct Halves {
    dense: DenseMemory,
    sparse: SparseMemory,
}

impl Halves {
    fn new(services: &Services, config: &HybridConfig) -> Result<Self> {
        Ok(Halves {
            dense: DenseMemory::new(services.clone(), config.dense_side())?,
            sparse: SparseMemory::new(services.clone(), config.sparse_side())?,
        })
    }
}

impl HybridMemory {
    /// A new, empty hybrid memory; embeds with `services.embedder`.
    pub fn new(services: Services, config: HybridConfig) -> Result<Self> {
        Self::check(&config)?;
        let halves = Halves::new(&services, &config)?;
        Ok(HybridMemory {
            services,
            config,
            halves: RwLock::new(Arc::new(halves)),
        })
    }

    fn halves(&self) -> Result<Arc<Halves>> {
        Ok(spaces::read(&self.halves).clone())
    }

    /// Checks `config` as [`HybridMemory::new`] would.
    pub fn check(config: &HybridConfig) -> Result<()> {
        config
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }

    /// The settings in use.
    pub fn config(&self) -> &HybridConfig {
        &self.config
    }

    /// The fused ranking of `query` with a query vector already embedded.
    pub(crate) fn fused(&self, query: &Query, vector: &[f32]) -> Result<Vec<(RankedUnit, u32)>> {
        let n = self.config.candidates(query.top_k);
        let halves = self.halves()?;
        let dense = halves.dense.rank_with_vector(&query.namespace, vector, n)?;
        let sparse = halves
            .sparse
            .rank(&query.namespace, &query.retrieval_text(), n)?;
        Ok(reciprocal_rank_fusion(&[dense, sparse], self.config.rrf_k))
    }

    /// Reads with a query vector already embedded (callers that embed once
    /// for several rankings).
    pub fn read_with_vector(&self, query: &Query, vector: &[f32]) -> Result<Recall> {
        query.validate()?;
        let mut fused = self.fused(query, vector)?;
        if !self.config.depth().is_fill() {
            fused.truncate(query.top_k);
        }
        Ok(self
            .config
            .depth()
            .show(fused, query, &*self.services.tokens))
    }
}

#[async_trait]
impl Substrate for HybridMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(
            HYBRID,
            Family::FLAT,
            self.config.depth().substrate_name("hybrid-rrf"),
        )
    }

    #[tracing::instrument(name = "hybrid.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        let halves = self.halves()?;
        let report = halves.dense.write(namespace, events).await?;
        if let Err(e) = halves.sparse.write(namespace, events).await {
            let ids = events.iter().map(|e| e.source_id().to_string()).collect();
            let undo = Forget::Sources {
                namespace: namespace.clone(),
                source_ids: ids,
            };
            if let Err(undo_error) = halves.dense.forget(&undo).await {
                tracing::error!(%undo_error, "could not take back the dense half of a failed write");
            }
            return Err(e);
        }
        Ok(report)
    }

    #[tracing::instrument(name = "hybrid.read", skip_all, fields(ns = %query.namespace, k = query.top_k))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        if self.halves()?.dense.live(&query.namespace)? == 0 {
            return Ok(Recall::empty());
        }
        let vector = crate::dense::embed_query(&self.services, query, METHOD).await?;
        self.read_with_vector(query, &vector)
    }

    async fn manage(&self) -> Result<ManageReport> {
        self.halves()?.dense.manage().await
    }

    /// The fused ranking the read packs, as deep as the read fuses (a deeper
    /// fusion would rank differently, so an event below that depth is "never
    /// ranked"): [`crate::fill::ReadDepth::trace`].
    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        query.validate()?;
        let fused = if self.halves()?.dense.live(&query.namespace)? == 0 {
            Vec::new()
        } else {
            let vector = crate::dense::embed_query(&self.services, query, METHOD).await?;
            self.fused(query, &vector)?
        };
        Ok(Some(self.config.depth().trace(
            &fused,
            query,
            &*self.services.tokens,
            source_ids,
        )))
    }

    /// One fusion for both: the trace is the read's own fused ranking.
    async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<ReadTrace>)> {
        if source_ids.is_empty() || self.halves()?.dense.live(&query.namespace)? == 0 {
            return submem_core::substrate::read_then_trace(self, query, source_ids).await;
        }
        query.validate()?;
        let vector = crate::dense::embed_query(&self.services, query, METHOD).await?;
        let fused = self.fused(query, &vector)?;
        let depth = self.config.depth();
        let trace = depth.trace(&fused, query, &*self.services.tokens, source_ids);
        let mut shown = fused;
        if !depth.is_fill() {
            shown.truncate(query.top_k);
        }
        Ok((
            depth.show(shown, query, &*self.services.tokens),
            Some(trace),
        ))
    }

    fn footprint(&self) -> Footprint {
        let Ok(halves) = self.halves() else {
            return Footprint::default();
        };
        let d = halves.dense.footprint();
        let s = halves.sparse.footprint();
        Footprint {
            memory_bytes: d.memory_bytes + s.memory_bytes,
            disk_bytes: d.disk_bytes + s.disk_bytes,
            // The same turns, stored twice: count them once.
            stored_tokens: d.stored_tokens,
            input_tokens: d.input_tokens,
        }
    }

    #[tracing::instrument(name = "hybrid.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let halves = self.halves()?;
        begin_persist(dir)?;
        halves.dense.persist(&dir.join(DENSE_DIR)).await?;
        halves.sparse.persist(&dir.join(SPARSE_DIR)).await?;
        write_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)
    }

    #[tracing::instrument(name = "hybrid.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        check_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
        // Restore into fresh halves, then swap: a torn half leaves this
        // instance as it was.
        let fresh = Halves::new(&self.services, &self.config)?;
        fresh.dense.restore(&dir.join(DENSE_DIR)).await?;
        fresh.sparse.restore(&dir.join(SPARSE_DIR)).await?;
        *spaces::write(&self.halves) = Arc::new(fresh);
        Ok(())
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        let halves = self.halves()?;
        let dense = halves.dense.forget(target).await?;
        let sparse = halves.sparse.forget(target).await?;
        Ok(dense.max(sparse))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(id: &str) -> (RankedUnit, u32) {
        (
            RankedUnit {
                position: 0,
                source_id: id.into(),
                text: String::new(),
                score: 9.0,
            },
            1,
        )
    }

    #[test]
    fn fusion_adds_reciprocal_ranks() {
        let a = vec![unit("x"), unit("y"), unit("z")];
        let b = vec![unit("z"), unit("w")];
        let fused = reciprocal_rank_fusion(&[a, b], 60.0);
        let ids: Vec<&str> = fused.iter().map(|(u, _)| u.source_id.as_str()).collect();
        // z: 1/63 + 1/61 beats x: 1/61; y: 1/62 ties w: 1/62 and keeps first-seen order.
        assert_eq!(ids, vec!["z", "x", "y", "w"]);
        let z = &fused[0].0;
        assert!((z.score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert!(reciprocal_rank_fusion(&[], 60.0).is_empty());
    }

    #[test]
    fn config_validation() {
        assert!(HybridConfig::default().validate().is_ok());
        assert!(HybridConfig::default().with_rrf_k(-1.0).validate().is_err());
        assert!(HybridConfig::default()
            .with_rrf_k(f32::NAN)
            .validate()
            .is_err());
        let c = HybridConfig {
            pool: 0,
            ..HybridConfig::default()
        };
        assert!(c.validate().is_err());
        assert_eq!(HybridConfig::default().candidates(10), DEFAULT_POOL);
        assert_eq!(
            HybridConfig::default()
                .with_depth(ReadDepth::fill())
                .candidates(10),
            crate::fill::DEFAULT_FILL_CANDIDATES
        );
    }
}
