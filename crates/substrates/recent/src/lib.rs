//! # submem-recent: the recency window, and the template substrate crate
//!
//! [`RecentWindow`] (`recent`, alias `window`) is the simplest memory a
//! reader can have: every event is kept as its rendered text, and a read shows
//! the **newest** events that fit [`Query::allowance`](submem_core::Query::allowance),
//! in time order. The question is not used: nothing is retrieved. Setting
//! `max_events` caps how many of the newest events a read shows (a short-term
//! window of fixed length, as agent loops keep), so the same budget can be
//! left partly unused on purpose. It is a baseline (family
//! [`Family::BASELINE`](submem_core::Family::BASELINE)): it tells how much of
//! a score the plain recency of the history explains. Unlike M10 (full
//! context, `submem-kv`), which has no settings, it is the substrate to copy.
//!
//! The crate is one ranking rule, [`Recency`], on the kit's
//! [`EventLog`](submem_kit::event_log::EventLog), which does the rest.
//! **Write**: each event is validated ([`submem_kit::batch::check_new_sources`]:
//! no empty or repeated source id, none already stored) and its rendered text
//! counted once. **Read**: the newest events are taken until the allowance (or
//! `max_events`) is reached and packed with
//! [`render_in_time_order`](submem_kit::render_in_time_order), stopping at the
//! first that does not fit so that what is shown is a contiguous, most recent
//! run. **Persist**: one JSON state file and a manifest written last
//! ([`submem_kit::state::StateFile`]), so a torn or foreign directory is
//! refused on restore and the live state is left as it was.
//!
//! ## Copying this crate
//!
//! This crate is the template for a new substrate (see `CONTRIBUTING.md` at
//! the repository root for the whole walk-through). After
//! `cp -r crates/substrates/recent crates/substrates/<yours>`, rename:
//!
//! | here | yours |
//! |---|---|
//! | folder `crates/substrates/recent`, package `submem-recent` (`Cargo.toml`) | `crates/substrates/<yours>`, `submem-<yours>` |
//! | [`Recency`] and [`RecentWindow`] = `EventLog<Recency>` (`window.rs`) | your ranking rule and substrate type; its `info()` name `recent-window` |
//! | `METHOD` = `MethodId::from_static("RecentWindow")`, [`Family::BASELINE`](submem_core::Family::BASELINE) | your method id (letters, digits, `-`, `_`) and family ([`Family::new`](submem_core::Family::new) for a new one) |
//! | `MANIFEST_NAME`, `STATE_FILE` (`window.rs`) | names of your persisted state; bump `FORMAT_VERSION` when its shape changes |
//! | [`RecentSettings`] (`window.rs`): the window's configuration, which is its settings | your settings struct |
//! | [`factories`] (`factory.rs`): name `recent`, alias `window` | the names users type |
//! | [`RecentError`] (`error.rs`) | your crate's one error enum |
//!
//! then replace `Recency::rank` with your own rule (and `Extra`, for data to
//! keep beside each event, such as its content words) and keep the tests. A
//! memory that is not a log of events (an index, a graph, LLM-written notes)
//! implements [`Substrate`](submem_core::Substrate) itself, as the families
//! under `crates/substrates/` do, with the kit's `Spaces` for its
//! per-namespace state.
//! `cargo test -p submem-<yours>` runs the unit tests beside the code and the
//! shared conformance suite (`tests/conformance.rs`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> submem_core::Result<()> {
//! use submem_core::test_utils::WhitespaceCounter;
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_recent::{recent_window, RecentSettings};
//! use std::sync::Arc;
//!
//! let window = recent_window(Arc::new(WhitespaceCounter), RecentSettings { max_events: Some(2) })?;
//! let ns = Namespace::new("alice")?;
//! let turn = |id: &str, text: &str| Event::Turn(Turn {
//!     session_id: "s1".into(), session_date: None, speaker: "A".into(),
//!     text: text.into(), source_id: id.into(),
//! });
//! window.write(&ns, &[turn("1", "the oldest"), turn("2", "a middle one"), turn("3", "the newest")]).await?;
//! let recall = window.read(&Query::question(ns, "anything", 4096)).await?;
//! assert_eq!(recall.text, "A: a middle one\nA: the newest");
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod error;
pub mod factory;
mod window;

pub use error::RecentError;
pub use factory::{factories, recent_factory};
pub use window::{recent_window, Recency, RecentSettings, RecentWindow, METHOD};
