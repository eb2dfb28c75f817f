//! # submem-kit: shared plumbing for substrate crates
//!
//! Small, model-free helpers that several substrate families need, kept here
//! so that no family crate depends on another (notes, graph, refine and lora
//! once reached into `submem-flexamem` for them). Nothing here is a
//! substrate: each module is a building block a substrate composes.
//!
//! | module | what it is for |
//! |---|---|
//! | [`json_repair`] | reading the sloppy JSON objects small models write ([`json_repair::parse_lenient_object`], [`json_repair::string_list`], [`json_repair::value_text`]) |
//! | [`text`] | words for lexical matching: Lucene's classic English stop words, [`text::content_words`], [`text::query_terms`] |
//! | [`bm25`] | an exact in-memory Okapi BM25 index over documents of any key type ([`bm25::Bm25Index`]) |
//! | [`record`] | the fixed-rule record writer ([`record::rule_record`]) and checks on LLM-written records ([`record::echoes_prompt`], [`record::cut_words`], [`record::top_keywords`]) |
//! | [`count`] | counting a text that changes in parts: only the changed segments between exact cuts are counted again ([`count::SegmentCounts`]) |
//! | [`pieces`] | cutting an event into pieces of at most κ tokens at line breaks, labelled with their speaker or step ([`pieces::cut_event`]), and showing a run of them verbatim ([`pieces::run_text`]) |
//! | [`pack`] | packing ranked units into the allowance by their cached token counts, shown in time order ([`pack::fill_and_render`], [`pack::fill_to_allowance`]) |
//! | [`fit`] | FlexA-Mem's fit-or-degrade rule ([`fit::fit_or_degrade`]) and a standalone renderer ([`fit::FitOrDegrade`]) for any ranked list of units |
//! | [`embed`] | embedding texts in batches, refusing a wrong count, a wrong length or a non-finite value ([`embed::embed_checked`]) |
//! | [`batch`] | the check every write runs before storing anything ([`batch::check_new_sources`]) |
//! | [`spaces`] | each namespace's state behind one lock that survives poisoning, with footprint totals and save/restore ([`spaces::Spaces`], [`spaces::read`], [`spaces::write`], [`spaces::lock`]) |
//! | [`chunk`] | cutting a history into consecutive chunks at session changes and under a token cap ([`chunk::session_chunks`], [`chunk::runs`]) |
//! | [`event_log`] | a whole substrate from a ranking rule: an event log per namespace with writes' checks, forget, footprint and persistence ([`event_log::EventLog`], [`event_log::LogRanker`]) |
//! | [`state`] | persisting and restoring a per-namespace state map ([`state::StateFile`]) |
//! | [`dir`] | replacing a saved directory whole: written beside its target, swapped in once complete ([`dir::Staged`]) |
//! | [`persist`] | manifests, atomic writes and per-namespace state files for persisted memory ([`persist::save_states`], [`persist::load_states`]) |
//! | [`render`] | packing ranked units under a budget, shown in time order ([`render_in_time_order`], [`PackPolicy`]), and the greedy fill every packer shares ([`render::Fill`]) |
//! | [`setters!`](crate::setters!) | builder setters for a configuration's public fields, written once (core's macro, re-exported for the families) |
//! | [`debug`](mod@debug) | `Debug` for a substrate as its name and chosen fields, never its state ([`debug_fields!`](crate::debug_fields!)) |
//! | [`stats`] | a substrate's running counters and the snapshot it reports, declared once ([`counters!`](crate::counters!)) |
//! | [`meter`] | wrappers that count every LLM call, token, embedding call and second per phase ([`Meter`], [`MeteredSubstrate`]) |
//!
//! Dependencies stay as light as the contract's: `submem-core`, serde,
//! serde_json, schemars, rustc-hash, tempfile and thiserror.
//!
//! ```
//! use submem_kit::json_repair::{parse_lenient_object, value_text};
//! use submem_kit::text::query_terms;
//!
//! let reply = "Sure! ```json\n{'record': 'Ben's bike broke', 'tags': ['bike',]}\n```";
//! let map = parse_lenient_object(reply).ok_or("hopeless")?;
//! assert_eq!(map.get("record").map(value_text).as_deref(), Some("Ben's bike broke"));
//! assert_eq!(query_terms("Where is THE bike?"), vec!["bike", "where"]);
//! # Ok::<(), &str>(())
//! ```
#![warn(missing_docs)]

pub mod batch;
pub mod bm25;
pub mod chunk;
pub mod count;
pub mod debug;
pub mod dir;
pub mod embed;
pub mod event_log;
pub mod fit;
pub mod json_repair;
pub mod meter;
pub mod pack;
pub mod persist;
pub mod pieces;
pub mod record;
pub mod render;
pub mod spaces;
pub mod state;
pub mod stats;
pub mod text;

pub use meter::{
    LatencyStats, Meter, MeterSnapshot, MeteredEmbedder, MeteredLlm, MeteredSubstrate, Phase,
    PhaseStats,
};
pub use render::{render_in_time_order, PackPolicy, RankedUnit};
pub use submem_core::setters;
