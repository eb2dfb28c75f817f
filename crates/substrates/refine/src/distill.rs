//! M7's writer: one LLM call judges a finished trajectory, one distills 1–3
//! strategies from it (ReasoningBank, Section 3.2: LLM-as-a-judge, then
//! extraction from successes *and* failures). Replies are read leniently
//! with FlexA-Mem's JSON repair ([`submem_kit::json_repair`]).
//!
//! Fallbacks: the environment's signal replaces the judge call when the data
//! has one; a reply that says neither success nor failure leaves the outcome
//! unknown; an LLM failure or a hopeless distillation reply gives the rule
//! strategy ([`rule_strategy`]): the task and the trajectory's action
//! sequence, which is also what runs when no LLM is configured.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

use submem_core::{ChatRequest, Event, Llm, TokenCounter};
use submem_kit::json_repair::{parse_lenient_object, value_text};

use crate::journal::{episode_task, trajectory_text, Entry, Signal};
use crate::StrategyConfig;

/// How a trajectory went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The task was done.
    Success,
    /// It was not.
    Failure,
    /// Nobody could tell (no signal, no usable judge reply).
    Unknown,
}

/// Who decided the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgedBy {
    /// The environment's success/failure marker.
    Environment,
    /// The LLM judge.
    Llm,
    /// Nobody (no LLM, or the reply was unusable).
    None,
}

/// One distilled strategy (ReasoningBank's memory item).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Strategy {
    /// Short name.
    pub title: String,
    /// One-sentence summary.
    pub description: String,
    /// The advice itself.
    pub content: String,
    /// Whether the LLM wrote it (false: the rule fallback).
    pub by_llm: bool,
}

impl Strategy {
    /// The text a read shows and the embedder indexes.
    pub fn render(&self) -> String {
        format!(
            "Strategy: {}\n{}\n{}",
            self.title, self.description, self.content
        )
    }
}

/// What the writer made of one episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distilled {
    /// The outcome.
    pub outcome: Outcome,
    /// Who decided it.
    pub judged_by: JudgedBy,
    /// 1–3 strategies.
    pub strategies: Vec<Strategy>,
}

fn judge_request(task: &str, trajectory: &str, config: &StrategyConfig) -> ChatRequest {
    ChatRequest::instructed(
        "You judge whether an agent completed its task. Answer with one word: SUCCESS or FAILURE.",
        format!(
            "Task: {task}\n\nTrajectory:\n{trajectory}\n\nDid the agent complete the task? Answer SUCCESS or FAILURE."
        ),
    )
    .with_max_tokens(config.judge_max_tokens)
}

/// Reads a judge reply: the first word that says success (`success…`,
/// `succeed…`, `yes`, `completed`) or failure (`fail…`, `no`, `not`,
/// `unsuccessful`) decides.
pub fn parse_verdict(reply: &str) -> Outcome {
    let lower = reply.to_lowercase();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        if word.starts_with("succe") || word == "yes" || word == "completed" {
            return Outcome::Success;
        }
        if word.starts_with("fail") || word == "no" || word == "not" || word == "unsuccessful" {
            return Outcome::Failure;
        }
    }
    Outcome::Unknown
}

fn distill_request(
    task: &str,
    outcome: Outcome,
    trajectory: &str,
    config: &StrategyConfig,
) -> ChatRequest {
    let (label, ask) = match outcome {
        Outcome::Success => (
            "success",
            "what made it work and can be reused on similar tasks",
        ),
        Outcome::Failure => (
            "failure",
            "lessons on what went wrong and how to avoid it on similar tasks",
        ),
        Outcome::Unknown => ("unknown", "reusable advice for similar tasks"),
    };
    ChatRequest::instructed(
        "You extract reusable strategies from an agent's past attempt. Reply with JSON only.",
        format!(
            "Task: {task}\nOutcome: {label}\n\nTrajectory:\n{trajectory}\n\n\
             Write 1 to {} strategies: {ask}. Reply as JSON: \
             {{\"strategies\": [{{\"title\": \"short name\", \"description\": \"one sentence\", \
             \"content\": \"concrete advice in 1-3 sentences\"}}]}}",
            config.max_strategies
        ),
    )
    .with_max_tokens(config.distill_max_tokens)
    .with_json(true)
}

fn words(text: &str, max: usize) -> String {
    text.split_whitespace()
        .take(max)
        .collect::<Vec<_>>()
        .join(" ")
}

fn strategy_from(v: &serde_json::Map<String, Value>, config: &StrategyConfig) -> Option<Strategy> {
    let field = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| v.get(*n).map(value_text))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let title = words(&field(&["title", "name"]), 16);
    let description = words(&field(&["description", "summary"]), 40);
    let content = words(
        &field(&["content", "advice", "strategy"]),
        config.content_words,
    );
    if content.is_empty() && description.is_empty() {
        return None;
    }
    Some(Strategy {
        title: if title.is_empty() {
            words(&description, 8)
        } else {
            title
        },
        description,
        content,
        by_llm: true,
    })
}

/// Reads a distillation reply: `{"strategies": [...]}`, a bare list item, or
/// one strategy object. Empty when nothing usable is there.
pub fn parse_strategies(reply: &str, config: &StrategyConfig) -> Vec<Strategy> {
    let Some(obj) = parse_lenient_object(reply) else {
        return Vec::new();
    };
    let list = ["strategies", "memories", "items"]
        .iter()
        .find_map(|k| match obj.get(*k) {
            Some(Value::Array(a)) => Some(a.clone()),
            Some(Value::Object(o)) => Some(vec![Value::Object(o.clone())]),
            _ => None,
        });
    let out: Vec<Strategy> = match list {
        Some(items) => items
            .iter()
            .filter_map(|i| match i {
                Value::Object(o) => strategy_from(o, config),
                Value::String(s) if !s.trim().is_empty() => Some(Strategy {
                    title: words(s, 8),
                    description: String::new(),
                    content: words(s, config.content_words),
                    by_llm: true,
                }),
                _ => None,
            })
            .collect(),
        None => strategy_from(&obj, config).into_iter().collect(),
    };
    out.into_iter().take(config.max_strategies).collect()
}

/// The no-LLM strategy: the task, the outcome, and the trajectory's action
/// sequence (thoughts and repeats dropped; for a conversation, its turns),
/// cut to [`StrategyConfig::rule_content_tokens`].
pub fn rule_strategy(
    entries: &[&Entry],
    outcome: Outcome,
    counter: &dyn TokenCounter,
    config: &StrategyConfig,
) -> Strategy {
    let task = episode_task(entries);
    let mut actions: Vec<String> = Vec::new();
    for e in entries {
        let a = match &e.event {
            Event::Step(s) => {
                let a = s.action.trim();
                if a.is_empty() || a.starts_with('[') || a.starts_with("think:") {
                    continue;
                }
                a.to_string()
            }
            Event::Turn(t) => format!("{}: {}", t.speaker, t.text),
        };
        if actions.last() != Some(&a) {
            actions.push(a);
        }
    }
    let is_turns = entries.iter().any(|e| matches!(e.event, Event::Turn(_)));
    let (prefix, sep) = if is_turns {
        ("What was said: ", "\n")
    } else {
        ("Actions in order: ", " -> ")
    };
    let content = counter.truncate(
        &format!("{prefix}{}", actions.join(sep)),
        config.rule_content_tokens,
    );
    let verdict = match outcome {
        Outcome::Success => "succeeded",
        Outcome::Failure => "failed",
        Outcome::Unknown => "ended",
    };
    Strategy {
        title: words(&task, 16),
        description: format!(
            "A past attempt at this that {verdict} after {} steps.",
            entries.len()
        ),
        content,
        by_llm: false,
    }
}

/// Judges and distills one finished episode. Never fails: every LLM problem
/// falls back to the rule path (and is logged).
pub async fn distill_episode(
    llm: Option<&Arc<dyn Llm>>,
    entries: &[&Entry],
    signal: Option<Signal>,
    counter: &dyn TokenCounter,
    config: &StrategyConfig,
) -> Distilled {
    let (mut outcome, mut judged_by) = match signal {
        Some(Signal::Success) => (Outcome::Success, JudgedBy::Environment),
        Some(Signal::Failure) => (Outcome::Failure, JudgedBy::Environment),
        None => (Outcome::Unknown, JudgedBy::None),
    };
    let Some(llm) = llm else {
        return Distilled {
            outcome,
            judged_by,
            strategies: vec![rule_strategy(entries, outcome, counter, config)],
        };
    };
    let task = episode_task(entries);
    let trajectory = trajectory_text(entries, counter, config.prompt_trajectory_tokens);
    if judged_by == JudgedBy::None {
        match llm
            .complete(&judge_request(&task, &trajectory, config))
            .await
        {
            Ok(c) => {
                outcome = parse_verdict(&c.text);
                if outcome != Outcome::Unknown {
                    judged_by = JudgedBy::Llm;
                }
            }
            Err(e) => tracing::warn!(error = %e, "M7 judge call failed; outcome unknown"),
        }
    }
    let strategies = match llm
        .complete(&distill_request(&task, outcome, &trajectory, config))
        .await
    {
        Ok(c) => parse_strategies(&c.text, config),
        Err(e) => {
            tracing::warn!(error = %e, "M7 distillation call failed; rule strategy used");
            Vec::new()
        }
    };
    let strategies = if strategies.is_empty() {
        tracing::debug!("M7 distillation gave no usable strategy; rule strategy used");
        vec![rule_strategy(entries, outcome, counter, config)]
    } else {
        strategies
    };
    Distilled {
        outcome,
        judged_by,
        strategies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(parse_verdict("SUCCESS"), Outcome::Success);
        assert_eq!(parse_verdict("Failure."), Outcome::Failure);
        assert_eq!(
            parse_verdict("The agent failed, not a success"),
            Outcome::Failure
        );
        assert_eq!(parse_verdict("hmm"), Outcome::Unknown);
    }

    #[test]
    fn strategies_from_sloppy_json() {
        let c = StrategyConfig::default();
        let s = parse_strategies(
            "Sure! ```json\n{'strategies': [{title: 'Check drawers', description: 'Look inside', content: 'Open each drawer before moving on',}, {\"title\": \"x\"}]",
            &c,
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].title, "Check drawers");
        assert!(s[0].render().contains("Open each drawer"));
        let one = parse_strategies("{\"title\": \"T\", \"content\": \"C\"}", &c);
        assert_eq!(one[0].content, "C");
        assert!(parse_strategies("no json here", &c).is_empty());
        let many = "{\"strategies\": [\"a\", \"b\", \"c\", \"d\"]}";
        assert_eq!(parse_strategies(many, &c).len(), 3);
    }
}
