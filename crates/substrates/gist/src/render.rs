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

/// Blocks placed so far (one slot per page) and the tokens they take.
struct Layout<'a> {
    blocks: Vec<Option<String>>,
    used: usize,
    separator: usize,
    allowance: usize,
    counter: &'a dyn TokenCounter,
}

impl Layout<'_> {
    /// Places the block `text_of` makes for each page of `candidates`, in
    /// order, that is not placed yet and still fits; returns those pages.
    fn place(&mut self, candidates: &[usize], text_of: impl Fn(usize) -> String) -> Vec<usize> {
        let mut placed = Vec::new();
        let pages = self.blocks.len();
        for &i in candidates.iter().filter(|&&i| i < pages) {
            if self.blocks[i].is_some() {
                continue;
            }
            let block = text_of(i);
            let separator = if self.used == 0 { 0 } else { self.separator };
            let cost = self.counter.count(&block) + separator;
            if self.used + cost <= self.allowance {
                self.used += cost;
                placed.push(i);
                self.blocks[i] = Some(block);
            }
        }
        placed
    }
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
    let mut layout = Layout {
        blocks: vec![None; pages.len()],
        used: 0,
        separator: counter.count("\n"),
        allowance,
        counter,
    };
    let mut expanded = layout.place(expand, |i| expanded_block(pages, i));
    let mut gists = layout.place(rank, |i| gist_line(pages, i));
    let mut blocks = layout.blocks;
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
