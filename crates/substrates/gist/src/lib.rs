//! # submem-gist: M3, the gist index (ReadAgent)
//!
//! The text-record family of *Harness the Memory* (§M3, following ReadAgent,
//! Lee et al. 2024): the history is cut into pages, an LLM writes a
//! one-sentence gist of each page, and at read time the LLM looks at all the
//! gists and names the pages to read again in full.
//!
//! - **Write** (`page.rs`): events are grouped into pages of about
//!   [`GistConfig::page_tokens`] (600) o200k tokens, cut between events,
//!   never across a session or an agent episode unless a session is tiny
//!   (the rule is in `page.rs`). One LLM call per page writes its gist
//!   (`gist.rs`); the reply is cut at its first sentence and at
//!   [`GistConfig::gist_words`] words.
//! - **Read** (`select.rs`, `render.rs`): one LLM call sees every gist with its
//!   page number and the query and names up to [`GistConfig::max_expand`]
//!   pages; the reply's numbers are parsed in any format. When the reply
//!   names no valid page or the call fails, BM25 over gist + page text picks
//!   the pages. Expanded pages replace their gists in place, in time order;
//!   the other pages stay as gists, most relevant first when not all fit.
//!   [`Recall::sources`](submem_core::Recall) lists the events of the
//!   expanded pages only (resolution `Raw`): a gist does not show an event's
//!   text, and listing every gisted event would put the whole history in
//!   Recall@k.
//! - **Manage**: gists of pages that lost events are rewritten by the LLM,
//!   then text-level dedup: a gist equal to an earlier one after
//!   normalisation, or sharing ≥ [`GistConfig::dedup_jaccard`] of its content
//!   words, is shown as `(same as pN)`.
//! - **Rule mode** (no `services.llm`, `--memory-llm none`): rule gists
//!   (date, speakers and the first sentence of the page's most informative
//!   turn) and BM25 selection; `info().needs_llm` is false and
//!   `info().name` is `gist-index-rule`.
//! - **Forget**: forgetting an event rewrites its page at once with the rule
//!   gist of what is left (the LLM gist may quote the forgotten text), marked
//!   stale so that the next `manage` asks the LLM again; a page left empty
//!   is removed. Forgotten text never shows, not even inside a gist.
//!
//! ## Deviations from ReadAgent
//! - Pagination by token count at event boundaries (`docs/METHODS.md`) instead of
//!   LLM-chosen pause points: no write-time LLM calls beyond the gists.
//! - Gists are shown with their session date (`[p3 · 8 May 2023] …`) so that
//!   temporal questions keep an anchor; the date comes from the data, not the
//!   model.
//! - Fitting a token budget (ReadAgent has none): expansions first, in the
//!   LLM's order, then gists by BM25 relevance (`render.rs`).
//! - The BM25 fallback is ours: a 135M model often answers with no page
//!   number at all, and an empty read would be worse than a lexical guess.
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
//! use submem_core::{Namespace, Query, Substrate};
//! use submem_gist::{GistConfig, GistIndex};
//! let m3 = GistIndex::new(services, GistConfig::default().with_max_expand(3))?;
//! let ns = Namespace::new("alice")?;
//! # let events = vec![];
//! m3.write(&ns, &events).await?; // one gist-writing LLM call per page
//! let recall = m3.read(&Query::question(ns, "Where did I park?", 4096)).await?;
//! println!("{}", recall.text);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod factory;
mod gist;
mod index;
mod page;
mod render;
mod select;
mod shelf;
mod text;

/// The method id of the gist index (ReadAgent; *Harness the Memory*, M3).
pub const M3: submem_core::MethodId = submem_core::MethodId::from_static("M3");

pub use config::GistConfig;
pub use error::GistError;
pub use factory::factories;
pub use index::{GistIndex, GistRead, GistStats, Selection};
pub use page::GistWriter;
