//! # submem-refine
//!
//! The refinement family of *Harness the Memory* (M7 and M8,
//! specified in `docs/METHODS.md`): memory made of experience refined by an LLM rather than of
//! the history itself.
//!
//! - [`StrategyBank`] (**M7**, distilled strategies, after ReasoningBank):
//!   each finished episode is judged (one LLM call, or the environment's
//!   success signal when the data has one) and distilled into 1–3 strategies
//!   (title, description, content; one LLM call), from failures as well as
//!   successes. Strategies are embedded; a read shows the dense top-1
//!   ([`StrategyConfig::top_k`]). `manage` merges near-duplicates. See
//!   [`strategies`] and [`distill`].
//! - [`SkillBundles`] (**M8**, skill bundles, after MemSkill with a
//!   zero-shot controller): experiences are embedded and clustered (k-means,
//!   linfa) into bundles; one LLM call per bundle writes its skill (when to
//!   use it, steps, pitfalls). A read prefills every skill that fits, most
//!   relevant first, and the reader picks. `manage` merges the closest or
//!   prunes the least-used bundles above a cap and rewrites touched skills.
//!   See [`skills`] and [`skill_writer`].
//!
//! Both keep the raw events of each namespace in a [`journal`] that cuts
//! them into episodes (the episode rule is documented there: a step's source
//! id prefix names its episode, a conversation's session is an episode, an
//! environment marker or `manage` ends one). What an LLM wrote can thus be
//! re-derived without a forgotten event. Without an LLM (`--memory-llm
//! none`) both write rule-based strategies and skills and report
//! `needs_llm = false`. LLM replies are parsed with FlexA-Mem's lenient JSON
//! reader.
//!
//! ## The cross-episode regime
//! Strategies and skills pay off on a *new* episode: the bank is built from
//! training trajectories written into a namespace, then read with a new
//! task's query. `submem bench --train-episodes N` does exactly that (the
//! first N episodes of the dataset are written into every later episode's
//! namespace before its own history).
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services, events: Vec<submem_core::Event>) -> submem_core::Result<()> {
//! use submem_core::{Namespace, Query, Substrate};
//! use submem_refine::{StrategyBank, StrategyConfig};
//! let bank = StrategyBank::new(services, StrategyConfig::default())?;
//! let ns = Namespace::new("agent")?;
//! bank.write(&ns, &events).await?; // training trajectories
//! bank.manage().await?; // finishes the last episode, merges duplicates
//! let recall = bank
//!     .read(&Query::agentic(ns, "put a clean mug on the desk", "You are in a room.", 2048))
//!     .await?;
//! println!("{}", recall.text);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod cluster;
mod config;
pub mod distill;
mod error;
pub mod factory;
pub mod journal;
mod pack;
pub mod skill_writer;
pub mod skills;
mod space;
pub mod strategies;

/// The method id of distilled strategies (ReasoningBank; *Harness the Memory*, M7).
pub const M7: submem_core::MethodId = submem_core::MethodId::from_static(strategies::METHOD);
/// The method id of skill bundles (MemSkill; *Harness the Memory*, M8).
pub const M8: submem_core::MethodId = submem_core::MethodId::from_static(skills::METHOD);

pub use config::{EpisodeConfig, SkillConfig, StrategyConfig};
pub use distill::{Outcome, Strategy};
pub use error::RefineError;
pub use factory::factories;
pub use skill_writer::Skill;
pub use skills::SkillBundles;
pub use strategies::StrategyBank;
