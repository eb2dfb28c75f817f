//! Who picks the agent's next command: the game's own walkthrough (the upper
//! bound, and the check that an environment works), a seeded random choice
//! among the admissible commands (the lower bound), or an LLM.
//!
//! Every LLM policy sees the same template, whatever the substrate: a
//! system message, then the objective, the memory block, the current
//! observation and the admissible commands ([`policy_messages`]). `nomem`
//! gets the same template with an empty memory block.
//!
//! - A model that scores choices ([`submem_core::Llm::choice_scoring`], the
//!   embedded SmolLM2) picks the admissible command with the highest mean
//!   log-probability per token as its reply: the prompt runs once per step,
//!   and every answer is admissible.
//! - Any other model (an OpenAI-compatible server) is asked for one command;
//!   the reply is mapped onto an admissible one: the same command ignoring
//!   case, else the longest admissible command the reply contains, else the
//!   one sharing most words (at least half of their union). A reply that maps
//!   to nothing is sent to the environment as it is and counted
//!   ([`Decision::mapped`] false).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use submem_core::{ChatMessage, ChatRequest, ChoiceScoring, Llm, TokenCounter};

use crate::{BenchError, Result};

/// The policy's system message.
pub const POLICY_SYSTEM: &str = "You are an agent in a text game. Read your task, what your memory \
     holds and what you observe now, then reply with exactly one of the admissible commands and nothing else.";

/// Tokens left for the chat markers around the policy's messages.
pub const POLICY_FRAMING_TOKENS: usize = 12;

/// Most tokens of a chat policy's reply.
pub const POLICY_REPLY_TOKENS: usize = 24;

/// What a policy sees at one step.
#[derive(Debug, Clone, Copy)]
pub struct StepView<'a> {
    /// 1-based step number.
    pub step: u32,
    /// The game's goal.
    pub objective: &'a str,
    /// What memory showed (empty for `nomem`).
    pub memory: &'a str,
    /// The current observation.
    pub observation: &'a str,
    /// The commands the environment accepts now.
    pub admissible: &'a [String],
}

/// What a policy decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The command sent to the environment.
    pub command: String,
    /// The model's raw reply (chat policies).
    pub reply: Option<String>,
    /// Whether a chat reply mapped onto an admissible command (`None` for
    /// policies that always choose one).
    pub mapped: Option<bool>,
    /// LLM tokens the decision used (prompt + reply).
    pub tokens: u64,
    /// LLM calls.
    pub calls: u64,
}

impl Decision {
    fn plain(command: String) -> Self {
        Decision {
            command,
            reply: None,
            mapped: None,
            tokens: 0,
            calls: 0,
        }
    }
}

/// An episode's own state the policy may use: the walkthrough and a seeded
/// random stream, both fixed by the game (not the substrate), so that the
/// baselines play the same game the same way under every substrate.
#[derive(Debug)]
pub struct EpisodeState {
    /// The game's solution.
    pub walkthrough: Vec<String>,
    /// Random draws for the random policy.
    pub rng: ChaCha8Rng,
}

/// Picks commands.
#[async_trait]
pub trait Policy: Send + Sync + std::fmt::Debug {
    /// The name in results (`walkthrough`, `random`, `llm:<model>`).
    fn name(&self) -> String;
    /// `|P|`: tokens of this step's prompt without memory, for the query's
    /// allowance (0 for policies without a prompt).
    fn fixed_prompt_tokens(&self, view: &StepView<'_>) -> usize;
    /// The next command.
    async fn choose(&self, view: &StepView<'_>, episode: &mut EpisodeState) -> Result<Decision>;
}

/// The policy's messages (see the module docs).
pub fn policy_messages(view: &StepView<'_>) -> Vec<ChatMessage> {
    let mut user = String::with_capacity(view.memory.len() + view.observation.len() + 512);
    user.push_str("Your task: ");
    user.push_str(view.objective.trim());
    user.push_str("\n\nMemory:\n");
    user.push_str(if view.memory.trim().is_empty() {
        "(empty)"
    } else {
        view.memory.trim()
    });
    user.push_str("\n\nCurrent observation:\n");
    user.push_str(view.observation.trim());
    user.push_str("\n\nAdmissible commands:\n");
    for c in view.admissible {
        user.push_str("- ");
        user.push_str(c);
        user.push('\n');
    }
    user.push_str("\nYour next command:");
    vec![ChatMessage::system(POLICY_SYSTEM), ChatMessage::user(user)]
}

/// `|P|` of the template for `view` with an empty memory block.
pub fn template_tokens(view: &StepView<'_>, counter: &dyn TokenCounter) -> usize {
    let empty = StepView {
        memory: "",
        ..*view
    };
    policy_messages(&empty)
        .iter()
        .map(|m| counter.count(&m.content))
        .sum::<usize>()
        + POLICY_FRAMING_TOKENS
        + POLICY_REPLY_TOKENS
}

/// The game's walkthrough, step by step ("look" once it runs out).
#[derive(Debug, Default)]
pub struct WalkthroughPolicy;

#[async_trait]
impl Policy for WalkthroughPolicy {
    fn name(&self) -> String {
        "walkthrough".into()
    }
    fn fixed_prompt_tokens(&self, _: &StepView<'_>) -> usize {
        0
    }
    async fn choose(&self, view: &StepView<'_>, episode: &mut EpisodeState) -> Result<Decision> {
        let i = view.step as usize - 1;
        Ok(Decision::plain(
            episode
                .walkthrough
                .get(i)
                .cloned()
                .unwrap_or_else(|| "look".into()),
        ))
    }
}

/// A uniform choice among the admissible commands, from the episode's seeded stream.
#[derive(Debug, Default)]
pub struct RandomPolicy;

#[async_trait]
impl Policy for RandomPolicy {
    fn name(&self) -> String {
        "random".into()
    }
    fn fixed_prompt_tokens(&self, _: &StepView<'_>) -> usize {
        0
    }
    async fn choose(&self, view: &StepView<'_>, episode: &mut EpisodeState) -> Result<Decision> {
        if view.admissible.is_empty() {
            return Ok(Decision::plain("look".into()));
        }
        let i = episode.rng.random_range(0..view.admissible.len());
        Ok(Decision::plain(view.admissible[i].clone()))
    }
}

/// An LLM choosing by likelihood when it can score choices, by a chat reply
/// mapped onto the admissible commands otherwise (see the module docs).
#[derive(Debug)]
pub struct LlmPolicy {
    llm: Arc<dyn Llm>,
    scoring: Option<Arc<dyn ChoiceScoring>>,
    counter: Arc<dyn TokenCounter>,
}

impl LlmPolicy {
    /// A policy on `llm`; `counter` counts `|P|` in budget tokens.
    pub fn new(llm: Arc<dyn Llm>, counter: Arc<dyn TokenCounter>) -> Self {
        LlmPolicy {
            scoring: llm.choice_scoring(),
            llm,
            counter,
        }
    }

    /// Whether it chooses by likelihood.
    pub fn scores_choices(&self) -> bool {
        self.scoring.is_some()
    }
}

#[async_trait]
impl Policy for LlmPolicy {
    fn name(&self) -> String {
        let how = if self.scoring.is_some() {
            "scored"
        } else {
            "chat"
        };
        format!("llm-{how}:{}", self.llm.name())
    }
    fn fixed_prompt_tokens(&self, view: &StepView<'_>) -> usize {
        template_tokens(view, self.counter.as_ref())
    }
    async fn choose(&self, view: &StepView<'_>, _: &mut EpisodeState) -> Result<Decision> {
        let messages = policy_messages(view);
        let service = |e| BenchError::Service {
            what: format!("policy {} at step {}", self.llm.name(), view.step),
            source: e,
        };
        if let Some(scoring) = &self.scoring {
            if view.admissible.is_empty() {
                return Ok(Decision::plain("look".into()));
            }
            let scores = scoring
                .score_choices(&messages, view.admissible)
                .await
                .map_err(service)?;
            let best = scores.best().unwrap_or(0);
            return Ok(Decision {
                command: view.admissible[best].clone(),
                reply: None,
                mapped: None,
                tokens: scores.usage.input_tokens + scores.usage.output_tokens,
                calls: 1,
            });
        }
        let req = ChatRequest::new(messages).with_max_tokens(POLICY_REPLY_TOKENS);
        let c = self.llm.complete(&req).await.map_err(service)?;
        let (command, mapped) = match map_reply(&c.text, view.admissible) {
            Some(i) => (view.admissible[i].clone(), true),
            None => (clean_reply(&c.text), false),
        };
        Ok(Decision {
            command,
            reply: Some(c.text),
            mapped: Some(mapped),
            tokens: c.usage.input_tokens + c.usage.output_tokens,
            calls: 1,
        })
    }
}

/// The first non-empty line of a reply, without a leading `>`, a
/// `Command:` label, quotes or a final full stop.
pub fn clean_reply(reply: &str) -> String {
    let line = reply
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // A list bullet or the game's prompt before the command.
    let mut line = line.trim_start_matches(['>', '-', '*']).trim();
    for label in [
        "Command:",
        "command:",
        "Next command:",
        "Your next command:",
    ] {
        if let Some(rest) = line.strip_prefix(label) {
            line = rest.trim();
        }
    }
    line.trim_matches(|c| c == '"' || c == '\'' || c == '`' || c == '*')
        .trim_end_matches('.')
        .trim()
        .to_string()
}

/// The admissible command a chat reply means (see the module docs).
pub fn map_reply(reply: &str, admissible: &[String]) -> Option<usize> {
    let clean = clean_reply(reply).to_lowercase();
    if clean.is_empty() {
        return None;
    }
    if let Some(i) = admissible.iter().position(|c| c.to_lowercase() == clean) {
        return Some(i);
    }
    let whole = reply.to_lowercase();
    let contained = admissible
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let c = c.to_lowercase();
            // As whole words: "go to desk 1" must not match inside "desk 10".
            whole.match_indices(&c).any(|(at, _)| {
                let before = whole[..at].chars().next_back();
                let after = whole[at + c.len()..].chars().next();
                before.is_none_or(|b| !b.is_alphanumeric())
                    && after.is_none_or(|a| !a.is_alphanumeric())
            })
        })
        .max_by_key(|(i, c)| (c.len(), std::cmp::Reverse(*i)));
    if let Some((i, _)) = contained {
        return Some(i);
    }
    let words = |s: &str| -> HashSet<String> {
        s.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let reply_words = words(&clean);
    let mut best: Option<(usize, f64)> = None;
    for (i, c) in admissible.iter().enumerate() {
        let cw = words(c);
        let union = reply_words.union(&cw).count();
        if union == 0 {
            continue;
        }
        let jaccard = reply_words.intersection(&cw).count() as f64 / union as f64;
        if jaccard >= 0.5 && best.is_none_or(|(_, b)| jaccard > b) {
            best = Some((i, jaccard));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use submem_core::test_utils::{ScriptedLlm, WhitespaceCounter};

    fn cmds() -> Vec<String> {
        [
            "go to desk 1",
            "go to desk 10",
            "take apple 1 from desk 1",
            "open fridge 1",
            "look",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn replies_map_exactly_then_by_containment_then_by_words() {
        let a = cmds();
        assert_eq!(map_reply("Go to desk 1.", &a), Some(0));
        assert_eq!(map_reply("> look\nbecause", &a), Some(4));
        assert_eq!(map_reply("Command: \"open fridge 1\"", &a), Some(3));
        // Contained as whole words; the longest wins.
        assert_eq!(
            map_reply("I will take apple 1 from desk 1 now", &a),
            Some(2)
        );
        assert_eq!(map_reply("I go to desk 10", &a), Some(1));
        // Closest by shared words.
        assert_eq!(map_reply("take the apple from desk 1", &a), Some(2));
        assert_eq!(map_reply("dance", &a), None);
        assert_eq!(map_reply("", &a), None);
        assert_eq!(clean_reply("  \n> Command: eat meal.\n"), "eat meal");
        assert_eq!(map_reply("- open fridge 1", &a), Some(3));
    }

    #[test]
    fn the_template_is_the_same_with_or_without_memory_but_the_memory() {
        let a = cmds();
        let view = StepView {
            step: 3,
            objective: "Put an apple in the fridge.",
            memory: "",
            observation: "You see a desk.",
            admissible: &a,
        };
        let empty = policy_messages(&view);
        assert!(empty[1].content.contains("Memory:\n(empty)"));
        assert!(empty[1].content.contains("- open fridge 1\n"));
        let full = policy_messages(&StepView {
            memory: "> go to desk 1\nOn the desk 1, you see an apple 1.",
            ..view
        });
        assert_eq!(empty[0], full[0]);
        assert!(full[1]
            .content
            .contains("On the desk 1, you see an apple 1."));
        let p = template_tokens(&view, &WhitespaceCounter);
        let counted: usize = empty
            .iter()
            .map(|m| WhitespaceCounter.count(&m.content))
            .sum();
        assert_eq!(p, counted + POLICY_FRAMING_TOKENS + POLICY_REPLY_TOKENS);
    }

    #[tokio::test]
    async fn baselines_follow_the_walkthrough_or_the_seeded_stream() {
        let a = cmds();
        let view = |step| StepView {
            step,
            objective: "",
            memory: "",
            observation: "",
            admissible: &a,
        };
        let mut ep = EpisodeState {
            walkthrough: vec!["open fridge 1".into()],
            rng: ChaCha8Rng::seed_from_u64(7),
        };
        assert_eq!(
            WalkthroughPolicy
                .choose(&view(1), &mut ep)
                .await
                .unwrap()
                .command,
            "open fridge 1"
        );
        assert_eq!(
            WalkthroughPolicy
                .choose(&view(2), &mut ep)
                .await
                .unwrap()
                .command,
            "look"
        );
        let draw = |seed| async move {
            let mut ep = EpisodeState {
                walkthrough: vec![],
                rng: ChaCha8Rng::seed_from_u64(seed),
            };
            let mut out = vec![];
            for s in 1..=8 {
                out.push(
                    RandomPolicy
                        .choose(&view(s), &mut ep)
                        .await
                        .unwrap()
                        .command,
                );
            }
            out
        };
        assert_eq!(draw(1).await, draw(1).await);
        assert_ne!(draw(1).await, draw(2).await);
    }

    #[tokio::test]
    async fn a_chat_model_is_asked_and_its_reply_mapped_or_counted() {
        let a = cmds();
        let view = StepView {
            step: 1,
            objective: "o",
            memory: "",
            observation: "x",
            admissible: &a,
        };
        let mut ep = EpisodeState {
            walkthrough: vec![],
            rng: ChaCha8Rng::seed_from_u64(0),
        };
        let llm: Arc<dyn Llm> = Arc::new(ScriptedLlm::new(vec![
            "open the fridge 1".into(),
            "fly to the moon".into(),
        ]));
        let p = LlmPolicy::new(llm, Arc::new(WhitespaceCounter));
        assert!(!p.scores_choices());
        let d = p.choose(&view, &mut ep).await.unwrap();
        assert_eq!(
            (d.command.as_str(), d.mapped),
            ("open fridge 1", Some(true))
        );
        assert_eq!(d.calls, 1);
        let d = p.choose(&view, &mut ep).await.unwrap();
        assert_eq!(
            (d.command.as_str(), d.mapped),
            ("fly to the moon", Some(false))
        );
    }
}
