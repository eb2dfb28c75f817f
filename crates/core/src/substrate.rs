//! The [`Substrate`] contract: write, read, manage, footprint, persistence and
//! forgetting. One instance is shared as `Arc<dyn Substrate>` by many tasks, so
//! every method takes `&self` and implementations use interior mutability.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::{self, Debug};
use std::path::Path;

use crate::{Event, Namespace, Query, ReadTrace, Recall, Result};

/// Which method of the two papers a substrate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MethodId {
    /// Dense vector, flat.
    M1,
    /// Sparse BM25, flat.
    M2,
    /// Gist index (ReadAgent).
    M3,
    /// Evolving notes (A-Mem).
    M4,
    /// Dual-level graph (LightRAG).
    M5,
    /// Hierarchical tree (RAPTOR).
    M6,
    /// Distilled strategies (ReasoningBank).
    M7,
    /// Skill bundles (MemSkill).
    M8,
    /// LoRA adapter.
    M9,
    /// Full context.
    M10,
    /// Episode-clustered re-prefill (EpiCache).
    M11,
    /// FlexA-Mem.
    FlexAMem,
    /// Several substrates behind a router (`submem-router`).
    Routed,
}

impl fmt::Display for MethodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MethodId::FlexAMem => f.write_str("FlexA-Mem"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// The design family a substrate belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Flat vector stores (M1, M2).
    Flat,
    /// LLM-written text records (M3).
    TextRecord,
    /// Structures over notes or entities (M4, M5).
    Structural,
    /// Hierarchies of summaries (M6).
    Hierarchical,
    /// Refined experience (M7, M8).
    Refinement,
    /// Model weights (M9).
    Parametric,
    /// Activations / context (M10, M11).
    Activation,
    /// Write-once store rendered per call (FlexA-Mem).
    WriteOnceRender,
    /// Several substrates composed behind a router.
    Composite,
}

/// Static facts about a substrate, for reports and the router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubstrateInfo {
    /// The method implemented.
    pub method: MethodId,
    /// Its family.
    pub family: Family,
    /// Short human name, e.g. `dense-hnsw`.
    pub name: String,
    /// Whether it calls an LLM in any phase (with the current settings).
    pub needs_llm: bool,
    /// Whether it works without training (everything but M9).
    pub training_free: bool,
}

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReport {
    /// Events accepted.
    pub events: usize,
    /// Storage units created (turns, packed units, pages, chunks...).
    pub units: usize,
}

/// What a management pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManageReport {
    /// Items rewritten, merged, compacted or removed.
    pub changed: usize,
}

/// Size of a substrate's memory, for E1 (bytes) and P5 (compression ratio).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// Approximate bytes held in memory.
    pub memory_bytes: u64,
    /// Bytes on disk (0 when not persisted).
    pub disk_bytes: u64,
    /// Tokens of everything stored (raw text, records, summaries...).
    pub stored_tokens: u64,
    /// Tokens of the history ingested.
    pub input_tokens: u64,
}

/// What to forget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Forget {
    /// Every event of a namespace.
    Namespace(Namespace),
    /// The listed source ids within a namespace.
    Sources {
        /// Whose events.
        namespace: Namespace,
        /// Their source ids.
        source_ids: Vec<String>,
    },
}

impl Forget {
    /// The namespace the request touches.
    pub fn namespace(&self) -> &Namespace {
        match self {
            Forget::Namespace(ns) => ns,
            Forget::Sources { namespace, .. } => namespace,
        }
    }
}

/// A memory substrate.
///
/// Phases: [`write`](Substrate::write) ingests events, [`read`](Substrate::read)
/// renders memory for one query under its token budget, and
/// [`manage`](Substrate::manage) does maintenance that is neither (evolution,
/// rebuilds, compaction). Wrap an instance in [`crate::MeteredSubstrate`] to
/// count each phase's calls, tokens and time.
#[async_trait]
pub trait Substrate: Debug + Send + Sync + 'static {
    /// Static facts.
    fn info(&self) -> SubstrateInfo;

    /// Appends `events` (oldest first) to `namespace`'s memory. Events already
    /// written (same source id) are rejected with [`crate::Error::InvalidInput`]
    /// before anything is stored.
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport>;

    /// Renders memory for `query`. The recall's `tokens` never exceeds
    /// [`Query::allowance`].
    async fn read(&self, query: &Query) -> Result<Recall>;

    /// Maintenance; the default does nothing.
    async fn manage(&self) -> Result<ManageReport> {
        Ok(ManageReport::default())
    }

    /// Current size.
    fn footprint(&self) -> Footprint;

    /// Saves the whole state under `dir` (created if missing). After a
    /// successful return, [`restore`](Substrate::restore) on a fresh instance
    /// built with the same settings gives the same recalls.
    async fn persist(&self, dir: &Path) -> Result<()>;

    /// Replaces the state with what [`persist`](Substrate::persist) saved under
    /// `dir`. A missing, torn or foreign directory is an error
    /// ([`crate::Error::Store`]); the state is left unchanged then.
    async fn restore(&self, dir: &Path) -> Result<()>;

    /// Deletes events; returns how many events were removed.
    async fn forget(&self, target: &Forget) -> Result<usize>;

    /// For loss analyses: what the read of `query` does with the events
    /// `source_ids` (see [`crate::trace`]). It renders nothing and changes
    /// nothing. The default, for substrates that do not rank, is `Ok(None)`.
    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        let _ = (query, source_ids);
        Ok(None)
    }

    /// Counters of the substrate's own behaviour since it was built, by
    /// name: how often an LLM reply was used or fell back to the rules, how
    /// many evolution calls ran, and the like. They explain a cost or a
    /// score (a 135M model's unusable replies show up here, not as errors).
    /// Cumulative and in-memory only: a restored instance starts from zero.
    /// The default, for substrates that keep none, is empty.
    fn diagnostics(&self) -> Diagnostics {
        Diagnostics::new()
    }
}

/// A substrate's named behaviour counters (see [`Substrate::diagnostics`]).
pub type Diagnostics = std::collections::BTreeMap<String, u64>;

/// The unsigned integer fields of a serialisable stats struct, by field
/// name: how a substrate turns its own stats type into [`Diagnostics`]
/// without listing the fields twice. Other fields are left out.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Stats { llm_notes: u64, rule_notes: u64 }
/// let d = submem_core::diagnostics_of(&Stats { llm_notes: 3, rule_notes: 1 });
/// assert_eq!(d["llm_notes"], 3);
/// assert_eq!(d["rule_notes"], 1);
/// ```
pub fn diagnostics_of<T: serde::Serialize>(stats: &T) -> Diagnostics {
    match serde_json::to_value(stats) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().map(|n| (k, n)))
            .collect(),
        _ => Diagnostics::new(),
    }
}

/// Forwards every method through a smart pointer, so `Box<dyn Substrate>` and
/// `Arc<dyn Substrate>` are substrates too.
macro_rules! forward_substrate {
    ($ptr:ident) => {
        #[async_trait]
        impl<S: Substrate + ?Sized> Substrate for $ptr<S> {
            fn info(&self) -> SubstrateInfo {
                (**self).info()
            }
            async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
                (**self).write(namespace, events).await
            }
            async fn read(&self, query: &Query) -> Result<Recall> {
                (**self).read(query).await
            }
            async fn manage(&self) -> Result<ManageReport> {
                (**self).manage().await
            }
            fn footprint(&self) -> Footprint {
                (**self).footprint()
            }
            async fn persist(&self, dir: &Path) -> Result<()> {
                (**self).persist(dir).await
            }
            async fn restore(&self, dir: &Path) -> Result<()> {
                (**self).restore(dir).await
            }
            async fn forget(&self, target: &Forget) -> Result<usize> {
                (**self).forget(target).await
            }
            async fn trace(
                &self,
                query: &Query,
                source_ids: &[String],
            ) -> Result<Option<ReadTrace>> {
                (**self).trace(query, source_ids).await
            }
            fn diagnostics(&self) -> Diagnostics {
                (**self).diagnostics()
            }
        }
    };
}

use std::sync::Arc;
forward_substrate!(Box);
forward_substrate!(Arc);
