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
    /// Each crate declares the ids of the methods it implements (the papers'
    /// `M1` … `M11` live in the family crates, as `submem_flat::M1`), with
    /// [`MethodId::from_static`] for a constant or [`MethodId::new`] at run
    /// time; this crate names none. Ids of the form `M<number>` (the papers'
    /// numbering) order first, by number, so reports keep M1 < M2 < … < M11;
    /// every other id follows in byte order.
    ///
    /// ```
    /// use submem_core::MethodId;
    /// let (m2, m10) = (MethodId::from_static("M2"), MethodId::from_static("M10"));
    /// let recency = MethodId::new("recent-window")?;
    /// assert!(m2 < m10 && m10 < recency);
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

/// The one id shown in another spelling than it is stored in (stored, shown):
/// FlexA-Mem's id was fixed before ids could hold a `-`, and files written
/// since spell it so; reports show, and read back, the paper's name.
const SHOWN_AS: (&str, &str) = ("FlexAMem", "FlexA-Mem");

impl MethodId {
    fn sort_key(&self) -> (bool, u32, &str) {
        let number = self.0.strip_prefix('M').and_then(|n| n.parse().ok());
        (number.is_none(), number.unwrap_or(0), self.as_str())
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
        if name == SHOWN_AS.1 {
            return Ok(MethodId::from_static(SHOWN_AS.0));
        }
        MethodId::new(name).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for MethodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 == SHOWN_AS.0 {
            SHOWN_AS.1
        } else {
            &self.0
        })
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

    /// A read of `query` with its [`trace`](Substrate::trace) of
    /// `source_ids` (none when `source_ids` is empty), for callers that want
    /// both (the server's explained reads). The default reads, then traces;
    /// a substrate whose trace is its read's own ranking overrides it to rank
    /// once, which is what keeps an explained read about as cheap as a plain
    /// one. The recall is the one [`read`](Substrate::read) gives.
    async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<ReadTrace>)> {
        read_then_trace(self, query, source_ids).await
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

/// [`Substrate::read_traced`]'s default: a read, then (when `source_ids`
/// is not empty) a trace; for overrides that rank once only in some modes.
pub async fn read_then_trace<S: Substrate + ?Sized>(
    substrate: &S,
    query: &Query,
    source_ids: &[String],
) -> Result<(Recall, Option<ReadTrace>)> {
    let recall = substrate.read(query).await?;
    let trace = if source_ids.is_empty() {
        None
    } else {
        substrate.trace(query, source_ids).await?
    };
    Ok((recall, trace))
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
            async fn read_traced(
                &self,
                query: &Query,
                source_ids: &[String],
            ) -> Result<(Recall, Option<ReadTrace>)> {
                (**self).read_traced(query, source_ids).await
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &'static str) -> MethodId {
        MethodId::from_static(name)
    }

    #[test]
    fn papers_numbering_orders_first_then_byte_order() {
        let mut ids = vec![
            id("Routed"),
            id("recent-window"),
            id("M10"),
            id("Pieces"),
            id("FlexAMem"),
            id("M2"),
            id("NoMemory"),
            id("M11"),
            id("M1"),
            id("Hybrid"),
        ];
        ids.sort();
        let names: Vec<&str> = ids.iter().map(MethodId::as_str).collect();
        assert_eq!(
            names,
            [
                "M1",
                "M2",
                "M10",
                "M11",
                "FlexAMem",
                "Hybrid",
                "NoMemory",
                "Pieces",
                "Routed",
                "recent-window"
            ]
        );
        // Ord agrees with Eq: two spellings of one number stay apart.
        assert_ne!(id("M01").cmp(&id("M1")), std::cmp::Ordering::Equal);
    }

    #[test]
    fn flexa_mem_is_shown_and_read_back_by_its_papers_name() {
        assert_eq!(id("FlexAMem").to_string(), "FlexA-Mem");
        assert_eq!(
            serde_json::to_string(&id("FlexAMem")).unwrap(),
            r#""FlexAMem""#
        );
        for written in [r#""FlexA-Mem""#, r#""FlexAMem""#] {
            let back: MethodId = serde_json::from_str(written).unwrap();
            assert_eq!(back, id("FlexAMem"));
        }
        let bad = serde_json::from_str::<MethodId>(r#""two words""#).unwrap_err();
        assert!(bad.to_string().contains("method id"), "{bad}");
    }
}
