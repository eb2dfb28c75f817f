//! Records written without an LLM, and the checks on records an LLM wrote.
//! A record is a short text about a unit (what happened, with names, numbers
//! and exact strings) with retrieval fields; [`rule_record`] is the
//! fixed-rule writer (FlexA-Mem Section 3.1's fallback) used when no LLM is
//! configured or when the model fails, and [`echoes_prompt`] spots model
//! output that repeats the instructions instead of the content (small models
//! do). [`cut_words`] and [`top_keywords`] are the word-level helpers both
//! use.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use submem_core::Event;

use crate::text::content_words;

/// Retrieval fields of a note.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fields {
    /// Keywords.
    pub keywords: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// A short description.
    pub description: String,
}

impl Fields {
    /// The text embedded after the record (`s‖f`).
    pub fn joined(&self) -> String {
        format!(
            "keywords: {}\ntags: {}\ndescription: {}",
            self.keywords.join(", "),
            self.tags.join(", "),
            self.description
        )
    }
}

/// Who wrote a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// The LLM, with valid or repaired JSON.
    Llm,
    /// The fixed-rule writer.
    Rule,
}

/// A record and its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenRecord {
    /// The record `s`.
    pub record: String,
    /// The fields `f`.
    pub fields: Fields,
    /// Who wrote it.
    pub writer: Writer,
}

/// The first `n` words of `text` (white space normalised).
pub fn cut_words(text: &str, n: usize) -> String {
    text.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keywords by frequency (ties by first occurrence), at most `n`.
pub fn top_keywords(text: &str, n: usize) -> Vec<String> {
    let words = content_words(text);
    let mut count: HashMap<&str, (usize, usize)> = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        if w.len() < 3 || w.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let e = count.entry(w.as_str()).or_insert((0, i));
        e.0 += 1;
    }
    let mut v: Vec<(&str, (usize, usize))> = count.into_iter().collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    v.into_iter().take(n).map(|(w, _)| w.to_string()).collect()
}

/// One line of a unit, as the rule writer sees it.
#[derive(Debug, Clone)]
pub enum RuleLine<'a> {
    /// A turn: date, speaker, text.
    Turn {
        /// Session date.
        date: Option<&'a str>,
        /// Speaker.
        speaker: &'a str,
        /// Text.
        text: &'a str,
    },
    /// A step: number and command.
    Step {
        /// Step number.
        step: u32,
        /// Command.
        action: &'a str,
    },
}

impl<'a> From<&'a Event> for RuleLine<'a> {
    fn from(event: &'a Event) -> Self {
        match event {
            Event::Turn(t) => RuleLine::Turn {
                date: t.session_date.as_deref(),
                speaker: &t.speaker,
                text: &t.text,
            },
            Event::Step(s) => RuleLine::Step {
                step: s.step,
                action: &s.action,
            },
        }
    }
}

/// The fixed-rule record writer (no LLM). For steps it writes the trace of
/// the agent's actions (`step 3: open drawer 1; step 4: …`); for turns the
/// session date, the speakers and the opening words of each turn. Cut at
/// `max_words`.
pub fn rule_record(lines: &[RuleLine<'_>], raw: &str, max_words: usize) -> WrittenRecord {
    let mut parts: Vec<String> = Vec::new();
    let mut speakers: Vec<String> = Vec::new();
    let mut date: Option<&str> = None;
    let n = lines.len().max(1);
    // Spread the word budget over the lines so every line leaves a trace.
    let per_line = (max_words / n).clamp(3, 24);
    for l in lines {
        match l {
            RuleLine::Step { step, action } => {
                let first = action.lines().next().unwrap_or("").trim();
                parts.push(format!("step {step}: {}", cut_words(first, per_line)));
            }
            RuleLine::Turn {
                date: d,
                speaker,
                text,
            } => {
                if date.is_none() {
                    date = *d;
                }
                if !speakers.iter().any(|s| s == speaker) {
                    speakers.push(speaker.to_string());
                }
                parts.push(format!("{speaker}: {}", cut_words(text, per_line)));
            }
        }
    }
    let head = match date {
        Some(d) => format!("[{d}] "),
        None => String::new(),
    };
    let record = cut_words(&format!("{head}{}", parts.join("; ")), max_words);
    let record = if record.is_empty() {
        cut_words(raw, max_words)
    } else {
        record
    };
    let description = raw
        .lines()
        .next()
        .map(|l| cut_words(l, 20))
        .unwrap_or_default();
    let mut tags = speakers;
    if lines.iter().any(|l| matches!(l, RuleLine::Step { .. })) {
        tags.push("agent steps".into());
    }
    WrittenRecord {
        record,
        fields: Fields {
            keywords: top_keywords(raw, 8),
            tags,
            description,
        },
        writer: Writer::Rule,
    }
}

/// Whether `output` repeats the prompt's instructions instead of the content
/// (small models do): most of its content words come from the instructions
/// and few from the content.
pub fn echoes_prompt(output: &str, instructions: &str, content: &str) -> bool {
    let words = content_words(output);
    if words.is_empty() {
        return true;
    }
    let instr: HashSet<String> = content_words(instructions).into_iter().collect();
    let body: HashSet<String> = content_words(content).into_iter().collect();
    let from_instr = words
        .iter()
        .filter(|w| instr.contains(*w) && !body.contains(*w))
        .count();
    let from_body = words.iter().filter(|w| body.contains(*w)).count();
    from_instr * 2 > words.len() && from_body * 4 < words.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_writer_traces_actions() {
        let lines = [
            RuleLine::Step {
                step: 1,
                action: "look",
            },
            RuleLine::Step {
                step: 2,
                action: "open drawer 1\nmore",
            },
        ];
        let w = rule_record(&lines, "look\nopen drawer 1", 80);
        assert_eq!(w.record, "step 1: look; step 2: open drawer 1");
        assert_eq!(w.writer, Writer::Rule);
        assert!(w.fields.keywords.contains(&"drawer".to_string()));
    }

    #[test]
    fn prompt_echoes_are_detected() {
        // FlexA-Mem's merge instruction.
        const INSTRUCTION: &str = "Merge these consecutive records into one record, in time \
             order, keeping names, numbers and exact strings.";
        let inputs = "Ana met Ben at the museum. Ben bought a violin.";
        assert!(echoes_prompt(
            "Merge these consecutive records into one record of at most 120 words, in time order, keeping names, numbers, and exact strings.",
            INSTRUCTION,
            inputs
        ));
        assert!(!echoes_prompt(
            "Ana met Ben at the museum, where Ben bought a violin.",
            INSTRUCTION,
            inputs
        ));
        assert!(echoes_prompt("", INSTRUCTION, inputs));
    }
}
