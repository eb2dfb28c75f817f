//! # submem-graph: M5, the dual-level graph (LightRAG)
//!
//! A memory substrate following *Harness the Memory*'s M5 (specified in
//! `docs/METHODS.md`), which runs LightRAG
//! (Guo et al., 2024) as a structural memory.
//!
//! - **Write.** Each write is cut into chunks of about
//!   [`GraphConfig::chunk_tokens`] at event boundaries (and session
//!   changes). One LLM call per chunk extracts entities (name, type,
//!   description) and relations (source, target, keywords, description) as
//!   `|`-separated tuple lines ([`extract`]); duplicates merge by normalised
//!   name into a petgraph graph ([`graph`]) in which every node and edge keeps
//!   one contribution per source chunk. Without an LLM (`--memory-llm none`)
//!   or when the model's answer yields nothing usable, a rule extractor
//!   (speakers, capitalised spans, numbers and dates; co-occurrence relations
//!   within a turn) stands in, and [`SubstrateInfo::needs_llm`] is false.
//! - **Indexes.** Dense indexes over chunks, entities and relations
//!   ([`index`]), filled lazily in batches on `manage` or on the first read
//!   that needs them.
//! - **Read** ([`retrieve`]). One LLM call (or the rules, [`keywords`])
//!   gives low-level (entity) and high-level (theme) keywords; low-level
//!   keywords match entities, high-level ones match relations, the question
//!   matches chunks; the matched items' relations, ends and source chunks are
//!   gathered; the chunk lists (from entities, from relations, dense, and BM25
//!   when `lexical_chunks` is on, the default) are fused by reciprocal rank
//!   fusion; the
//!   block is rendered under the budget: entity and relation descriptions
//!   compactly (truncated, within [`GraphConfig::graph_share`]), chunks
//!   verbatim in time order. [`Recall::sources`](submem_core::Recall) lists
//!   the events of the shown chunks (all shown raw).
//! - **Forget.** Forgetting an event removes every contribution of its chunk
//!   from every node and edge; merged descriptions are rebuilt from the
//!   remaining contributions (no LLM re-merge), nodes and edges left without
//!   a source are deleted, and changed or removed items lose their vectors at
//!   once. What remains of the chunk is re-embedded and re-extracted on the
//!   next `manage` ([`GraphConfig::reextract_on_forget`]). The delete bugs
//!   LightRAG users report — stale descriptions, orphan nodes, stale vectors
//!   (HKUDS/LightRAG#1555, #1554) — are ruled out by
//!   [`GraphMemory::check_consistency`], which the tests run after forgetting.
//!
//! ## Deviations from LightRAG (and why)
//! - Chunks of 300 tokens, not 1,200: shown chunks are verbatim and a 4k
//!   budget must hold several.
//! - No LLM summary of long merged descriptions: they are truncated at render
//!   time, so forgetting stays exact and write costs one call per chunk.
//! - No gleaning pass; extraction output is grounded (names must occur in the
//!   chunk) because SmolLM2-135M copies its prompt's example.
//! - Exact cosine search instead of an ANN index (small per-namespace sets).
//! - One async lock guards all namespaces: operations on one instance run one
//!   at a time (the harness runs phases sequentially anyway).
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_graph::{GraphConfig, GraphMemory};
//!
//! let m5 = GraphMemory::new(services, GraphConfig::default().with_chunk_tokens(300))?;
//! let ns = Namespace::new("alice")?;
//! m5.write(&ns, &[Event::Turn(Turn {
//!     session_id: "s1".into(),
//!     session_date: Some("8 May 2023".into()),
//!     speaker: "Alice".into(),
//!     text: "My violin teacher Ms Berg lives in Oslo.".into(),
//!     source_id: "D1:1".into(),
//! })]).await?;
//! m5.manage().await?;
//! let recall = m5.read(&Query::question(ns, "Who teaches Alice violin?", 4096)).await?;
//! println!("{}", recall.text);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod extract;
pub mod factory;
pub mod graph;
pub mod index;
mod inspect;
pub mod keywords;
mod memory;
pub mod retrieve;
pub mod store;
mod substrate;

/// The method id of the dual-level graph (LightRAG; *Harness the Memory*, M5).
pub const M5: submem_core::MethodId = submem_core::MethodId::from_static(METHOD);

pub use config::{Extractor, GraphConfig};
pub use error::GraphError;
pub use factory::factories;
pub use inspect::GraphCounts;
pub use memory::{GraphMemory, GraphStats};
pub use substrate::{FORMAT_VERSION, STATE_FILE, STORE_NAME};

// Used only in docs.
#[allow(unused_imports)]
use submem_core::SubstrateInfo;

/// [`M5`] as a string, for errors.
pub(crate) const METHOD: &str = "M5";
