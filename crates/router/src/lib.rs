//! # submem-router
//!
//! No single memory substrate wins everywhere (*Harness the Memory*, §5): the
//! best one reverses between conversational QA and agentic decisions, shifts
//! with history depth, and tight budgets favour memories that keep raw text.
//! This crate turns those findings into a [`RoutingPolicy`] and composes
//! substrates behind one [`RoutedSubstrate`], which writes to all of them and
//! reads each query from the one the policy picks.
//!
//! ```
//! use submem_core::{MethodId, Regime};
//! use submem_router::{RoutingPolicy, RoutingSignal};
//!
//! let policy = RoutingPolicy::default();
//! let signal = RoutingSignal { regime: Regime::Agentic, history_tokens: 200_000, allowance: 3_000, budget: 4_096 };
//! let decision = policy.decide(&signal, &[MethodId::M1, MethodId::M2, MethodId::FlexAMem]).unwrap();
//! assert_eq!(decision.method, MethodId::FlexAMem);
//! assert_eq!(decision.top_k, 1);
//! ```
#![warn(missing_docs)]

pub mod policy;
pub mod routed;

pub use policy::{Decision, Depth, RoutingPolicy, RoutingSignal, Rule};
pub use routed::RoutedSubstrate;

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
}

impl From<RouterError> for submem_core::Error {
    fn from(e: RouterError) -> Self {
        submem_core::Error::substrate("Routed", "route", e)
    }
}
