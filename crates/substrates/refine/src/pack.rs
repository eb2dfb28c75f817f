//! Shared helpers: embedding with checks, and packing ranked memory items
//! (strategies, skills) under a token allowance in relevance order.

use submem_core::{Embedder, Recall, Resolution, SourceHit, TokenCounter};

use submem_kit::embed::embed_checked;
use submem_kit::render::Fill;

use crate::RefineError;

/// Embeds `texts`, checking count, dimension and finiteness.
pub async fn embed(
    embedder: &dyn Embedder,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, submem_core::Error> {
    // One call for all: refinement embeds an episode's worth at a time.
    embed_checked(embedder, texts, usize::MAX)
        .await
        .map_err(|e| {
            e.into_core(|shape| RefineError::Embedding(shape).into_core("refine", "embed"))
        })
}

/// One item a read wants to show.
#[derive(Debug, Clone)]
pub struct Item {
    /// Rendered text.
    pub text: String,
    /// Relevance (cosine).
    pub score: f32,
    /// Source ids of the events it was derived from.
    pub sources: Vec<String>,
}

/// Separator between items.
pub const ITEM_SEPARATOR: &str = "\n\n";

/// Packs `ranked` (most relevant first) into `allowance` tokens, shown in
/// that order. Items that do not fit are skipped; when not even the first
/// fits whole, its head is shown cut to the allowance (a strategy's title and
/// first words beat an empty block). `Recall::tokens` is the exact count of
/// the text. Returns the recall and the indexes of the items shown.
pub fn pack(ranked: &[Item], counter: &dyn TokenCounter, allowance: usize) -> (Recall, Vec<usize>) {
    let sep = counter.count(ITEM_SEPARATOR);
    let mut fill = Fill::new(allowance, sep);
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for (i, item) in ranked.iter().enumerate() {
        if fill.admit(counter.count(&item.text)) {
            chosen.push((i, item.text.clone()));
        }
    }
    if chosen.is_empty() && allowance > 0 {
        if let Some(first) = ranked.first() {
            let cut = counter.truncate(&first.text, allowance);
            if !cut.trim().is_empty() {
                chosen.push((0, cut));
            }
        }
    }
    loop {
        let text = chosen
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(ITEM_SEPARATOR);
        let tokens = counter.count(&text);
        if tokens <= allowance || chosen.is_empty() {
            let shown: Vec<usize> = chosen.iter().map(|(i, _)| *i).collect();
            let mut sources = Vec::new();
            for &i in &shown {
                for s in &ranked[i].sources {
                    sources.push(SourceHit {
                        source_id: s.clone(),
                        score: ranked[i].score,
                        resolution: Resolution::Record,
                    });
                }
            }
            return (Recall::new(text, tokens, sources), shown);
        }
        chosen.pop();
    }
}

/// Indexes of `vectors` by descending cosine with `query` (ties: lower index
/// first).
pub fn rank_by_cosine(query: &[f32], vectors: &[&[f32]]) -> Vec<(usize, f32)> {
    let mut scored: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i, submem_core::cosine(query, v)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;

    fn item(words: usize, src: &str) -> Item {
        Item {
            text: vec!["w"; words].join(" "),
            score: 1.0,
            sources: vec![src.into()],
        }
    }

    #[test]
    fn packs_in_rank_order_and_cuts_the_first_when_nothing_fits() {
        let (r, shown) = pack(
            &[item(3, "a"), item(9, "b"), item(2, "c")],
            &WhitespaceCounter,
            6,
        );
        assert_eq!(shown, vec![0, 2]);
        assert_eq!(r.tokens, 5);
        let (r, shown) = pack(&[item(10, "a")], &WhitespaceCounter, 4);
        assert_eq!((shown, r.tokens), (vec![0], 4));
        let (r, _) = pack(&[item(10, "a")], &WhitespaceCounter, 0);
        assert!(r.sources.is_empty() && r.text.is_empty());
    }
}
