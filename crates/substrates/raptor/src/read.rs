//! The collapsed-tree read (RAPTOR §3, "querying"): one dense ranking over
//! the nodes of every level, leaves and summaries alike; the query's top-k
//! nodes are taken in rank order while they fit the allowance, then (with
//! [`crate::RaptorConfig::fill_budget`]) further nodes down the ranking while
//! room is left. Summaries are shown first (highest level first, then in
//! time order) as `Summary: …` lines; leaves follow verbatim in time order.
//!
//! Sources: every event of a shown leaf is a [`Resolution::Raw`] hit (score =
//! the leaf's cosine); every other event under a shown summary is a
//! [`Resolution::Record`] hit (score = the summary's cosine), listed after
//! the raw ones — a summary covers its leaves only loosely, so the verbatim
//! recall (`Raw` only) is the strict measure.

use std::collections::HashSet;

use submem_core::{cosine, Recall, Resolution, SourceHit, TokenCounter};
use submem_kit::render::Fill;

use crate::summarize::SUMMARY_PREFIX;
use crate::tree::{NodeId, NsTree};

const SEPARATOR: &str = "\n";

/// Renders the collapsed-tree recall of `tree` for the query vector `q`.
pub fn collapsed_tree(
    tree: &NsTree,
    q: &[f32],
    top_k: usize,
    fill_budget: bool,
    allowance: usize,
    counter: &dyn TokenCounter,
) -> Recall {
    let mut ranked: Vec<(f32, NodeId)> = tree
        .nodes
        .iter()
        .filter(|(_, n)| n.showable())
        .map(|(id, n)| (cosine(q, &n.embedding), *id))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let limit = if fill_budget { ranked.len() } else { top_k };
    let sep = counter.count(SEPARATOR);
    let mut fill = Fill::new(allowance, sep);
    let mut chosen: Vec<(f32, NodeId)> = Vec::new();
    for (i, (score, id)) in ranked.iter().enumerate() {
        if i >= limit || fill.used() >= allowance {
            break;
        }
        if fill.admit(tree.nodes[id].tokens as usize) {
            chosen.push((*score, *id));
        }
    }
    loop {
        let text = compose(tree, &chosen);
        let tokens = counter.count(&text);
        if tokens <= allowance || chosen.is_empty() {
            let sources = sources(tree, &chosen);
            return Recall::new(text, tokens, sources);
        }
        chosen.pop();
    }
}

fn compose(tree: &NsTree, chosen: &[(f32, NodeId)]) -> String {
    let mut summaries: Vec<NodeId> = chosen
        .iter()
        .map(|(_, id)| *id)
        .filter(|id| !tree.nodes[id].is_leaf())
        .collect();
    summaries.sort_by_key(|id| {
        let n = &tree.nodes[id];
        (std::cmp::Reverse(n.level), n.position, *id)
    });
    let mut leaves: Vec<NodeId> = chosen
        .iter()
        .map(|(_, id)| *id)
        .filter(|id| tree.nodes[id].is_leaf())
        .collect();
    leaves.sort_by_key(|id| (tree.nodes[id].position, *id));
    summaries
        .iter()
        .map(|id| format!("{SUMMARY_PREFIX}{}", tree.nodes[id].text))
        .chain(leaves.iter().map(|id| tree.nodes[id].text.clone()))
        .collect::<Vec<_>>()
        .join(SEPARATOR)
}

fn sources(tree: &NsTree, chosen: &[(f32, NodeId)]) -> Vec<SourceHit> {
    let mut out = Vec::new();
    let mut shown: HashSet<&str> = HashSet::new();
    for (score, id) in chosen {
        let n = &tree.nodes[id];
        for e in &n.events {
            if shown.insert(e.source_id.as_str()) {
                out.push(SourceHit {
                    source_id: e.source_id.clone(),
                    score: *score,
                    resolution: Resolution::Raw,
                });
            }
        }
    }
    for (score, id) in chosen {
        if tree.nodes[id].is_leaf() {
            continue;
        }
        for leaf in tree.descendant_leaves(*id) {
            for e in &tree.nodes[&leaf].events {
                if shown.insert(e.source_id.as_str()) {
                    out.push(SourceHit {
                        source_id: e.source_id.clone(),
                        score: *score,
                        resolution: Resolution::Record,
                    });
                }
            }
        }
    }
    out
}
