//! Rendering the memory block under the allowance: expanded pages replace
//! their gists in place, the other pages stay as one-line gists, everything in
//! time order (ReadAgent's "expanded pages replace gists in the gist memory").
//!
//! **Fitting** (`A = Query::allowance()`), in this order:
//! 1. pages chosen for expansion, in the selection's order, each expanded
//!    when its full text fits the room left (one that does not fit is skipped
//!    and the next is tried): the evidence comes first;
//! 2. gists of the other pages, most relevant first (BM25 over gist + page
//!    text, ties to the newer page), while they fit: with room, every gist is
//!    shown; when even the gists do not fit, the most relevant are;
//! 3. the joined text is counted again; while it exceeds `A`, the least
//!    relevant gist (then the last expansion) is dropped.
//!
//! A gist line is `[p3 · 8 May 2023] <gist>` (a duplicate found by `manage`
//! shows `(same as p1)` instead of repeating the text); an expanded page is
//! `[p4 · full text]` followed by its events, one per line.

use submem_core::{Recall, Resolution, SourceHit, TokenCounter};

use crate::page::Page;

/// The gist line of the page at `position` (0-based) among `pages`.
pub fn gist_line(pages: &[&Page], position: usize) -> String {
    let page = pages[position];
    let label = match page.date() {
        Some(d) => format!("[p{} · {d}]", position + 1),
        None => format!("[p{}]", position + 1),
    };
    let original = page
        .dup_of
        .and_then(|id| pages.iter().position(|p| p.id == id))
        .filter(|&o| o < position);
    match original {
        Some(o) => format!("{label} (same as p{})", o + 1),
        None => format!("{label} {}", page.gist),
    }
}

/// The expanded block of the page at `position`.
pub fn expanded_block(pages: &[&Page], position: usize) -> String {
    format!(
        "[p{} · full text]\n{}",
        position + 1,
        pages[position].raw_text()
    )
}

/// What [`fit`] chose.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The recall (sources: the events of expanded pages, in selection order).
    pub recall: Recall,
    /// Positions of the expanded pages, in selection order.
    pub expanded: Vec<usize>,
    /// Positions of the pages shown as gists.
    pub gists: Vec<usize>,
}

/// Fits expansions of `expand` (selection order) and gists of the pages in
/// `rank` (relevance order) into `allowance` tokens; see the module docs.
pub fn fit(
    pages: &[&Page],
    expand: &[usize],
    rank: &[usize],
    counter: &dyn TokenCounter,
    allowance: usize,
) -> Fitted {
    let separator = counter.count("\n");
    let mut used = 0usize;
    let mut expanded: Vec<usize> = Vec::new();
    let mut blocks: Vec<Option<String>> = vec![None; pages.len()];
    for &i in expand.iter().filter(|&&i| i < pages.len()) {
        if blocks[i].is_some() {
            continue;
        }
        let block = expanded_block(pages, i);
        let cost = counter.count(&block) + if used == 0 { 0 } else { separator };
        if used + cost <= allowance {
            used += cost;
            expanded.push(i);
            blocks[i] = Some(block);
        }
    }
    let mut gists: Vec<usize> = Vec::new();
    for &i in rank.iter().filter(|&&i| i < pages.len()) {
        if blocks[i].is_some() {
            continue;
        }
        let line = gist_line(pages, i);
        let cost = counter.count(&line) + if used == 0 { 0 } else { separator };
        if used + cost <= allowance {
            used += cost;
            gists.push(i);
            blocks[i] = Some(line);
        }
    }
    loop {
        let text = blocks
            .iter()
            .filter_map(|b| b.as_deref())
            .collect::<Vec<_>>()
            .join("\n");
        let tokens = counter.count(&text);
        if tokens <= allowance {
            let n = expanded.len().max(1) as f32;
            let sources = expanded
                .iter()
                .enumerate()
                .flat_map(|(rank, &i)| {
                    pages[i].entries.iter().map(move |e| SourceHit {
                        source_id: e.source_id.clone(),
                        score: (n - rank as f32) / n,
                        resolution: Resolution::Raw,
                    })
                })
                .collect();
            return Fitted {
                recall: Recall::new(text, tokens, sources),
                expanded,
                gists,
            };
        }
        let dropped = gists.pop().or_else(|| expanded.pop());
        match dropped {
            Some(i) => blocks[i] = None,
            None => {
                return Fitted {
                    recall: Recall::empty(),
                    expanded,
                    gists,
                }
            }
        }
    }
}
