//! # submem-raptor: M6, the hierarchical tree (RAPTOR)
//!
//! Follows *Harness the Memory*'s M6 (its Appendix B.1; our specification is
//! `docs/METHODS.md`)
//! and the RAPTOR paper it implements (Sarthi et al., ICLR 2024).
//!
//! - **Write.** Events are packed into leaves of about 100 tokens
//!   ([`RaptorConfig::leaf_tokens`]), cut at event (turn/step) boundaries and
//!   never across sessions; a leaf keeps its events' text verbatim and their
//!   source ids. Leaves are embedded at once. No LLM call.
//! - **Build** (on `manage`, or lazily on the first read after new writes —
//!   the harness calls `manage` after writing, so the cost lands in the
//!   manage phase): reduce the layer's embeddings to 10 dimensions, fit
//!   Gaussian mixtures with linfa, choose the component count by BIC, assign
//!   each node to every component with responsibility ≥ 0.1, re-cluster
//!   clusters that hold too many tokens, summarise each cluster with one LLM
//!   call, embed the summaries, and repeat on the summaries up to
//!   [`RaptorConfig::max_depth`] levels or until one cluster remains
//!   ([`cluster`], [`build`]).
//! - **Read.** Collapsed tree: a single dense top-k over the nodes of every
//!   level, then further down the ranking to fill the budget; summaries
//!   first, leaves verbatim in time order ([`read`]). No LLM call.
//! - **Manage.** Brings every namespace's tree up to date (incremental insert
//!   or full rebuild, see [`build`]), merges near-duplicate top-level
//!   summaries, and rewrites or removes superseded (stale) summaries.
//!
//! ## Deviations (and why)
//! - **PCA instead of UMAP** for the dimension reduction: no UMAP on the
//!   workspace's ndarray; PCA is linear and deterministic ([`cluster`]).
//! - **BIC is computed here** (linfa exposes no likelihood), on a sample of at
//!   most 400 points and a sparser grid of counts above 16 on large layers.
//! - **Incremental insert** instead of rebuilding on every new write (the
//!   reference rebuilds everything): new leaves join the nearest level-1
//!   centroid; only the summaries above them are rewritten; a full rebuild
//!   runs when the tree drifts (rules in [`build`]). Measured by the
//!   `incremental` bench.
//! - **No-LLM summariser**: with `--memory-llm none` (or
//!   [`SummarizerKind::Extractive`]) each summary is the cluster's most
//!   central sentences ([`summarize`]); `needs_llm` is false then. It is also
//!   the fallback for failed or unusable LLM replies.
//! - **"Decay of superseded summaries"** (the Harness paper's manage step) is
//!   realised as: a summary whose leaves changed is stale, never shown, and
//!   rewritten from its current children (or removed when none are left);
//!   old versions are not kept. There is no time-based decay of summaries
//!   whose leaves are unchanged.
//! - **Forget** removes the events from their leaves (emptied leaves go) and
//!   makes every summary above them stale, so forgotten text can never be
//!   shown through an old summary; they are rewritten on the next read or
//!   manage.
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_raptor::{Raptor, RaptorConfig};
//!
//! let m6 = Raptor::new(services, RaptorConfig::default())?;
//! let ns = Namespace::new("alice")?;
//! m6.write(&ns, &[Event::Turn(Turn {
//!     session_id: "s1".into(),
//!     session_date: Some("8 May 2023".into()),
//!     speaker: "Alice".into(),
//!     text: "My violin teacher is Ms Berg.".into(),
//!     source_id: "D1:1".into(),
//! })]).await?;
//! m6.manage().await?; // builds the tree
//! let recall = m6.read(&Query::question(ns, "Who teaches me violin?", 4096)).await?;
//! println!("{} tokens from {} sources", recall.tokens, recall.sources.len());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod build;
pub mod cluster;
mod config;
mod error;
pub mod factory;
pub mod read;
mod substrate;
pub mod summarize;
pub mod tree;

/// The method id of the RAPTOR tree (*Harness the Memory*, M6).
pub const M6: submem_core::MethodId = submem_core::MethodId::from_static("M6");

pub use build::RaptorStats;
pub use config::{RaptorConfig, SummarizerKind};
pub use error::RaptorError;
pub use factory::factories;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use submem_core::{Namespace, Result, Services};
use tokio::sync::Mutex;

use build::{BuildCounters, Builder};
use tree::NsTree;

/// Name written into persisted manifests.
pub const STORE_NAME: &str = "M6 raptor-tree";
/// Version of the persisted format.
pub const FORMAT_VERSION: u32 = 1;
/// File holding the persisted trees.
pub const STATE_FILE: &str = "raptor.json";

/// M6: leaves clustered and summarised into a tree, read as a collapsed tree.
pub struct Raptor {
    services: Services,
    config: RaptorConfig,
    use_llm: bool,
    trees: Mutex<HashMap<Namespace, NsTree>>,
    counters: BuildCounters,
    disk_bytes: AtomicU64,
}

submem_kit::debug_fields!(Raptor { config, use_llm });

impl Raptor {
    /// A new, empty tree memory. Summaries are written by `services.llm` when
    /// it is set and [`RaptorConfig::summarizer`] is
    /// [`SummarizerKind::Llm`]; by the extractive rule otherwise.
    pub fn new(services: Services, config: RaptorConfig) -> Result<Self> {
        config.validate().map_err(|e| e.during("new"))?;
        let use_llm = services.llm.is_some() && config.summarizer == SummarizerKind::Llm;
        Ok(Raptor {
            services,
            config,
            use_llm,
            trees: Mutex::new(HashMap::new()),
            counters: BuildCounters::default(),
            disk_bytes: AtomicU64::new(0),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &RaptorConfig {
        &self.config
    }

    /// What the tree builder has done so far.
    pub fn stats(&self) -> RaptorStats {
        self.counters.snapshot()
    }

    /// Number of nodes per level (index 0 = leaves) of `namespace`'s tree as
    /// it stands (stale nodes included).
    pub async fn levels(&self, namespace: &Namespace) -> Vec<usize> {
        let trees = self.trees.lock().await;
        let mut out = Vec::new();
        if let Some(t) = trees.get(namespace) {
            for n in t.nodes.values() {
                let l = n.level as usize;
                if out.len() <= l {
                    out.resize(l + 1, 0);
                }
                out[l] += 1;
            }
        }
        out
    }

    /// Forces a full rebuild of `namespace`'s tree (for benches and
    /// experiments); returns the summaries written.
    pub async fn rebuild(&self, namespace: &Namespace) -> Result<usize> {
        let mut trees = self.trees.lock().await;
        let Some(tree) = trees.get(namespace) else {
            return Ok(0);
        };
        let mut work = tree.clone();
        let n = self
            .builder()
            .full_build(&mut work)
            .await
            .map_err(|e| e.during("manage"))?;
        trees.insert(namespace.clone(), work);
        Ok(n)
    }

    fn builder(&self) -> Builder<'_> {
        Builder {
            services: &self.services,
            cfg: &self.config,
            use_llm: self.use_llm,
            counters: &self.counters,
        }
    }
}
