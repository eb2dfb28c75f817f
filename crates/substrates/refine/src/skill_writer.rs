//! M8's writer: one LLM call per bundle writes the skill (name, when to use
//! it, steps, pitfalls) from the bundle's experiences nearest its centroid,
//! as MemSkill's skill designer does for a cluster of traces. Replies are read
//! leniently with FlexA-Mem's JSON repair; a failed call or a hopeless reply
//! gives the rule skill ([`rule_skill`]), which is also what runs without an
//! LLM.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

use submem_core::{ChatRequest, Event, Llm, TokenCounter};
use submem_kit::json_repair::{parse_lenient_object, string_list, value_text};

use crate::journal::Entry;
use crate::SkillConfig;

/// A written skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// Short name.
    pub name: String,
    /// The rendered skill a read shows.
    pub text: String,
    /// Whether the LLM wrote it (false: the rule fallback).
    pub by_llm: bool,
}

fn experience_line(e: &Entry, max_chars: usize) -> String {
    let line = match &e.event {
        Event::Step(s) => {
            let obs = s.observation.replace('\n', " ");
            format!("> {} -> {}", s.action, obs.trim())
        }
        Event::Turn(t) => format!("{}: {}", t.speaker, t.text),
    };
    line.chars().take(max_chars).collect()
}

fn skill_request(experiences: &[&Entry], config: &SkillConfig) -> ChatRequest {
    let lines = experiences
        .iter()
        .take(config.prompt_experiences)
        .map(|e| format!("- {}", experience_line(e, config.experience_chars)))
        .collect::<Vec<_>>()
        .join("\n");
    ChatRequest::instructed(
        "You turn similar past experiences of an agent into one reusable skill. Reply with JSON only.",
        format!(
            "Similar experiences:\n{lines}\n\nWrite the skill they share. Reply as JSON: \
             {{\"name\": \"short name\", \"when_to_use\": \"one sentence\", \
             \"steps\": [\"step\", \"...\"], \"pitfalls\": [\"pitfall\", \"...\"]}}"
        ),
    )
    .with_max_tokens(config.skill_max_tokens)
    .with_json(true)
}

fn render(name: &str, when: &str, steps: &[String], pitfalls: &[String]) -> String {
    let mut text = format!("Skill: {name}\nWhen to use: {when}");
    if !steps.is_empty() {
        text.push_str("\nSteps: ");
        text.push_str(
            &steps
                .iter()
                .enumerate()
                .map(|(i, s)| format!("{}. {s}", i + 1))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    if !pitfalls.is_empty() {
        text.push_str("\nPitfalls: ");
        text.push_str(&pitfalls.join("; "));
    }
    text
}

/// Reads a skill reply; `None` when it has neither steps nor a usable name.
pub fn parse_skill(reply: &str, config: &SkillConfig) -> Option<Skill> {
    let obj = parse_lenient_object(reply)?;
    let text_of = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| obj.get(*k).map(value_text))
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let name: String = text_of(&["name", "title", "skill"])
        .split_whitespace()
        .take(12)
        .collect::<Vec<_>>()
        .join(" ");
    let when = text_of(&["when_to_use", "when", "use_when"]);
    let steps: Vec<String> = string_list(obj.get("steps"))
        .into_iter()
        .take(config.max_items)
        .collect();
    let pitfalls: Vec<String> = string_list(obj.get("pitfalls"))
        .into_iter()
        .take(config.max_items)
        .collect();
    if steps.is_empty() && (name.is_empty() || when.is_empty()) {
        return None;
    }
    let name = if name.is_empty() {
        "unnamed skill".to_string()
    } else {
        name
    };
    Some(Skill {
        text: render(&name, &when, &steps, &pitfalls),
        name,
        by_llm: true,
    })
}

const STOP: &[&str] = &[
    "the", "a", "an", "and", "or", "to", "of", "in", "on", "is", "are", "was", "you", "i", "it",
    "at", "for", "with", "my", "we", "our", "your", "see", "this", "that", "from", "by", "be",
    "nothing", "happens", "ok", "think", "now", "next", "need",
];

/// The no-LLM skill: a name from the commonest verbs (steps) or words
/// (turns), the bundle's frequent words as when-to-use, its distinct actions
/// (or turns) in time order as steps, and actions that did nothing as
/// pitfalls; cut to [`SkillConfig::rule_skill_tokens`].
pub fn rule_skill(members: &[&Entry], counter: &dyn TokenCounter, config: &SkillConfig) -> Skill {
    let mut words: HashMap<String, usize> = HashMap::new();
    let mut verbs: HashMap<String, usize> = HashMap::new();
    let mut steps: Vec<String> = Vec::new();
    let mut pitfalls: Vec<String> = Vec::new();
    for e in members {
        let (line, text) = match &e.event {
            Event::Step(s) => {
                if let Some(v) = s.action.split_whitespace().next() {
                    if !v.starts_with('[') {
                        *verbs
                            .entry(v.trim_end_matches(':').to_lowercase())
                            .or_default() += 1;
                    }
                }
                if s.observation.trim() == "Nothing happens." {
                    pitfalls.push(format!("'{}' did nothing", s.action));
                }
                (s.action.clone(), format!("{} {}", s.action, s.observation))
            }
            Event::Turn(t) => (format!("{}: {}", t.speaker, t.text), t.text.clone()),
        };
        for w in text
            .split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .filter(|w| {
                w.len() > 2 && !STOP.contains(&w.as_str()) && !w.chars().all(|c| c.is_ascii_digit())
            })
        {
            *words.entry(w).or_default() += 1;
        }
        if !line.trim().is_empty() && !line.starts_with('[') && !steps.contains(&line) {
            steps.push(line);
        }
    }
    let top = |m: &HashMap<String, usize>, n: usize| {
        let mut v: Vec<(&String, &usize)> = m.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.into_iter()
            .take(n)
            .map(|(w, _)| w.clone())
            .collect::<Vec<_>>()
    };
    let name = if verbs.is_empty() {
        top(&words, 3).join(", ")
    } else {
        top(&verbs, 2).join(" / ")
    };
    let when = format!("tasks involving {}", top(&words, 6).join(", "));
    pitfalls.truncate(config.max_items);
    let text = counter.truncate(
        &render(&name, &when, &steps, &pitfalls),
        config.rule_skill_tokens,
    );
    Skill {
        name,
        text,
        by_llm: false,
    }
}

/// Writes one bundle's skill; `nearest` are its members nearest the centroid
/// first, `in_time` the same in write order (for the rule fallback). Never
/// fails: LLM problems fall back to the rule skill (and are logged).
pub async fn write_skill(
    llm: Option<&Arc<dyn Llm>>,
    nearest: &[&Entry],
    in_time: &[&Entry],
    counter: &dyn TokenCounter,
    config: &SkillConfig,
) -> Skill {
    if let Some(llm) = llm {
        match llm.complete(&skill_request(nearest, config)).await {
            Ok(c) => match parse_skill(&c.text, config) {
                Some(s) => return s,
                None => tracing::debug!("M8 skill reply unusable; rule skill used"),
            },
            Err(e) => tracing::warn!(error = %e, "M8 skill call failed; rule skill used"),
        }
    }
    rule_skill(in_time, counter, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sloppy_skills() {
        let c = SkillConfig::default();
        let s = parse_skill(
            "```{name: 'Find objects', when_to_use: 'when an object is missing', steps: ['go to each receptacle', 'open closed ones'], pitfalls: 'skipping drawers'",
            &c,
        )
        .unwrap();
        assert_eq!(s.name, "Find objects");
        assert!(
            s.text
                .contains("Steps: 1. go to each receptacle; 2. open closed ones"),
            "{}",
            s.text
        );
        assert!(s.text.contains("Pitfalls: skipping drawers"));
        assert!(parse_skill("{\"name\": \"x\"}", &c).is_none());
        assert!(parse_skill("nothing", &c).is_none());
    }
}
