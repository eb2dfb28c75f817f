//! What a reader asks ([`Query`]) and what a substrate answers ([`Recall`]),
//! with the budget arithmetic every substrate shares.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

use crate::{Error, Llm, Namespace, Result};

/// Share of the budget a context may fill (`B̄ = 0.95·B`): the rest is headroom
/// for tokeniser disagreements between the budget counter and the reader model.
pub const BUDGET_FILL: f64 = 0.95;

/// Smallest budget a query may carry.
pub const MIN_BUDGET: usize = 64;

/// Largest budget a query may carry (a million tokens).
pub const MAX_BUDGET: usize = 1 << 20;

/// Which kind of consumer is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// A question over a long conversation (LoCoMo, LongMemEval).
    Conversational,
    /// An agent deciding its next action from its task and newest observation.
    Agentic,
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Regime::Conversational => "conversational",
            Regime::Agentic => "agentic",
        })
    }
}

/// A read request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// Whose memory to read.
    pub namespace: Namespace,
    /// The question (conversational) or the task (agentic).
    pub text: String,
    /// The newest unit (agentic regime): the current observation the agent acts on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// Who is asking.
    pub regime: Regime,
    /// Token budget `B` of the whole reader context.
    pub budget: usize,
    /// How many items to retrieve, for substrates that retrieve.
    pub top_k: usize,
    /// Tokens of the fixed prompt `P` (instructions, question) the reader adds
    /// around the memory block.
    pub fixed_prompt_tokens: usize,
}

crate::setters!(Query {
    with_top_k => top_k: usize,
    with_fixed_prompt_tokens => fixed_prompt_tokens: usize,
});

impl Query {
    /// A conversational question with budget `budget` and top-k 10.
    pub fn question(namespace: Namespace, text: impl Into<String>, budget: usize) -> Self {
        Query {
            namespace,
            text: text.into(),
            newest: None,
            regime: Regime::Conversational,
            budget,
            top_k: 10,
            fixed_prompt_tokens: 0,
        }
    }

    /// An agentic query: the task and the newest observation.
    pub fn agentic(
        namespace: Namespace,
        task: impl Into<String>,
        newest: impl Into<String>,
        budget: usize,
    ) -> Self {
        Query {
            namespace,
            text: task.into(),
            newest: Some(newest.into()),
            regime: Regime::Agentic,
            budget,
            top_k: 10,
            fixed_prompt_tokens: 0,
        }
    }

    /// `B̄ = ⌊0.95·B⌋`.
    pub fn filled_budget(&self) -> usize {
        (self.budget as f64 * BUDGET_FILL).floor() as usize
    }

    /// Tokens the memory block may take: `B̄ − |P|` (saturating at 0).
    /// Substrates with a recent window subtract it themselves.
    pub fn allowance(&self) -> usize {
        self.filled_budget()
            .saturating_sub(self.fixed_prompt_tokens)
    }

    /// The text retrieval should match: the question, or task + newest unit.
    pub fn retrieval_text(&self) -> String {
        match &self.newest {
            Some(n) if !n.is_empty() => format!("{}\n{}", self.text, n),
            _ => self.text.clone(),
        }
    }

    /// Rejects budgets and k values no substrate can honour.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_BUDGET..=MAX_BUDGET).contains(&self.budget) {
            return Err(Error::InvalidInput(format!(
                "budget must be in {MIN_BUDGET}..={MAX_BUDGET} tokens, got {}",
                self.budget
            )));
        }
        if self.top_k == 0 {
            return Err(Error::InvalidInput("top_k must be at least 1".into()));
        }
        Ok(())
    }
}

/// At which resolution a history event is shown in a recall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Only as part of an LLM-written summary or record.
    Record,
    /// Some of its text verbatim.
    Excerpt,
    /// All of its text verbatim.
    Raw,
}

/// One history event a recall shows, with how well it matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceHit {
    /// The event's source id (`D1:3`).
    pub source_id: String,
    /// The substrate's relevance score (higher is better; scale is substrate-specific).
    pub score: f32,
    /// How it is shown.
    pub resolution: Resolution,
}

/// What a substrate answers to a [`Query`].
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Recall {
    /// The rendered memory block placed in the reader's context.
    pub text: String,
    /// `text`'s length in budget tokens.
    pub tokens: usize,
    /// The events shown, most relevant first.
    pub sources: Vec<SourceHit>,
    /// An internal-memory substrate's own reader (M9's adapted model, M11's
    /// prefilled cache); when set, the harness asks it instead of the shared
    /// reader, with `text` as the memory block.
    #[serde(skip)]
    pub reader: Option<Arc<dyn Llm>>,
}

impl fmt::Debug for Recall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recall")
            .field("tokens", &self.tokens)
            .field("sources", &self.sources.len())
            .field(
                "reader",
                &self.reader.as_ref().map(|r| r.name().to_string()),
            )
            .field("text", &self.text)
            .finish()
    }
}

impl Recall {
    /// A recall of `text` (`tokens` budget tokens long) showing `sources`,
    /// read by the shared reader (no reader of its own).
    pub fn new(text: String, tokens: usize, sources: Vec<SourceHit>) -> Self {
        Recall {
            text,
            tokens,
            sources,
            reader: None,
        }
    }

    /// An empty recall (nothing to show).
    pub fn empty() -> Self {
        Recall::default()
    }

    /// Source ids shown, most relevant first.
    pub fn source_ids(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(|s| s.source_id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Namespace {
        Namespace::new("u").unwrap()
    }

    #[test]
    fn allowance_arithmetic() {
        let q = Query::question(ns(), "q", 4096).with_fixed_prompt_tokens(96);
        assert_eq!(q.filled_budget(), 3891);
        assert_eq!(q.allowance(), 3795);
        let tiny = Query::question(ns(), "q", 100).with_fixed_prompt_tokens(500);
        assert_eq!(tiny.allowance(), 0);
    }

    #[test]
    fn validation() {
        assert!(Query::question(ns(), "q", 10).validate().is_err());
        assert!(Query::question(ns(), "q", 4096)
            .with_top_k(0)
            .validate()
            .is_err());
        assert!(Query::question(ns(), "q", 4096).validate().is_ok());
    }

    #[test]
    fn agentic_retrieval_text_joins_task_and_newest() {
        let q = Query::agentic(ns(), "find the key", "You see a drawer.", 2048);
        assert_eq!(q.retrieval_text(), "find the key\nYou see a drawer.");
    }
}
