//! # submem
//!
//! Pluggable memory substrates for LLM agents, in one dependency: the
//! contract every substrate implements (re-exported from `submem-core`:
//! [`Substrate`], events, queries, recalls, the model service traits,
//! [`plugin`]), every built-in substrate family behind a cargo feature of
//! the same name (all on by default, each re-exported as a module: `flat`,
//! `flexamem`, `kv`, ...), and the [`Registry`] that builds any of them, or
//! a plugin's, from a name and `key=value` settings.
//!
//! ```
//! use submem::registry::{Registry, SubstrateSpec};
//! use submem::{Event, Namespace, Query, Turn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let services = submem::test_utils::test_services(None);
//! // `services` holds the embedder, token counter and optional LLM
//! // (submem-models has the embedded ones).
//! let memory = Registry::default().build(&SubstrateSpec::parse("m2")?, services)?;
//! let ns = Namespace::new("alice")?;
//! let turn = Turn {
//!     session_id: "s1".into(),
//!     session_date: None,
//!     speaker: "Alice".into(),
//!     text: "My car is parked on level 3.".into(),
//!     source_id: "t1".into(),
//! };
//! memory.write(&ns, &[Event::Turn(turn)]).await?;
//! let recall = memory.read(&Query::question(ns, "Where is my car parked?", 1024)).await?;
//! assert!(recall.text.contains("level 3"));
//! # Ok(())
//! # }
//! ```
//!
//! A crate of your own adds a substrate with one [`plugin::SubstrateFactory`]
//! and [`Registry::with`]; `nomem` and the packing baselines a design is
//! compared with are in [`baselines`].
#![warn(missing_docs)]

pub mod baselines;
mod error;
mod nomem;
pub mod registry;

pub use error::RegistryError;
pub use nomem::NO_MEMORY;

pub use registry::{builtin_factories, Registry, SubstrateSpec};
pub use submem_core::*;
#[cfg(feature = "flat")]
pub use submem_flat as flat;
#[cfg(feature = "flexamem")]
pub use submem_flexamem as flexamem;
#[cfg(feature = "gist")]
pub use submem_gist as gist;
#[cfg(feature = "graph")]
pub use submem_graph as graph;
pub use submem_kit::meter::{
    LatencyStats, Meter, MeterSnapshot, MeteredEmbedder, MeteredLlm, MeteredSubstrate, Phase,
    PhaseStats,
};
pub use submem_kit::render::{render_in_time_order, PackPolicy, RankedUnit};
pub use submem_kit::{self as kit, meter, persist, render};
#[cfg(feature = "kv")]
pub use submem_kv as kv;
#[cfg(feature = "lora")]
pub use submem_lora as lora;
#[cfg(feature = "notes")]
pub use submem_notes as notes;
#[cfg(feature = "raptor")]
pub use submem_raptor as raptor;
#[cfg(feature = "recent")]
pub use submem_recent as recent;
#[cfg(feature = "refine")]
pub use submem_refine as refine;
#[cfg(feature = "router")]
pub use submem_router as router;
