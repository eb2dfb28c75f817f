//! M11: episode-clustered re-prefill (*Harness the Memory* §M11, after
//! EpiCache, Kim et al. 2025).
//!
//! **Write.** Each event is stored verbatim ([`Event::render`]) with the
//! embedding of its content ([`Event::content`], through the injected
//! embedder, so the meter counts it as write).
//!
//! **Episodes** (re-derived lazily: on `manage`, or on the first read after a
//! write when `manage` was not called). Turns are cut into segments of
//! [`EpiCacheConfig::segment_turns`] consecutive turns of one session
//! (EpiCache's conversation windows of 4 utterances); a segment's point is the
//! normalised mean of its turns' vectors. k-means (linfa-clustering,
//! k-means++ with the library's fixed seed, [`EpiCacheConfig::kmeans_runs`]
//! restarts) groups the segments into [`EpiCacheConfig::episodes`] episodes
//! (default 4, EpiCache's LoCoMo setting; capped by the number of distinct
//! segments). Inside an episode every turn is scored by its **cosine to the
//! episode centroid**, and the most central turns are kept, whole and
//! verbatim, until they reach [`EpiCacheConfig::keep_ratio`] (25 %) of the
//! episode's tokens (the top turn is always kept; a turn that would overshoot
//! is skipped for a smaller one). The kept turns, in time order, are the
//! episode's text.
//!
//! **Read.** The query ([`Query::retrieval_text`]) is embedded and matched to
//! the nearest centroid (cosine); that episode's text is the recall. If it
//! does not fit [`Query::allowance`], its least central turns are dropped
//! until it does. [`Recall::sources`] lists the shown turns by their cosine to
//! the query (scores are that cosine), so Recall@k ranks them; the text stays
//! in time order. `top_k` is not used: M11 shows one episode.
//!
//! **KV reuse.** The substrate trait renders text, so the cache travels as a
//! capability rather than a dependency: `submem-core` defines the object-safe
//! [`submem_core::PrefixCaching`] / [`submem_core::PrefilledLlm`] pair,
//! reached through [`submem_core::Llm::prefix_caching`]; `submem-models`'
//! local SmolLM2 implements it with its `prefill` / `generate_with_prefix`.
//! This keeps `submem-kv` free of candle and lets every wrapper of the LLM
//! (the meter, the CLI's lazy loader) pass the capability through. On
//! `manage`, when the services' LLM offers it and [`EpiCacheConfig::kv_cache`]
//! is on, each episode is prefilled once under [`EpiCacheConfig::reader_head`]
//! (counted by the meter as one manage-phase LLM call per episode, input
//! tokens = the prefilled tokens). A read that renders an episode's whole text
//! returns its prefilled model as [`Recall::reader`]: a reader prompt that
//! starts with the same head then runs only the question and decodes (its
//! greedy answer equals a full re-prefill's). With a remote or absent LLM, or
//! when the episode had to be cut to the budget, no reader is attached and the
//! reader re-sends the episode's text — the Harness paper's deviation.
//! [`EpiCache::stats`] counts both paths.
//!
//! **Deviations.** EpiCache scores KV entries by the attention a medoid
//! "patched prompt" pays them and evicts inside the cache, with block-wise
//! prefill; here the score is embedding-derived (cosine to the centroid, the
//! embedding analogue of attending from the episode's medoid) and applies to
//! whole turns, so what the cache holds is exactly a text whose evidence
//! coverage can be measured. Like the Harness paper (whose backbone had no
//! kernel for in-place edits), the kept text is (re-)prefilled rather than
//! edited inside a full-history cache.
//!
//! **Persistence.** Turns, vectors (tagged with the embedder's name and
//! dimension) and episodes are saved; KV caches are not — they are
//! recomputed by the first `manage` after a restore (reads before that
//! re-send text). **Forget** removes the turns, re-derives only the episodes
//! that held them (segments, centroid, kept turns) and drops those episodes'
//! caches; the next `manage` prefills them again. **Footprint**: memory bytes
//! include the bytes of the KV caches held; stored tokens are all stored
//! turns (kept for re-clustering).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> submem_core::Result<()> {
//! use submem_core::{test_utils::test_services, Event, Namespace, Query, Substrate, Turn};
//! use submem_kv::{EpiCache, EpiCacheConfig};
//! // Test doubles: a hashing embedder, whitespace tokens, no LLM (text only).
//! let m11 = EpiCache::new(test_services(None), EpiCacheConfig::default().with_episodes(2))?;
//! let ns = Namespace::new("alice")?;
//! let turn = |i: usize, text: &str| Event::Turn(Turn {
//!     session_id: format!("s{}", i / 4), session_date: None, speaker: "A".into(),
//!     text: text.into(), source_id: format!("t{i}"),
//! });
//! let history: Vec<Event> = (0..8)
//!     .map(|i| turn(i, if i < 4 { "boat sail harbour wind" } else { "bread oven flour dough" }))
//!     .collect();
//! m11.write(&ns, &history).await?;
//! m11.manage().await?; // clusters; with a local LLM it would also prefill
//! let recall = m11.read(&Query::question(ns, "bread in the oven", 4096)).await?;
//! assert!(recall.text.contains("oven") && !recall.text.contains("boat"));
//! assert!(recall.reader.is_none()); // no prefix-caching model: the text is re-sent
//! # Ok(()) }
//! ```

mod cluster;
mod config;
mod store;

pub use config::{EpiCacheConfig, ReaderHead};

use async_trait::async_trait;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use submem_core::{
    cosine, Error, Event, Family, Footprint, Forget, ManageReport, Namespace, PrefilledLlm,
    PrefixReuse, Query, Recall, Resolution, Result, Services, SourceHit, Substrate, SubstrateInfo,
    WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::embed::embed_checked;
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;
use submem_kit::{render_in_time_order, PackPolicy, RankedUnit};

use crate::KvError;
use store::{Space, StoredTurn};

/// [`crate::M11`] as a string, for errors.
pub(crate) const METHOD: &str = "M11";
const MANIFEST_NAME: &str = "M11 episode-reprefill";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "episodes.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(MANIFEST_NAME, FORMAT_VERSION, STATE_FILE);

submem_kit::counters! {
    /// Counts of what M11 did since it was built.
    pub struct EpiCacheStats;
    struct Counters;
    {
        /// Namespaces re-clustered from scratch.
        reclusters,
        /// Episode KV caches prefilled.
        prefills,
        /// Prefills the model refused (e.g. an episode longer than its context);
        /// those episodes are re-sent as text.
        prefill_failures,
        /// Reads that returned a prefilled reader.
        cached_reads,
        /// Reads that returned text only (no cache held, or cut to the budget).
        text_reads,
    }
}

/// M11: episodes of the history, one rendered (and, with a local model,
/// served from its prefilled KV cache) per query. See the module docs.
pub struct EpiCache {
    services: Services,
    config: EpiCacheConfig,
    spaces: Spaces<Space>,
    counters: Counters,
}

submem_kit::debug_fields!(EpiCache { config });

impl EpiCache {
    /// A new, empty memory. Uses `services.embedder` and `services.tokens`;
    /// `services.llm` only for its prefix-caching capability.
    pub fn new(services: Services, config: EpiCacheConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(EpiCache {
            services,
            config,
            spaces: Spaces::new(),
            counters: Counters::default(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &EpiCacheConfig {
        &self.config
    }

    /// What happened so far.
    pub fn stats(&self) -> EpiCacheStats {
        self.counters.snapshot()
    }

    /// Source ids of each episode's kept turns (time order), episodes in
    /// order of their first segment; empty for an unknown namespace. Derives
    /// the episodes first when writes are pending.
    pub fn episodes(&self, namespace: &Namespace) -> Result<Vec<Vec<String>>> {
        self.ensure_clustered(namespace)?;
        let spaces = self.spaces.read();
        let Some(space) = spaces.get(namespace) else {
            return Ok(Vec::new());
        };
        Ok(space
            .episodes
            .iter()
            .map(|e| {
                e.kept
                    .iter()
                    .filter_map(|p| space.index_of(*p))
                    .map(|i| space.turns[i].source_id.clone())
                    .collect()
            })
            .collect())
    }

    /// Whether each episode of `namespace` holds a KV cache, in episode order.
    pub fn cached(&self, namespace: &Namespace) -> Result<Vec<bool>> {
        let spaces = self.spaces.read();
        Ok(spaces
            .get(namespace)
            .map(|s| s.episodes.iter().map(|e| e.cache.is_some()).collect())
            .unwrap_or_default())
    }

    /// Hits and misses of every KV cache held (requests that continued a
    /// cache, and those that had to run in full).
    pub fn cache_reuse(&self) -> Result<PrefixReuse> {
        let spaces = self.spaces.read();
        let mut total = PrefixReuse::default();
        for c in spaces
            .values()
            .flat_map(|s| s.episodes.iter().filter_map(|e| e.cache.as_ref()))
        {
            let r = c.reuse();
            total.hits += r.hits;
            total.misses += r.misses;
        }
        Ok(total)
    }

    fn recluster(&self, space: &mut Space, op: &'static str) -> Result<()> {
        space
            .recluster(&self.config, &*self.services.tokens)
            .map_err(|e| e.into_core(METHOD, op))?;
        self.counters.reclusters.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Re-clusters `namespace` if writes are pending (the lazy path).
    fn ensure_clustered(&self, namespace: &Namespace) -> Result<()> {
        let pending = self
            .spaces
            .read()
            .get(namespace)
            .is_some_and(|s| !s.clustered);
        if pending {
            let mut spaces = self.spaces.write();
            if let Some(space) = spaces.get_mut(namespace).filter(|s| !s.clustered) {
                self.recluster(space, "read")?;
            }
        }
        Ok(())
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        embed_checked(&*self.services.embedder, texts, self.config.embed_batch)
            .await
            .map_err(|e| {
                e.into_core(|shape| {
                    KvError::Embedding(shape.to_string()).into_core(METHOD, "embed")
                })
            })
    }

    /// Prefills every episode that has no cache; returns how many were built.
    async fn prefill_episodes(&self) -> Result<usize> {
        let Some(model) = self
            .services
            .llm
            .as_ref()
            .filter(|_| self.config.kv_cache)
            .and_then(|l| l.prefix_caching())
        else {
            return Ok(0);
        };
        let mut todo: Vec<(Namespace, String)> = {
            let spaces = self.spaces.read();
            spaces
                .iter()
                .flat_map(|(ns, s)| {
                    s.episodes
                        .iter()
                        .filter(|e| e.cache.is_none())
                        .map(move |e| (ns.clone(), e.text.clone()))
                })
                .collect()
        };
        todo.sort();
        todo.dedup();
        let mut built: Vec<(Namespace, String, Arc<dyn PrefilledLlm>)> = Vec::new();
        for (ns, text) in todo {
            match model
                .prefill(&self.config.reader_head.messages(&text))
                .await
            {
                Ok(cache) => {
                    self.counters.prefills.fetch_add(1, Ordering::Relaxed);
                    built.push((ns, text, cache));
                }
                Err(e) => {
                    self.counters
                        .prefill_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(ns = %ns, error = %e, "episode prefill failed; it will be re-sent as text");
                }
            }
        }
        let mut installed = 0;
        let mut spaces = self.spaces.write();
        for (ns, text, cache) in built {
            // The episode may have changed while the model ran.
            if let Some(space) = spaces.get_mut(&ns) {
                for e in space
                    .episodes
                    .iter_mut()
                    .filter(|e| e.cache.is_none() && e.text == text)
                {
                    e.cache = Some(cache.clone());
                    installed += 1;
                }
            }
        }
        Ok(installed)
    }
}

/// Whether a source id is already in `existing` (for [`check_new_sources`]).
fn stored_in(existing: Option<&Space>) -> impl Fn(&str) -> bool + '_ {
    move |id| existing.is_some_and(|s| s.ids.contains_key(id))
}

#[async_trait]
impl Substrate for EpiCache {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M11, Family::ACTIVATION, "episode-reprefill")
    }

    #[tracing::instrument(name = "m11.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        check_new_sources(events, stored_in(self.spaces.read().get(namespace)))?;
        let contents: Vec<String> = events.iter().map(Event::content).collect();
        let vectors = self.embed(&contents).await?;
        let turns: Vec<StoredTurn> = events
            .iter()
            .zip(vectors)
            .map(|(e, vector)| {
                let text = e.render();
                StoredTurn {
                    source_id: e.source_id().to_string(),
                    tokens: u32::try_from(self.services.tokens.count(&text)).unwrap_or(u32::MAX),
                    text,
                    group: match e {
                        Event::Turn(t) => t.session_id.clone(),
                        Event::Step(_) => String::new(),
                    },
                    position: 0,
                    vector,
                }
            })
            .collect();
        let mut spaces = self.spaces.write();
        // Another task may have written the same ids since validation.
        check_new_sources(events, stored_in(spaces.get(namespace)))?;
        let n = turns.len();
        spaces.entry(namespace.clone()).or_default().append(turns);
        Ok(WriteReport {
            events: n,
            units: n,
        })
    }

    #[tracing::instrument(name = "m11.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        if !self.spaces.read().contains_key(&query.namespace) {
            return Ok(Recall::empty());
        }
        self.ensure_clustered(&query.namespace)?;
        let q = self
            .embed(&[query.retrieval_text()])
            .await?
            .pop()
            .unwrap_or_default();
        let allowance = query.allowance();
        let spaces = self.spaces.read();
        let Some(space) = spaces.get(&query.namespace) else {
            return Ok(Recall::empty());
        };
        let Some(episode) = space.nearest(&q).map(|i| &space.episodes[i]) else {
            return Ok(Recall::empty());
        };
        let kept: Vec<&StoredTurn> = episode
            .kept
            .iter()
            .filter_map(|p| space.index_of(*p))
            .map(|i| &space.turns[i])
            .collect();
        let (text, tokens, shown, reader) = if episode.tokens <= allowance {
            let shown: Vec<&StoredTurn> = kept;
            (
                episode.text.clone(),
                episode.tokens,
                shown,
                episode.cache.clone().map(|c| c.into_llm()),
            )
        } else {
            // Cut to the budget: least central turns go first.
            let ranked: Vec<RankedUnit> = kept
                .iter()
                .map(|t| RankedUnit {
                    position: t.position,
                    source_id: t.source_id.clone(),
                    text: t.text.clone(),
                    score: cosine(&t.vector, &episode.centroid),
                })
                .collect();
            let mut ranked = ranked;
            ranked.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.position.cmp(&b.position))
            });
            let r = render_in_time_order(
                &ranked,
                &*self.services.tokens,
                allowance,
                PackPolicy::SkipUnfit,
            );
            let ids: std::collections::HashSet<&str> = r.source_ids().collect();
            let shown = kept
                .into_iter()
                .filter(|t| ids.contains(t.source_id.as_str()))
                .collect();
            (r.text, r.tokens, shown, None)
        };
        let counter = if reader.is_some() {
            &self.counters.cached_reads
        } else {
            &self.counters.text_reads
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut sources: Vec<SourceHit> = shown
            .iter()
            .map(|t| SourceHit {
                source_id: t.source_id.clone(),
                score: cosine(&q, &t.vector),
                resolution: Resolution::Raw,
            })
            .collect();
        sources.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(Recall {
            text,
            tokens,
            sources,
            reader,
        })
    }

    #[tracing::instrument(name = "m11.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let mut changed = 0;
        {
            let mut spaces = self.spaces.write();
            for space in spaces.values_mut().filter(|s| !s.clustered) {
                self.recluster(space, "manage")?;
                changed += space.episodes.len();
            }
        }
        changed += self.prefill_episodes().await?;
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        self.spaces
            .footprint(|_, s| Footprint::verbatim(s.tokens(), s.memory_bytes()))
    }

    #[tracing::instrument(name = "m11.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.spaces
            .save(&STATE, dir, Some(&*self.services.embedder))
    }

    #[tracing::instrument(name = "m11.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        let dim = self.services.embedder.dimension();
        self.spaces.restore(
            &STATE,
            dir,
            Some(&*self.services.embedder),
            |_, space: &mut Space| space.reindex(dim),
        )
    }

    #[tracing::instrument(name = "m11.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut spaces = self.spaces.write();
        Ok(match target {
            Forget::Namespace(ns) => spaces.remove(ns).map_or(0, |s| s.turns.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => spaces.get_mut(namespace).map_or(0, |s| {
                s.forget(source_ids, &self.config, &*self.services.tokens)
            }),
        })
    }
}
