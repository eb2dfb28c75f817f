//! Agent trajectories as histories of [`Event::Step`]s, with probe questions
//! about earlier steps, so that agentic memory is measured without a live
//! environment.
//!
//! - [`load_alfworld`]: ALFWorld ReAct text trajectories (a JSON object of
//!   name → text; the text is an opening observation with `Your task is to: …`,
//!   then `> action` lines each followed by the environment's output). Step 1
//!   is the opening observation (action `[start]`); every `> …` line (thoughts
//!   included) is one more step. Probes are generated from the text:
//!   "which receptacle did the agent take X from?" for every `You pick up the X
//!   from the Y.`, and "where did the agent see X?" for objects seen in exactly
//!   one receptacle.
//! - [`load_probes`]: the probe JSONL format documented in [`super`].
//!
//! Probes are asked after the whole episode, as agentic queries whose newest
//! unit is the last step.

use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use submem_core::{Event, Regime, Step};

use super::{
    evidence_text, read_file, Conversation, Dataset, DatasetKind, HistorySource, LoadWarnings,
    Question, QuestionKind,
};
use crate::{BenchError, Result};

/// Steps per write batch for trajectories.
pub const STEPS_PER_BATCH: usize = 10;

/// Loads an ALFWorld trajectory file.
pub fn load_alfworld(path: &Path) -> Result<Dataset> {
    parse_alfworld(&read_file(path)?, path)
}

/// Parses ALFWorld trajectory JSON text.
pub fn parse_alfworld(text: &str, path: &Path) -> Result<Dataset> {
    const FORMAT: &str = "ALFWorld trajectories";
    let root: Value = serde_json::from_str(text)
        .map_err(|e| BenchError::format(path, FORMAT, format!("invalid JSON: {e}")))?;
    let map = root.as_object().ok_or_else(|| {
        BenchError::format(
            path,
            FORMAT,
            "expected an object of name -> trajectory text",
        )
    })?;
    let mut warnings = LoadWarnings::default();
    let mut conversations = Vec::new();
    for (name, v) in map {
        let Some(t) = v.as_str() else {
            warnings
                .notes
                .push(format!("{name}: not a text trajectory, skipped"));
            continue;
        };
        let (task, steps) = split_trajectory(t);
        if steps.is_empty() {
            warnings
                .notes
                .push(format!("{name}: empty trajectory, skipped"));
            continue;
        }
        let probes = alfworld_probes(&steps);
        conversations.push(episode(name, task.unwrap_or_default(), steps, probes)?);
    }
    Dataset::loaded(
        DatasetKind::Alfworld,
        conversations,
        warnings,
        path,
        FORMAT,
        "no trajectories",
    )
}

/// Splits a ReAct text into (task, [(action, observation)]).
fn split_trajectory(text: &str) -> (Option<String>, Vec<(String, String)>) {
    let mut task = None;
    let mut steps: Vec<(String, String)> = vec![("[start]".into(), String::new())];
    for line in text.lines() {
        if let Some(action) = line.strip_prefix("> ") {
            steps.push((action.trim().to_string(), String::new()));
            continue;
        }
        if task.is_none() {
            if let Some(t) = line.strip_prefix("Your task is to: ") {
                task = Some(t.trim().to_string());
            }
        }
        if let Some(last) = steps.last_mut() {
            if !last.1.is_empty() {
                last.1.push('\n');
            }
            last.1.push_str(line);
        }
    }
    if steps.len() == 1 && steps[0].1.trim().is_empty() {
        steps.clear();
    }
    (task, steps)
}

/// A probe: (question, answer, evidence step numbers, category).
type Probe = (String, String, Vec<u32>, String);

fn alfworld_probes(steps: &[(String, String)]) -> Vec<Probe> {
    let mut probes = Vec::new();
    let mut seen: HashMap<String, Vec<(String, u32)>> = HashMap::new();
    for (i, (_, obs)) in steps.iter().enumerate() {
        let n = i as u32 + 1;
        for line in obs.lines() {
            if let Some(rest) = line.strip_prefix("You pick up the ") {
                if let Some((obj, recv)) = rest.trim_end_matches('.').split_once(" from the ") {
                    probes.push((
                        format!("Which receptacle did the agent take the {obj} from?"),
                        recv.to_string(),
                        vec![n],
                        "pick-up".to_string(),
                    ));
                }
            }
            // "On the desk 1, you see a key 1, and a pen 2." / "... In it, you see ..."
            let receptacle = line
                .strip_prefix("On the ")
                .and_then(|r| r.split_once(", you see "))
                .map(|(r, items)| (r.to_string(), items))
                .or_else(|| {
                    let (head, items) = line.split_once("In it, you see ")?;
                    let r = head.strip_prefix("You open the ")?.split_once('.')?.0;
                    Some((r.to_string(), items))
                });
            if let Some((recv, items)) = receptacle {
                for item in items.trim_end_matches('.').split(", ") {
                    let item = item
                        .trim_start_matches("and ")
                        .trim_start_matches("a ")
                        .trim_start_matches("an ");
                    if !item.is_empty() && item != "nothing" {
                        seen.entry(item.to_string())
                            .or_default()
                            .push((recv.clone(), n));
                    }
                }
            }
        }
    }
    let mut unique: Vec<_> = seen.into_iter().filter(|(_, v)| v.len() == 1).collect();
    unique.sort();
    for (obj, places) in unique.into_iter().take(5) {
        let (recv, n) = &places[0];
        probes.push((
            format!("Where did the agent see the {obj}?"),
            recv.clone(),
            vec![*n],
            "seen-at".to_string(),
        ));
    }
    probes
}

fn episode(
    id: &str,
    task: String,
    steps: Vec<(String, String)>,
    probes: Vec<Probe>,
) -> Result<Conversation> {
    let events: Vec<Event> = steps
        .into_iter()
        .enumerate()
        .map(|(i, (action, observation))| {
            Event::Step(Step {
                step: i as u32 + 1,
                action,
                observation,
                source_id: format!("{id}:{}", i + 1),
            })
        })
        .collect();
    let texts: HashMap<String, String> = events
        .iter()
        .map(|e| (e.source_id().to_string(), e.content()))
        .collect();
    let newest = events.last().map(Event::render);
    let questions: Vec<Question> = probes
        .into_iter()
        .enumerate()
        .map(|(i, (question, answer, ev, category))| Question {
            id: format!("{id}-p{i}"),
            text: if task.is_empty() {
                question
            } else {
                format!("Task: {task}\nQuestion: {question}")
            },
            answer: Some(answer),
            evidence: ev.iter().map(|n| format!("{id}:{n}")).collect(),
            category,
            kind: QuestionKind::Standard,
            regime: Regime::Agentic,
            newest: newest.clone(),
            date: None,
        })
        .collect();
    let evidence_text = evidence_text(&questions, &texts);
    Ok(Conversation {
        id: id.to_string(),
        history: HistorySource::Sessions(Arc::new(
            events
                .chunks(STEPS_PER_BATCH)
                .map(<[Event]>::to_vec)
                .collect(),
        )),
        questions,
        evidence_text,
    })
}

#[derive(Debug, Deserialize)]
struct ProbeEpisode {
    id: String,
    #[serde(default)]
    task: String,
    steps: Vec<ProbeStep>,
    #[serde(default)]
    probes: Vec<ProbeQuestion>,
}

#[derive(Debug, Deserialize)]
struct ProbeStep {
    action: String,
    #[serde(default)]
    observation: String,
}

#[derive(Debug, Deserialize)]
struct ProbeQuestion {
    id: Option<String>,
    question: String,
    answer: Value,
    #[serde(default)]
    evidence: Vec<u32>,
    category: Option<String>,
}

/// Loads an agent-probe JSONL file (format in [`super`]).
pub fn load_probes(path: &Path) -> Result<Dataset> {
    parse_probes(&read_file(path)?, path)
}

/// Parses agent-probe JSONL text.
pub fn parse_probes(text: &str, path: &Path) -> Result<Dataset> {
    const FORMAT: &str = "agent-probe JSONL";
    let mut warnings = LoadWarnings::default();
    let mut conversations = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let ep: ProbeEpisode = serde_json::from_str(line)
            .map_err(|e| BenchError::format(path, FORMAT, format!("line {}: {e}", ln + 1)))?;
        let n = ep.steps.len() as u32;
        let mut probes = Vec::new();
        for (i, p) in ep.probes.into_iter().enumerate() {
            let bad: Vec<u32> = p
                .evidence
                .iter()
                .copied()
                .filter(|s| *s == 0 || *s > n)
                .collect();
            if !bad.is_empty() {
                warnings
                    .unknown_evidence
                    .push(format!("{} probe {i}: steps {bad:?} out of 1..={n}", ep.id));
            }
            let answer = super::answer_string(&p.answer).unwrap_or_default();
            let _ = p.id; // ids are regenerated to keep them unique per episode
            probes.push((
                p.question,
                answer,
                p.evidence
                    .into_iter()
                    .filter(|s| *s >= 1 && *s <= n)
                    .collect(),
                p.category.unwrap_or_else(|| "probe".into()),
            ));
        }
        let steps = ep
            .steps
            .into_iter()
            .map(|s| (s.action, s.observation))
            .collect();
        conversations.push(episode(&ep.id, ep.task, steps, probes)?);
    }
    Dataset::loaded(
        DatasetKind::Probes,
        conversations,
        warnings,
        path,
        FORMAT,
        "no episodes",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    #[test]
    fn alfworld_text_becomes_steps_and_probes() {
        let d = load_alfworld(&fixture("alfworld-mini.json")).unwrap();
        assert_eq!(d.conversations.len(), 1);
        let c = &d.conversations[0];
        let events: Vec<Event> = c.history.batches().flatten().collect();
        let Event::Step(first) = &events[0] else {
            panic!("step expected")
        };
        assert_eq!(first.action, "[start]");
        assert!(first
            .observation
            .contains("Your task is to: put some spraybottle on toilet."));
        let Event::Step(s3) = &events[3] else {
            panic!("step expected")
        };
        assert_eq!(s3.action, "go to cabinet 2");
        assert_eq!(s3.observation, "The cabinet 2 is closed.");
        let pick = c
            .questions
            .iter()
            .find(|q| q.category == "pick-up")
            .unwrap();
        assert!(pick.text.contains("spraybottle 2"), "{}", pick.text);
        assert_eq!(pick.answer.as_deref(), Some("cabinet 2"));
        let Event::Step(ev) = events
            .iter()
            .find(|e| e.source_id() == pick.evidence[0])
            .unwrap()
        else {
            panic!("step expected")
        };
        assert!(ev.observation.starts_with("You pick up the spraybottle 2"));
        assert_eq!(pick.regime, Regime::Agentic);
        assert!(pick
            .newest
            .as_deref()
            .unwrap_or("")
            .contains("put spraybottle 2"));
        let seen = c
            .questions
            .iter()
            .find(|q| q.text.contains("the candle 1"))
            .unwrap();
        assert_eq!(seen.answer.as_deref(), Some("cabinet 2"));
    }

    #[test]
    fn probe_jsonl_round_trip_and_errors() {
        let d = load_probes(&fixture("probes-mini.jsonl")).unwrap();
        assert_eq!(d.conversations.len(), 2);
        let q = &d.conversations[0].questions[0];
        assert_eq!(q.answer.as_deref(), Some("XK-4821"));
        assert_eq!(q.evidence, vec!["ep1:2"]);
        assert_eq!(d.conversations[0].evidence_text.len(), 2);
        assert_eq!(d.warnings.unknown_evidence.len(), 1);
        let e = parse_probes("{\"id\": 3}\n", Path::new("p.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}
