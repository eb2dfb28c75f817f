//! # submem-router
//!
//! No single memory substrate wins everywhere (*Harness the Memory*, §5): the
//! best one reverses between conversational QA and agentic decisions, shifts
//! with history depth, and tight budgets favour memories that keep raw text.
//! This crate turns those findings into a [`RoutingPolicy`] and composes
//! substrates behind one [`RoutedSubstrate`], which writes to all of them and
//! reads each query from the one the policy picks.
//!
//! The rules are the default. A **fitted** policy ([`PolicyFile`], written by
//! `submem route fit` from `submem bench` outputs through [`fit::fit`])
//! replaces them per cell (regime × history depth × budget) with the
//! substrate and top-k that measured best on held-out-free training
//! questions ([`HoldoutSplit`]), keeping the evidence in the file; cells
//! without data fall back to the rules. Optional runtime [`Signals`] (BM25
//! top-score margin, dense/sparse agreement) may override a choice; a cell
//! may split its budget between two members ([`compose`]);
//! [`RoutedSubstrate::explain`] says why a query went where it went.
//!
//! ```
//! use submem_core::Regime;
//! use submem_router::paper::{FLEXA_MEM, M1, M2};
//! use submem_router::{RoutingPolicy, RoutingSignal};
//!
//! let policy = RoutingPolicy::default();
//! let signal = RoutingSignal { regime: Regime::Agentic, history_tokens: 200_000, allowance: 3_000, budget: 4_096 };
//! let decision = policy.decide(&signal, &[M1, M2, FLEXA_MEM]).unwrap();
//! assert_eq!(decision.method, FLEXA_MEM);
//! assert_eq!(decision.top_k, 1);
//! ```
#![warn(missing_docs)]

pub mod compose;
pub mod explain;
pub mod factory;
pub mod fit;
pub mod fitted;
pub mod names;
pub mod paper;
pub mod policy;
pub mod routed;
pub mod signals;
pub mod split;

/// The method id of a router's [`RoutedSubstrate`].
pub const ROUTED: submem_core::MethodId = submem_core::MethodId::from_static("Routed");

pub use explain::{CellExplanation, Explanation};
pub use factory::{factories, router_factory, RouterSettings};
pub use fit::{fit, Observation, Scores};
pub use fitted::FitSettings;
pub use fitted::{CellKey, PolicyFile, QualityMetric};
pub use names::{RouteName, RouteNames};
pub use policy::{Decision, Depth, Origin, RoutingPolicy, RoutingSignal, Rule};
pub use routed::RoutedSubstrate;
pub use signals::{SignalSettings, Signals};
pub use split::HoldoutSplit;

use submem_core::MethodId;

/// Errors of the router.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// A router needs at least one member.
    #[error("a routed substrate needs at least one member")]
    NoMembers,
    /// Two members implement the same method.
    #[error("two members implement {0}")]
    DuplicateMember(MethodId),
    /// Routers do not nest.
    #[error("a routed substrate cannot be a member of another")]
    NestedRouter,
    /// No rule names an available member.
    #[error("no routing rule names an available substrate for a {0} query")]
    NoRoute(String),
    /// A policy file or fit setting breaks an invariant.
    #[error("invalid routing policy: {0}")]
    BadPolicy(String),
    /// A policy file names a substrate the router does not know.
    #[error("unknown substrate {name:?} in {at}; known: {known}")]
    UnknownSubstrate {
        /// The name.
        name: String,
        /// Where in the file.
        at: String,
        /// Known names.
        known: String,
    },
    /// A policy file of another version.
    #[error(
        "routing policy version {found} is not supported (this build reads version {supported})"
    )]
    UnsupportedVersion {
        /// The file's version.
        found: String,
        /// The version this build reads.
        supported: u32,
    },
    /// Malformed JSON.
    #[error("malformed routing policy JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A policy file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An error in a named file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: Box<RouterError>,
    },
}

impl From<RouterError> for submem_core::Error {
    fn from(e: RouterError) -> Self {
        submem_core::Error::substrate(ROUTED.as_str(), "route", e)
    }
}
