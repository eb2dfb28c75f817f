//! Bringing a namespace's tree up to date: the full build (RAPTOR's
//! recursive cluster → summarise → embed, layer by layer), the incremental
//! insert that replaces it between rebuilds, the rewrite of stale summaries
//! (bottom-up, so a parent is written from its children's new text), and the
//! top-level dedup of `manage`.
//!
//! **Incremental insert (ours; RAPTOR's reference rebuilds everything).**
//! A new leaf joins the level-1 cluster whose centroid (mean of its
//! members' embeddings) is nearest by cosine; that summary and every summary
//! above it become stale and are rewritten, nothing else. The clusters
//! themselves are not refitted, so the tree drifts from what a rebuild would
//! give; a **full rebuild** runs instead when
//! (a) no full build has run, or no level-1 cluster exists yet;
//! (b) the leaves inserted since the last full build (these included) exceed
//! [`RaptorConfig::rebuild_fraction`] of the leaves it clustered; or
//! (c) a cluster would grow past [`RaptorConfig::drift_growth`] ×
//! [`RaptorConfig::max_cluster_tokens`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use submem_kit::embed::embed_checked;
use submem_kit::stats::bump;

use submem_core::{cosine, l2_normalize, Services};

use crate::cluster::cluster_layer;
use crate::summarize::{clean_reply, extractive, summary_request, MemberText, SUMMARY_PREFIX};
use crate::tree::{Node, NodeId, NsTree};
use crate::{RaptorConfig, RaptorError};

submem_kit::counters! {
    /// A copy of [`BuildCounters`].
    pub struct RaptorStats;
    /// Counters of what the tree builder did (for tests, benches and reports).
    pub struct BuildCounters;
    {
        /// Summaries written by the LLM.
        llm_summaries,
        /// Summaries written by the extractive rule (by choice or as fallback).
        rule_summaries,
        /// LLM calls whose reply was unusable (the rule wrote those summaries).
        fallbacks,
        /// Full builds run.
        full_builds,
        /// Leaves placed by incremental insert.
        incremental_inserts,
        /// Stale summaries rewritten (incremental inserts, forgets, dedup).
        rewrites,
    }
}

/// What the builder needs.
pub(crate) struct Builder<'a> {
    pub services: &'a Services,
    pub cfg: &'a RaptorConfig,
    pub use_llm: bool,
    pub counters: &'a BuildCounters,
}

impl Builder<'_> {
    /// Embeds `texts` in batches, checking shapes.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, RaptorError> {
        embed_checked(&*self.services.embedder, texts, self.cfg.embed_batch)
            .await
            .map_err(|e| RaptorError::Embedding(e.to_string()))
    }

    fn count(&self, text: &str) -> u32 {
        u32::try_from(self.services.tokens.count(text)).unwrap_or(u32::MAX)
    }

    /// Brings `tree` up to date; returns how many summaries were written.
    pub async fn refresh(&self, tree: &mut NsTree) -> Result<usize, RaptorError> {
        self.embed_stale_leaves(tree).await?;
        if tree.pending.is_empty() && !tree.has_stale() {
            return Ok(0);
        }
        if self.needs_full_build(tree) || !self.insert_incrementally(tree) {
            return self.full_build(tree).await;
        }
        self.rewrite_stale(tree).await
    }

    async fn embed_stale_leaves(&self, tree: &mut NsTree) -> Result<(), RaptorError> {
        let ids: Vec<NodeId> = tree
            .nodes
            .iter()
            .filter(|(_, n)| n.is_leaf() && n.embedding.is_empty())
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = ids.iter().map(|id| tree.nodes[id].text.clone()).collect();
        let vecs = self.embed(&texts).await?;
        for (id, v) in ids.iter().zip(vecs) {
            if let Some(n) = tree.nodes.get_mut(id) {
                n.embedding = v;
                n.stale = false;
            }
        }
        Ok(())
    }

    fn needs_full_build(&self, tree: &NsTree) -> bool {
        let has_level1 = tree.nodes.values().any(|n| n.level == 1);
        let inserted = tree.inserted_since_build + tree.pending.len();
        !tree.built
            || (!has_level1 && !tree.pending.is_empty())
            || inserted as f64 > self.cfg.rebuild_fraction * tree.leaves_at_build as f64
    }

    /// Places pending leaves in their nearest level-1 cluster; `false` (and
    /// nothing changed) when a cluster would drift past the cap.
    fn insert_incrementally(&self, tree: &mut NsTree) -> bool {
        if tree.pending.is_empty() {
            return true;
        }
        let clusters: Vec<(NodeId, Vec<f32>)> = tree
            .nodes
            .iter()
            .filter(|(_, n)| n.level == 1 && !n.centroid.is_empty())
            .map(|(id, n)| (*id, n.centroid.clone()))
            .collect();
        if clusters.is_empty() {
            return false;
        }
        let mut joins: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
        for leaf in &tree.pending {
            let v = &tree.nodes[leaf].embedding;
            let best = clusters
                .iter()
                .map(|(id, c)| (cosine(v, c), *id))
                .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
                .map(|(_, id)| id);
            if let Some(b) = best {
                joins.entry(b).or_default().push(*leaf);
            }
        }
        let cap = self.cfg.drift_growth * self.cfg.max_cluster_tokens as f64;
        for (cluster, new) in &joins {
            let size: u64 = tree.nodes[cluster]
                .children
                .iter()
                .chain(new)
                .filter_map(|c| tree.nodes.get(c))
                .map(|n| u64::from(n.tokens))
                .sum();
            if size as f64 > cap {
                return false;
            }
        }
        let touched: Vec<NodeId> = joins.keys().copied().collect();
        for (cluster, new) in joins {
            if let Some(n) = tree.nodes.get_mut(&cluster) {
                n.children.extend(new);
                n.stale = true;
            }
        }
        tree.mark_ancestors_stale(&touched);
        let n = tree.pending.len();
        tree.inserted_since_build += n;
        tree.pending.clear();
        bump(&self.counters.incremental_inserts, n as u64);
        true
    }

    /// Drops every summary and builds the tree again from the leaves.
    pub async fn full_build(&self, tree: &mut NsTree) -> Result<usize, RaptorError> {
        tree.drop_summaries();
        tree.pending.clear();
        let mut layer = tree.leaves();
        let leaves = layer.len();
        let mut written = 0;
        for level in 1..=self.cfg.max_depth {
            if layer.len() < self.cfg.min_layer_nodes {
                break;
            }
            let clusters = {
                let vecs: Vec<&[f32]> = layer
                    .iter()
                    .map(|id| tree.nodes[id].embedding.as_slice())
                    .collect();
                let toks: Vec<usize> = layer
                    .iter()
                    .map(|id| tree.nodes[id].tokens as usize)
                    .collect();
                cluster_layer(&vecs, &toks, self.cfg)
            };
            if clusters.len() >= layer.len() {
                break;
            }
            let groups: Vec<Vec<NodeId>> = clusters
                .iter()
                .map(|c| c.iter().map(|&i| layer[i]).collect())
                .collect();
            let ids = self.write_summaries(tree, level as u32, groups).await?;
            written += ids.len();
            layer = ids;
            if layer.len() == 1 {
                break;
            }
        }
        tree.built = true;
        tree.leaves_at_build = leaves;
        tree.inserted_since_build = 0;
        bump(&self.counters.full_builds, 1);
        tracing::debug!(leaves, summaries = written, "m6 full build");
        Ok(written)
    }

    /// Writes one summary node per group (children one level down).
    async fn write_summaries(
        &self,
        tree: &mut NsTree,
        level: u32,
        groups: Vec<Vec<NodeId>>,
    ) -> Result<Vec<NodeId>, RaptorError> {
        let mut texts = Vec::with_capacity(groups.len());
        for g in &groups {
            texts.push(self.summarize(tree, g).await);
        }
        let vecs = self.embed(&texts).await?;
        let mut ids = Vec::with_capacity(groups.len());
        for ((children, text), embedding) in groups.into_iter().zip(texts).zip(vecs) {
            let node = self.summary_node(tree, level, children, text, embedding);
            ids.push(tree.add(node));
        }
        Ok(ids)
    }

    fn summary_node(
        &self,
        tree: &NsTree,
        level: u32,
        children: Vec<NodeId>,
        text: String,
        embedding: Vec<f32>,
    ) -> Node {
        let dim = embedding.len();
        let mut centroid = vec![0.0f32; dim];
        let mut position = u64::MAX;
        for c in &children {
            if let Some(n) = tree.nodes.get(c) {
                position = position.min(n.position);
                for (a, b) in centroid.iter_mut().zip(&n.embedding) {
                    *a += b;
                }
            }
        }
        l2_normalize(&mut centroid);
        Node {
            level,
            tokens: self.count(&format!("{SUMMARY_PREFIX}{text}")),
            text,
            embedding,
            children,
            events: Vec::new(),
            position: if position == u64::MAX { 0 } else { position },
            centroid,
            stale: false,
        }
    }

    /// One summary of the nodes `children` (in time order).
    async fn summarize(&self, tree: &NsTree, children: &[NodeId]) -> String {
        let mut nodes: Vec<&Node> = children.iter().filter_map(|c| tree.nodes.get(c)).collect();
        nodes.sort_by_key(|n| n.position);
        let members: Vec<MemberText<'_>> = nodes
            .iter()
            .flat_map(|n| {
                if n.is_leaf() {
                    n.events
                        .iter()
                        .map(|e| MemberText {
                            label: Some(e.label.as_str()),
                            text: e.body.as_str(),
                        })
                        .collect::<Vec<_>>()
                } else {
                    vec![MemberText {
                        label: None,
                        text: n.text.as_str(),
                    }]
                }
            })
            .collect();
        if let (true, Some(llm)) = (self.use_llm, self.services.llm.as_ref()) {
            let joined = nodes
                .iter()
                .map(|n| n.text.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let context = self
                .services
                .tokens
                .truncate(&joined, self.cfg.summary_input_tokens);
            let req = summary_request(&context, self.cfg.summary_tokens);
            match llm.complete(&req).await {
                Ok(c) => {
                    if let Some(s) = clean_reply(&c.text, self.cfg.summary_words) {
                        bump(&self.counters.llm_summaries, 1);
                        return s;
                    }
                    tracing::debug!("m6 summary reply unusable; extractive fallback");
                }
                Err(e) => tracing::warn!(error = %e, "m6 summary call failed; extractive fallback"),
            }
            bump(&self.counters.fallbacks, 1);
        }
        bump(&self.counters.rule_summaries, 1);
        extractive(&members, self.cfg.summary_words)
    }

    /// Rewrites stale summaries bottom-up; removes those left without
    /// children. Returns how many were rewritten.
    pub async fn rewrite_stale(&self, tree: &mut NsTree) -> Result<usize, RaptorError> {
        let max_level = tree.nodes.values().map(|n| n.level).max().unwrap_or(0);
        let mut written = 0;
        for level in 1..=max_level {
            let stale: Vec<NodeId> = tree
                .nodes
                .iter()
                .filter(|(_, n)| n.level == level && n.stale)
                .map(|(id, _)| *id)
                .collect();
            let mut keep = Vec::new();
            for id in stale {
                let alive: Vec<NodeId> = tree.nodes[&id]
                    .children
                    .iter()
                    .copied()
                    .filter(|c| tree.nodes.contains_key(c))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if alive.is_empty() {
                    tree.mark_ancestors_stale(&[id]);
                    tree.nodes.remove(&id);
                    for n in tree.nodes.values_mut() {
                        n.children.retain(|c| *c != id);
                    }
                } else {
                    keep.push((id, alive));
                }
            }
            let mut texts = Vec::with_capacity(keep.len());
            for (_, children) in &keep {
                texts.push(self.summarize(tree, children).await);
            }
            let vecs = self.embed(&texts).await?;
            for (((id, children), text), embedding) in keep.into_iter().zip(texts).zip(vecs) {
                let node = self.summary_node(tree, level, children, text, embedding);
                tree.nodes.insert(id, node);
                tree.mark_ancestors_stale(&[id]);
                written += 1;
            }
        }
        bump(&self.counters.rewrites, written as u64);
        Ok(written)
    }

    /// Merges near-duplicate top-level summaries (same level, cosine at
    /// least [`RaptorConfig::dedup_similarity`]): the later one's children
    /// join the earlier one, which is rewritten. Returns the merges.
    pub async fn dedup_top(&self, tree: &mut NsTree) -> Result<usize, RaptorError> {
        let parents = tree.parents();
        let top: Vec<NodeId> = tree
            .nodes
            .iter()
            .filter(|(id, n)| !n.is_leaf() && n.showable() && !parents.contains_key(id))
            .map(|(id, _)| *id)
            .collect();
        let mut merged_into: HashMap<NodeId, NodeId> = HashMap::new();
        for (i, a) in top.iter().enumerate() {
            if merged_into.contains_key(a) {
                continue;
            }
            for b in &top[i + 1..] {
                if merged_into.contains_key(b) {
                    continue;
                }
                let (na, nb) = (&tree.nodes[a], &tree.nodes[b]);
                if na.level == nb.level
                    && (na.text == nb.text
                        || cosine(&na.embedding, &nb.embedding) >= self.cfg.dedup_similarity)
                {
                    merged_into.insert(*b, *a);
                }
            }
        }
        let merges = merged_into.len();
        for (b, a) in merged_into {
            if let Some(nb) = tree.nodes.remove(&b) {
                if let Some(na) = tree.nodes.get_mut(&a) {
                    na.children.extend(nb.children);
                    na.stale = true;
                }
            }
        }
        if merges > 0 {
            self.rewrite_stale(tree).await?;
        }
        Ok(merges)
    }
}
