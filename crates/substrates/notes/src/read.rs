//! The read path: seeds by cosine, expansion through links (A-Mem's
//! link-following retrieval), then one of two renderers under the query's
//! allowance.
//!
//! - [`RenderMode::TopK`]: seeds (most similar first), then per seed its
//!   linked notes most similar to the query, each shown whole (raw text and
//!   note line) with [`submem_kit::render_in_time_order`]; a note that does
//!   not fit is skipped.
//! - [`RenderMode::Fit`]: the same ranked notes, then the other notes by
//!   cosine up to [`NotesConfig::fit_pool`], through FlexA-Mem's
//!   fit-or-degrade renderer: a note is shown whole, as an excerpt (its note
//!   line with its best-matching sentences) or as its note line alone,
//!   the highest resolution that fits the room left. Sentences are scored by
//!   the query's content words they share.

use std::collections::HashSet;
use submem_core::{Recall, TokenCounter};
use submem_kit::fit::{FitCandidate, FitOrDegrade, FitPiece};
use submem_kit::text::{content_words, query_terms};
use submem_kit::{render_in_time_order, PackPolicy, RankedUnit};

use crate::store::{Note, Space};
use crate::{NotesConfig, RenderMode};

/// Notes ranked for a query: `(id, cosine)`, seeds first, then link
/// expansions.
pub fn rank(space: &Space, query: &[f32], k: usize, config: &NotesConfig) -> Vec<(u64, f32)> {
    let scored = space.nearest(query, space.notes.len(), None);
    let score_of: std::collections::HashMap<u64, f32> = scored.iter().copied().collect();
    let seeds: Vec<(u64, f32)> = scored.iter().take(k).copied().collect();
    let mut taken: HashSet<u64> = seeds.iter().map(|s| s.0).collect();
    let mut out = seeds.clone();
    for (id, _) in &seeds {
        let Some(note) = space.notes.get(id) else {
            continue;
        };
        let mut linked: Vec<(u64, f32)> = note
            .links
            .iter()
            .filter(|l| !taken.contains(l))
            .filter_map(|l| score_of.get(l).map(|s| (*l, *s)))
            .collect();
        linked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (l, s) in linked.into_iter().take(config.expand_per_seed) {
            taken.insert(l);
            out.push((l, s));
        }
    }
    if config.render == RenderMode::Fit {
        for (id, s) in scored {
            if out.len() >= config.fit_pool.max(k) {
                break;
            }
            if taken.insert(id) {
                out.push((id, s));
            }
        }
    }
    out
}

/// Renders the ranked notes under `allowance`.
pub fn render(
    space: &Space,
    ranked: &[(u64, f32)],
    query_text: &str,
    counter: &dyn TokenCounter,
    allowance: usize,
    config: &NotesConfig,
) -> Recall {
    let notes: Vec<(&Note, f32)> = ranked
        .iter()
        .filter_map(|(id, s)| space.notes.get(id).map(|n| (n, *s)))
        .collect();
    match config.render {
        RenderMode::TopK => {
            let units: Vec<RankedUnit> = notes
                .iter()
                .map(|(n, s)| RankedUnit {
                    position: n.id,
                    source_id: n.source_id.clone(),
                    text: n.rendered(),
                    score: *s,
                })
                .collect();
            render_in_time_order(&units, counter, allowance, PackPolicy::SkipUnfit)
        }
        RenderMode::Fit => {
            let terms: HashSet<String> = query_terms(query_text).into_iter().collect();
            let candidates: Vec<FitCandidate> = notes
                .iter()
                .map(|(n, s)| fit_candidate(n, *s, &terms))
                .collect();
            let r = FitOrDegrade {
                excerpt_tokens: config.excerpt_tokens,
            }
            .render(&candidates, counter, allowance);
            Recall::new(r.text, r.tokens, r.sources)
        }
    }
}

/// The record line of a note for the fit renderer: where it sits in the
/// history (the raw text's first bracketed or speaker prefix) and its note.
fn record_line(n: &Note) -> String {
    let head: String = match n.raw.find(": ") {
        Some(i) if i < 80 => n.raw[..i].to_string(),
        _ => n
            .raw
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect(),
    };
    format!(
        "{head} (note): {}",
        n.note_line().trim_start().trim_start_matches("note: ")
    )
}

fn fit_candidate(n: &Note, score: f32, terms: &HashSet<String>) -> FitCandidate {
    let pieces = sentences(&n.raw)
        .into_iter()
        .map(|text| {
            let hits = content_words(&text)
                .into_iter()
                .collect::<HashSet<_>>()
                .intersection(terms)
                .count();
            FitPiece {
                text,
                score: hits as f32,
            }
        })
        .collect();
    FitCandidate {
        position: n.id,
        score,
        source_ids: vec![n.source_id.clone()],
        record: record_line(n),
        raw: n.rendered(),
        pieces,
    }
}

/// Lines of `text` cut after sentence ends (`.`, `!`, `?` followed by a space).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
                out.push(line[start..=i].trim().to_string());
                start = i + 1;
            }
        }
        let rest = line[start..].trim();
        if !rest.is_empty() {
            out.push(rest.to_string());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_ends() {
        assert_eq!(
            sentences("A: Hi there. How are you? Fine\nnext line"),
            vec!["A: Hi there.", "How are you?", "Fine", "next line"]
        );
    }
}
