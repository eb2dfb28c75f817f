//! The [`Substrate`] contract: write, read, manage, footprint, persistence and
//! forgetting. One instance is shared as `Arc<dyn Substrate>` by many tasks, so
//! every method takes `&self` and implementations use interior mutability.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt::{self, Debug};
use std::path::Path;

use crate::{Event, Namespace, Query, ReadTrace, Recall, Result};

/// An open, validated name: a `Cow` of 1–64 ASCII letters, digits, `-`, `_`
/// or `.`, with a `const` constructor for statics, a checked one, and its
/// `Debug` as the bare name. `MethodId` and `Family` are both this shape.
macro_rules! open_name {
    ($(#[$meta:meta])* $ty:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $ty(Cow<'static, str>);

        impl $ty {
            #[doc = concat!("A ", $what, " from a static name, unchecked (a `const` constructor")]
            /// for a plugin's own constant). Registries check it with `validate`
            /// when the plugin is registered.
            pub const fn from_static(name: &'static str) -> Self {
                $ty(Cow::Borrowed(name))
            }

            #[doc = concat!("A checked ", $what, ": 1–64 ASCII letters, digits, `-`, `_` or `.`.")]
            pub fn new(name: impl Into<Cow<'static, str>>) -> Result<Self> {
                let name = $ty(name.into());
                name.validate()?;
                Ok(name)
            }

            /// Fails unless the name is 1–64 ASCII letters, digits, `-`, `_` or `.`.
            pub fn validate(&self) -> Result<()> {
                let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
                let id = &*self.0;
                if id.is_empty() || id.len() > 64 || !id.chars().all(ok_char) {
                    return Err(crate::Error::InvalidInput(format!(
                        "{} {id:?} must be 1-64 ASCII letters, digits, '-', '_' or '.'",
                        $what
                    )));
                }
                Ok(())
            }

            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

open_name!(
    /// Which method a substrate implements: an open, validated name.
    ///
    /// The two papers' methods are constants ([`MethodId::M1`] … [`MethodId::M11`],
    /// [`MethodId::FLEXA_MEM`]); a substrate outside this workspace declares its
    /// own with [`MethodId::new`] or [`MethodId::from_static`] without touching
    /// this crate. Ids order the papers' methods by number first, so reports keep
    /// M1 < M2 < … < M11 < FlexA-Mem, then every other id alphabetically, then
    /// [`MethodId::ROUTED`].
    ///
    /// ```
    /// use submem_core::MethodId;
    /// let recency = MethodId::new("recent-window")?;
    /// assert!(MethodId::M2 < MethodId::M10 && MethodId::FLEXA_MEM < recency);
    /// assert_eq!(MethodId::FLEXA_MEM.to_string(), "FlexA-Mem");
    /// assert!(MethodId::new("two words").is_err());
    /// # Ok::<(), submem_core::Error>(())
    /// ```
    MethodId,
    "method id"
);

open_name!(
    /// The design family a substrate belongs to: an open, validated name in
    /// snake case, with constants for the papers' families.
    ///
    /// ```
    /// use submem_core::Family;
    /// assert_eq!(Family::FLAT.as_str(), "flat");
    /// assert_eq!(Family::new("window")?.to_string(), "window");
    /// # Ok::<(), submem_core::Error>(())
    /// ```
    #[derive(PartialOrd, Ord)]
    Family,
    "family"
);

impl MethodId {
    /// Dense vector, flat.
    pub const M1: MethodId = MethodId::from_static("M1");
    /// Sparse BM25, flat.
    pub const M2: MethodId = MethodId::from_static("M2");
    /// Gist index (ReadAgent).
    pub const M3: MethodId = MethodId::from_static("M3");
    /// Evolving notes (A-Mem).
    pub const M4: MethodId = MethodId::from_static("M4");
    /// Dual-level graph (LightRAG).
    pub const M5: MethodId = MethodId::from_static("M5");
    /// Hierarchical tree (RAPTOR).
    pub const M6: MethodId = MethodId::from_static("M6");
    /// Distilled strategies (ReasoningBank).
    pub const M7: MethodId = MethodId::from_static("M7");
    /// Skill bundles (MemSkill).
    pub const M8: MethodId = MethodId::from_static("M8");
    /// LoRA adapter.
    pub const M9: MethodId = MethodId::from_static("M9");
    /// Full context.
    pub const M10: MethodId = MethodId::from_static("M10");
    /// Episode-clustered re-prefill (EpiCache).
    pub const M11: MethodId = MethodId::from_static("M11");
    /// FlexA-Mem (shown as `FlexA-Mem`; the id is `FlexAMem`, as files written
    /// before ids were open spell it).
    pub const FLEXA_MEM: MethodId = MethodId::from_static("FlexAMem");
    /// The paper's no-memory row.
    pub const NO_MEMORY: MethodId = MethodId::from_static("NoMemory");
    /// Several substrates behind a router (`submem-router`).
    pub const ROUTED: MethodId = MethodId::from_static("Routed");

    /// The paper method's number (M1 → 1 … M11 → 11, FlexA-Mem → 12), else
    /// `None`.
    fn paper_rank(&self) -> Option<u32> {
        if *self == MethodId::FLEXA_MEM {
            return Some(12);
        }
        let n: u32 = self.0.strip_prefix('M')?.parse().ok()?;
        (1..=11).contains(&n).then_some(n)
    }

    fn sort_key(&self) -> (u8, u32, &str) {
        match self.paper_rank() {
            Some(n) => (0, n, ""),
            None if *self == MethodId::ROUTED => (2, 0, ""),
            None => (1, 0, self.as_str()),
        }
    }
}

impl PartialOrd for MethodId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MethodId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl<'de> Deserialize<'de> for MethodId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        // Reports name FlexA-Mem by its display form; read it back as the id.
        if name == "FlexA-Mem" {
            return Ok(MethodId::FLEXA_MEM);
        }
        MethodId::new(name).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for MethodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == MethodId::FLEXA_MEM {
            f.write_str("FlexA-Mem")
        } else {
            f.write_str(&self.0)
        }
    }
}

impl Family {
    /// Flat vector stores (M1, M2).
    pub const FLAT: Family = Family::from_static("flat");
    /// LLM-written text records (M3).
    pub const TEXT_RECORD: Family = Family::from_static("text_record");
    /// Structures over notes or entities (M4, M5).
    pub const STRUCTURAL: Family = Family::from_static("structural");
    /// Hierarchies of summaries (M6).
    pub const HIERARCHICAL: Family = Family::from_static("hierarchical");
    /// Refined experience (M7, M8).
    pub const REFINEMENT: Family = Family::from_static("refinement");
    /// Model weights (M9).
    pub const PARAMETRIC: Family = Family::from_static("parametric");
    /// Activations / context (M10, M11).
    pub const ACTIVATION: Family = Family::from_static("activation");
    /// Write-once store rendered per call (FlexA-Mem).
    pub const WRITE_ONCE_RENDER: Family = Family::from_static("write_once_render");
    /// Several substrates composed behind a router.
    pub const COMPOSITE: Family = Family::from_static("composite");
    /// Reference points that are not designs of their own (no memory, a
    /// recency window).
    pub const BASELINE: Family = Family::from_static("baseline");
}

impl<'de> Deserialize<'de> for Family {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Family::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
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

impl SubstrateInfo {
    /// A training-free substrate `name` implementing `method` in `family`
    /// that calls no LLM; [`with_llm`](Self::with_llm) and
    /// [`trained`](Self::trained) say otherwise.
    pub fn new(method: MethodId, family: Family, name: impl Into<String>) -> Self {
        SubstrateInfo {
            method,
            family,
            name: name.into(),
            needs_llm: false,
            training_free: true,
        }
    }

    /// The same, calling an LLM when `needs_llm` (with its current settings).
    pub fn with_llm(mut self, needs_llm: bool) -> Self {
        self.needs_llm = needs_llm;
        self
    }

    /// The same for a substrate that trains (M9).
    pub fn trained(mut self) -> Self {
        self.training_free = false;
        self
    }
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

impl Footprint {
    /// The footprint of a store that keeps its input as written (`tokens`
    /// both ingested and stored) in `memory_bytes`, nothing on disk.
    pub fn verbatim(tokens: u64, memory_bytes: u64) -> Self {
        Footprint {
            memory_bytes,
            disk_bytes: 0,
            stored_tokens: tokens,
            input_tokens: tokens,
        }
    }
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
/// rebuilds, compaction). Wrap an instance in `submem_kit::MeteredSubstrate` to
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
