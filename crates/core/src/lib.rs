//! # submem-core
//!
//! The contract every submem memory substrate implements, and the types and
//! services they share:
//!
//! - [`history`]: conversational [`Turn`]s and agent [`Step`]s, grouped per
//!   [`Namespace`];
//! - [`query`]: what a reader asks ([`Query`], with the budget arithmetic
//!   `B̄ = 0.95·B`, `A = B̄ − |P|`) and what a substrate answers ([`Recall`]);
//! - [`substrate`]: the object-safe async [`Substrate`] trait (write, read,
//!   manage, footprint, persist/restore, forget);
//! - [`services`]: the [`Llm`], [`Embedder`] and [`TokenCounter`] traits, and
//!   the optional prefix-caching capability of an [`Llm`] ([`PrefixCaching`]:
//!   a KV cache prefilled once and reused, for M11);
//! - [`plugin`]: [`plugin::SubstrateFactory`], how a substrate names itself,
//!   documents its settings and is built from them by any registry;
//! - [`trace`]: what a read did with given events, for loss analyses;
//! - [`setters!`]: the `with_*` builder setters of a configuration's fields.
//!
//! Metering, rendering under a budget and state files are not the contract:
//! they live in `submem-kit` (`meter`, `render`, `persist`).
//!
//! The crate is deliberately light (serde, schemars, thiserror, async-trait, tracing):
//! model runtimes and indexes live in `submem-models` and the substrate crates.
//!
//! ```
//! use submem_core::{Namespace, Query};
//! let q = Query::question(Namespace::new("alice")?, "Where did I park?", 4096)
//!     .with_fixed_prompt_tokens(100);
//! assert_eq!(q.allowance(), 3791);
//! # Ok::<(), submem_core::Error>(())
//! ```
#![warn(missing_docs)]

mod error;
pub mod evidence;
pub mod history;
pub mod plugin;
pub mod query;
pub mod services;
mod setters;
pub mod substrate;
pub mod trace;

#[cfg(feature = "test-utils")]
pub mod test_utils;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{BoxError, Error, Result, ServiceError};
pub use evidence::{explain_evidence, explain_evidences, EvidenceReport, Shown};
pub use history::{Event, History, Namespace, Step, Turn};
pub use query::{Query, Recall, Regime, Resolution, SourceHit};
pub use services::{
    cosine, l2_normalize, ChatMessage, ChatRequest, ChoiceScores, ChoiceScoring, Completion,
    EmbedCounts, Embedder, Llm, PrefilledLlm, PrefixCaching, PrefixReuse, Role, Services,
    TokenCounter, Usage,
};
pub use substrate::{
    Diagnostics, Family, Footprint, Forget, ManageReport, MethodId, Substrate, SubstrateInfo,
    WriteReport,
};
pub use trace::{EvidenceFate, EvidenceTrace, ReadTrace};
