//! The routing policy: which substrate to ask, and with what retrieval depth,
//! given the query's regime, the depth of the history and the budget.
//!
//! The default rules encode the findings of *Harness the Memory* (§5) and
//! *FlexA-Mem*:
//!
//! - when the whole history fits the allowance, full context (M10) shows
//!   everything verbatim at no retrieval cost;
//! - at tight budgets (≤ 4k tokens) raw-text-keeping memories win
//!   (FlexA-Mem, then BM25);
//! - conversational QA rewards broad retrieval (k grows with depth); the
//!   dual-level graph (M5) leads at moderate depth but its rebuild cost grows
//!   with input, so long histories go to cheap sparse retrieval;
//! - agentic decisions are hurt by retrieval breadth (k = 1–3); distilled
//!   strategies (M7) and episode re-prefill (M11) lead, with FlexA-Mem unit
//!   recovery first under tight budgets.
//!
//! Every rule is data ([`RoutingPolicy`] is serde), so a `submem bench` run can
//! replace the defaults with measured preferences.

use serde::{Deserialize, Serialize};
use submem_core::{MethodId, Regime};

/// How deep a namespace's history is, relative to the query's allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Depth {
    /// The whole history fits the allowance.
    Fits,
    /// Up to `long_history_factor` times the allowance.
    Moderate,
    /// Longer.
    Long,
}

/// What the router knows when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingSignal {
    /// Who is asking.
    pub regime: Regime,
    /// Tokens of the namespace's history.
    pub history_tokens: u64,
    /// The query's memory allowance in tokens.
    pub allowance: usize,
    /// The query's total budget `B`.
    pub budget: usize,
}

/// One rule: for a regime and depth (and optionally only at tight budgets),
/// the substrates to try in order and the top-k to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// Regime the rule applies to.
    pub regime: Regime,
    /// Depths it applies to.
    pub depths: Vec<Depth>,
    /// Applies only when `budget <= tight_budget` (true) or only above it (false);
    /// `None` applies at every budget.
    #[serde(default)]
    pub tight: Option<bool>,
    /// Preferred substrates, best first.
    pub prefer: Vec<MethodId>,
    /// Top-k to ask for.
    pub top_k: usize,
    /// Why (shown in decisions and logs).
    pub reason: String,
}

/// What made a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A paper-derived rule of [`RoutingPolicy`].
    Rule,
    /// A cell of a fitted [`crate::PolicyFile`].
    Fitted,
    /// A runtime signal overrode the cell or rule.
    Signal,
    /// The router was built to always compose two members.
    Forced,
}

/// A routing decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The substrate to read from.
    pub method: MethodId,
    /// The top-k to ask it for.
    pub top_k: usize,
    /// The rule's reason.
    pub reason: String,
    /// The depth the history was judged to have (by the rules' bands).
    pub depth: Depth,
    /// A second member sharing the budget, with the first member's share.
    pub secondary: Option<(MethodId, f64)>,
    /// What made the decision.
    pub origin: Origin,
}

/// Ordered rules; the first that matches and names an available substrate wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingPolicy {
    /// Budgets at or below this are tight (tokens).
    pub tight_budget: usize,
    /// Histories longer than this many allowances are long.
    pub long_history_factor: u64,
    /// The rules, tried in order.
    pub rules: Vec<Rule>,
}

fn rule(
    regime: Regime,
    depths: &[Depth],
    tight: Option<bool>,
    prefer: &[MethodId],
    top_k: usize,
    reason: &str,
) -> Rule {
    Rule {
        regime,
        depths: depths.to_vec(),
        tight,
        prefer: prefer.to_vec(),
        top_k,
        reason: reason.to_string(),
    }
}

impl Default for RoutingPolicy {
    fn default() -> Self {
        use crate::paper::*;
        use Depth::*;
        use Regime::*;
        RoutingPolicy {
            tight_budget: 4096,
            long_history_factor: 32,
            rules: vec![
                rule(Conversational, &[Fits], None, &[M10, FLEXA_MEM, M2], 10,
                    "the whole history fits: show it verbatim"),
                rule(Agentic, &[Fits], None, &[M10, FLEXA_MEM, M7], 3,
                    "the whole trajectory fits: show it verbatim"),
                rule(Conversational, &[Moderate, Long], Some(true), &[FLEXA_MEM, M2, M1], 10,
                    "tight budget: raw-text-keeping memories beat LLM-written ones"),
                rule(Conversational, &[Moderate], Some(false), &[M5, FLEXA_MEM, M2, M10, M1], 20,
                    "QA over moderate dialogue: broad retrieval helps; the graph leads"),
                rule(Conversational, &[Long], Some(false), &[M2, FLEXA_MEM, M1], 20,
                    "QA over long dialogue: graph rebuilds and full context hit limits; BM25 is cheapest"),
                rule(Agentic, &[Moderate, Long], Some(true), &[FLEXA_MEM, M7, M11, M2], 1,
                    "tight agentic budget: unit recovery keeps the observation in view"),
                rule(Agentic, &[Moderate, Long], Some(false), &[M7, M11, FLEXA_MEM, M8, M2, M1], 1,
                    "agentic decisions: breadth hurts; distilled strategies and episode re-prefill lead"),
            ],
        }
    }
}

impl RoutingPolicy {
    /// The depth of a history for this policy.
    pub fn depth(&self, signal: &RoutingSignal) -> Depth {
        let allowance = signal.allowance.max(1) as u64;
        if signal.history_tokens <= allowance {
            Depth::Fits
        } else if signal.history_tokens <= allowance.saturating_mul(self.long_history_factor) {
            Depth::Moderate
        } else {
            Depth::Long
        }
    }

    /// Picks a substrate among `available`; `None` when no rule names one.
    pub fn decide(&self, signal: &RoutingSignal, available: &[MethodId]) -> Option<Decision> {
        let depth = self.depth(signal);
        let tight = signal.budget <= self.tight_budget;
        self.rules
            .iter()
            .filter(|r| r.regime == signal.regime && r.depths.contains(&depth))
            .filter(|r| r.tight.is_none_or(|t| t == tight))
            .find_map(|r| {
                r.prefer
                    .iter()
                    .find(|m| available.contains(m))
                    .map(|m| Decision {
                        method: m.clone(),
                        top_k: r.top_k,
                        reason: r.reason.clone(),
                        depth,
                        secondary: None,
                        origin: Origin::Rule,
                    })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paper::*;

    fn signal(regime: Regime, history_tokens: u64, budget: usize) -> RoutingSignal {
        RoutingSignal {
            regime,
            history_tokens,
            allowance: budget * 9 / 10,
            budget,
        }
    }

    #[test]
    fn depth_bands() {
        let p = RoutingPolicy::default();
        assert_eq!(
            p.depth(&signal(Regime::Conversational, 100, 4096)),
            Depth::Fits
        );
        assert_eq!(
            p.depth(&signal(Regime::Conversational, 20_000, 4096)),
            Depth::Moderate
        );
        assert_eq!(
            p.depth(&signal(Regime::Conversational, 10_000_000, 4096)),
            Depth::Long
        );
    }

    #[test]
    fn short_history_goes_to_full_context() {
        let p = RoutingPolicy::default();
        let d = p
            .decide(&signal(Regime::Conversational, 500, 8192), &[M1, M2, M10])
            .unwrap();
        assert_eq!(d.method, M10);
        assert_eq!(d.depth, Depth::Fits);
    }

    #[test]
    fn regimes_reverse_the_preferred_breadth() {
        let p = RoutingPolicy::default();
        let all = [M1, M2, M5, M7, M10, M11, FLEXA_MEM];
        let qa = p
            .decide(&signal(Regime::Conversational, 100_000, 16_384), &all)
            .unwrap();
        let agent = p
            .decide(&signal(Regime::Agentic, 100_000, 16_384), &all)
            .unwrap();
        assert_eq!(qa.method, M5);
        assert_eq!(agent.method, M7);
        assert!(qa.top_k > agent.top_k, "QA retrieves broader than agents");
    }

    #[test]
    fn tight_budgets_prefer_raw_text_memories() {
        let p = RoutingPolicy::default();
        let d = p
            .decide(
                &signal(Regime::Conversational, 100_000, 2048),
                &[M1, M2, M5, FLEXA_MEM],
            )
            .unwrap();
        assert_eq!(d.method, FLEXA_MEM);
        let d = p
            .decide(
                &signal(Regime::Conversational, 100_000, 2048),
                &[M1, M2, M5],
            )
            .unwrap();
        assert_eq!(d.method, M2);
    }

    #[test]
    fn long_histories_avoid_the_graph() {
        let p = RoutingPolicy::default();
        let d = p
            .decide(
                &signal(Regime::Conversational, 50_000_000, 16_384),
                &[M1, M2, M5],
            )
            .unwrap();
        assert_eq!(d.method, M2);
    }

    #[test]
    fn falls_back_down_the_preference_list_and_reports_none() {
        let p = RoutingPolicy::default();
        let d = p
            .decide(&signal(Regime::Agentic, 100_000, 16_384), &[M1])
            .unwrap();
        assert_eq!(d.method, M1);
        assert!(p
            .decide(&signal(Regime::Agentic, 100_000, 16_384), &[M9])
            .is_none());
    }

    #[test]
    fn policy_round_trips_through_json() {
        let p = RoutingPolicy::default();
        let json = serde_json::to_string(&p).unwrap();
        let back: RoutingPolicy = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
    }
}
