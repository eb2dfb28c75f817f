//! # submem-notes: M4 evolving notes (A-Mem)
//!
//! *Harness the Memory*'s M4 (specified in `docs/METHODS.md`), following
//! A-Mem (Xu et al. 2025): every unit (a turn or a step) gets a note, notes link to their
//! nearest neighbours, and new notes make the LLM rewrite close neighbours.
//!
//! - **Write** ([`note`]): one LLM call per unit writes a JSON note (context
//!   description, keywords, tags), read with FlexA-Mem's lenient JSON reader;
//!   the rule writer takes over when the call fails, the reply is unusable,
//!   or no LLM is configured (`--memory-llm none`; then
//!   [`SubstrateInfo::needs_llm`](submem_core::SubstrateInfo) is false and
//!   nothing evolves). Raw text + note is embedded; each new note links (both
//!   ways) to its [`NotesConfig::links`] most similar earlier notes.
//! - **Evolution** ([`evolve`]): a new note whose neighbours reach
//!   [`NotesConfig::evolve_threshold`] (cosine) queues an evolution; `manage()`
//!   runs it (one LLM call: should the neighbours' context and tags change,
//!   and to what), so its cost is metered as the manage phase. Evolution never
//!   touches a unit's raw text or its own fields: rewrites are stored as
//!   [`store::Edit`]s with their provenance.
//! - **Read** ([`read`]): embed the query, take the top-k notes, add their
//!   linked notes, render in time order under the allowance: whole notes
//!   (`render=topk`) or FlexA-Mem's fit-or-degrade (`render=fit`).
//! - **Forget** ([`store`]): removing a unit also removes every evolved
//!   context or tag list that could hold its words (an edit whose provenance
//!   names it, and every later edit of that note); the note falls back to its
//!   last clean fields and is embedded again.
//!
//! ## Deviations
//! - Evolution runs in `manage()`, not inside the write (A-Mem evolves on
//!   add); reads before `manage()` see unevolved notes.
//! - Links come from cosine only (no LLM "strengthen" step choosing links).
//! - A note is shown as its raw text plus one note line (context and tags);
//!   keywords are embedded but not shown, to save budget.
//! - Evolution is gated by a cosine threshold instead of asking the LLM for
//!   every new note: with a 135M local model one extra call per unit would
//!   double the write cost for replies that are mostly unusable.
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_notes::{EvolvingNotes, NotesConfig, RenderMode};
//!
//! let m4 = EvolvingNotes::new(services, NotesConfig::default().with_render(RenderMode::Fit))?;
//! let ns = Namespace::new("alice")?;
//! m4.write(&ns, &[Event::Turn(Turn {
//!     session_id: "s1".into(),
//!     session_date: Some("8 May 2023".into()),
//!     speaker: "Alice".into(),
//!     text: "My violin teacher is Ms Berg.".into(),
//!     source_id: "D1:1".into(),
//! })]).await?;
//! m4.manage().await?; // runs queued evolutions
//! let recall = m4.read(&Query::question(ns, "Who teaches me violin?", 4096)).await?;
//! println!("{}", recall.text);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod evolve;
pub mod factory;
mod mem;
pub mod note;
pub mod read;
pub mod store;
mod substrate;

/// The method id of evolving notes (A-Mem; *Harness the Memory*, M4).
pub const M4: submem_core::MethodId = submem_core::MethodId::from_static(METHOD);

pub use config::{NotesConfig, RenderMode};
pub use error::NotesError;
pub use factory::factories;
pub use mem::{EvolvingNotes, NotesStats};
pub use substrate::{FORMAT_VERSION, STATE_FILE, STORE_NAME};

/// The method id used in errors.
pub(crate) const METHOD: &str = "M4";
