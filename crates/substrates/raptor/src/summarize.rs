//! Writing a cluster's summary: one LLM call with RAPTOR's prompt ("write a
//! summary of the following, including as many key details as possible"),
//! or the extractive rule that needs no LLM — the cluster's most central
//! sentences, picked by their weight under the cluster's term-frequency
//! centroid (centroid-based extractive summarisation) and shown in their
//! original order, each labelled with its speaker or step. The rule is also
//! the fallback when a call fails, comes back empty, or echoes the prompt
//! (small local models do).

use std::collections::{HashMap, HashSet};
use submem_core::ChatRequest;

/// Shown before a summary's text in a recall.
pub const SUMMARY_PREFIX: &str = "Summary: ";

const INSTRUCTION: &str = "Write a summary of the following, including as many key details as possible (names, dates, places, numbers).";

/// One member of a cluster as the summariser sees it.
#[derive(Debug, Clone, Copy)]
pub struct MemberText<'a> {
    /// Speaker or step label (leaves' events); `None` for summaries.
    pub label: Option<&'a str>,
    /// The text.
    pub text: &'a str,
}

/// The summary request for a cluster whose members' text (already cut to
/// fit) is `context`.
pub fn summary_request(context: &str, max_tokens: usize) -> ChatRequest {
    ChatRequest::instructed(
        "You are a summarizing assistant.",
        format!("{INSTRUCTION}\n\n{context}\n\nSummary:"),
    )
    .with_max_tokens(max_tokens)
}

/// Cleans a model's summary: drops a leading "Summary:" label, joins lines,
/// cuts at `max_words`. `None` when nothing usable is left or the reply
/// repeats the instruction.
pub fn clean_reply(reply: &str, max_words: usize) -> Option<String> {
    let mut t = reply.trim();
    for p in ["Summary:", "summary:", "SUMMARY:"] {
        if let Some(rest) = t.strip_prefix(p) {
            t = rest.trim();
        }
    }
    if t.contains("including as many key details") || t.contains("summarizing assistant") {
        return None;
    }
    let words: Vec<&str> = t.split_whitespace().take(max_words).collect();
    if words.len() < 3 {
        return None;
    }
    Some(words.join(" "))
}

const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was",
    "one", "our", "out", "has", "him", "his", "how", "its", "may", "new", "now", "see", "two",
    "who", "did", "get", "got", "she", "too", "use", "that", "with", "have", "this", "will",
    "your", "from", "they", "been", "were", "what", "when", "which", "there", "their", "them",
    "then", "than", "into", "just", "like", "some", "also", "very", "about", "would", "could",
    "should", "really", "yeah", "it's", "i'm", "that's",
];

fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// Splits text into sentences at line breaks and at `.`, `!`, `?` followed
/// by white space.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        for (i, &(pos, c)) in chars.iter().enumerate() {
            let at_break = matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_some_and(|(_, n)| n.is_whitespace());
            if at_break {
                let end = pos + c.len_utf8();
                let s = line[start..end].trim();
                if !s.is_empty() {
                    out.push(s.to_string());
                }
                start = end;
            }
        }
        let s = line[start..].trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
    }
    out
}

/// The extractive summary of `members`: the sentences with the highest
/// centroid weight (sum of the cluster frequency of their distinct content
/// words, divided by the square root of their length), taken while they fit
/// `max_words`, shown in original order as `label: sentence`.
pub fn extractive(members: &[MemberText<'_>], max_words: usize) -> String {
    struct Cand {
        order: usize,
        shown: String,
        words: usize,
        score: f64,
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut cands: Vec<(Cand, Vec<String>)> = Vec::new();
    for m in members {
        for s in sentences(m.text) {
            if !seen.insert(s.clone()) {
                continue;
            }
            let shown = match m.label {
                Some(l) => format!("{l}: {s}"),
                None => s.clone(),
            };
            let words = shown.split_whitespace().count();
            let order = cands.len();
            cands.push((
                Cand {
                    order,
                    shown,
                    words,
                    score: 0.0,
                },
                content_words(&s),
            ));
        }
    }
    let mut tf: HashMap<&str, f64> = HashMap::new();
    for (_, ws) in &cands {
        for w in ws {
            *tf.entry(w.as_str()).or_default() += 1.0;
        }
    }
    let mut scored: Vec<Cand> = cands
        .iter()
        .map(|(c, ws)| {
            let distinct: HashSet<&str> = ws.iter().map(String::as_str).collect();
            let weight: f64 = distinct.iter().map(|w| tf[w]).sum();
            Cand {
                order: c.order,
                shown: c.shown.clone(),
                words: c.words,
                score: weight / ((ws.len() as f64) + 1.0).sqrt(),
            }
        })
        .collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));
    let mut chosen: Vec<Cand> = Vec::new();
    let mut used = 0;
    for c in scored {
        if used + c.words <= max_words {
            used += c.words;
            chosen.push(c);
        }
    }
    if chosen.is_empty() {
        // Every sentence is longer than the cap: cut the first member.
        return members
            .first()
            .map(|m| {
                m.text
                    .split_whitespace()
                    .take(max_words)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
    }
    chosen.sort_by_key(|c| c.order);
    chosen
        .into_iter()
        .map(|c| c.shown)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_at_ends_and_lines() {
        assert_eq!(
            sentences("I went home. It was 3.5 km!\nThen slept"),
            vec!["I went home.", "It was 3.5 km!", "Then slept"]
        );
    }

    #[test]
    fn extractive_keeps_central_sentences_in_order_and_within_words() {
        let m = [
            MemberText {
                label: Some("Ana"),
                text: "I adopted a grey cat. The weather is odd.",
            },
            MemberText {
                label: Some("Ben"),
                text: "Your grey cat sleeps on the grey sofa.",
            },
            MemberText {
                label: None,
                text: "Unrelated words here entirely.",
            },
        ];
        let s = extractive(&m, 16);
        assert_eq!(
            s,
            "Ana: I adopted a grey cat. Ben: Your grey cat sleeps on the grey sofa."
        );
        assert!(s.split_whitespace().count() <= 16);
    }

    #[test]
    fn replies_are_cleaned_or_refused() {
        assert_eq!(
            clean_reply("Summary: Ana adopted\na cat in May.", 4).as_deref(),
            Some("Ana adopted a cat")
        );
        assert!(clean_reply("ok", 10).is_none());
        assert!(clean_reply(
            "Write a summary of the following, including as many key details as possible",
            50
        )
        .is_none());
    }
}
