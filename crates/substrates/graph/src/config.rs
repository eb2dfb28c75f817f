//! Settings of the dual-level graph (M5). Defaults follow LightRAG where they
//! transfer to dialogue memory, and say where (and why) they differ.

use serde::{Deserialize, Serialize};

use crate::GraphError;

/// How a step that may use the LLM does its work (`llm` or `rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Extractor {
    /// The memory LLM when one is configured, else the rules.
    Llm,
    /// Always the rules (no LLM call).
    #[serde(alias = "rules")]
    Rule,
}

/// Settings of [`crate::GraphMemory`], and of the `m5` plugin: every field is
/// a setting under its serde name (`m5:chunk_tokens=200,keywords=rule`),
/// listed by `submem substrates` with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GraphConfig {
    /// Target chunk size in budget tokens; chunks end at event boundaries, at
    /// session changes and at the end of a write. LightRAG uses 1,200-token
    /// chunks over documents; dialogue memory at 4k budgets needs finer
    /// chunks (a shown chunk costs its whole length), so the default is 300.
    pub chunk_tokens: usize,
    /// Entities matched by the low-level keywords and relations matched by the
    /// high-level keywords (LightRAG `top_k`; unset: the query's top-k).
    pub top_k: Option<usize>,
    /// Chunks taken from the dense chunk index (LightRAG `chunk_top_k`;
    /// unset: the query's top-k).
    pub chunk_top_k: Option<usize>,
    /// Chunks gathered from one matched entity or relation (its sources,
    /// newest last); bounds the fan-out of very frequent entities.
    pub chunks_per_item: usize,
    /// Reciprocal-rank-fusion constant `k0` in `1 / (k0 + rank)`.
    pub rrf_k: f32,
    /// Fuse a BM25 chunk list (the question's words against chunk texts,
    /// broad English stop list) beside LightRAG's dense one. Default on.
    pub lexical_chunks: bool,
    /// Share of the allowance the entity and relation descriptions may take,
    /// in [0, 1]; what they leave goes to chunks. Default 0.25.
    pub graph_share: f32,
    /// Longest description shown for one entity or relation, in tokens.
    pub description_tokens: usize,
    /// Who extracts entities and relations at write time.
    pub extraction: Extractor,
    /// Who extracts the query's low- and high-level keywords at read time.
    pub keywords: Extractor,
    /// Most new tokens of one extraction call.
    pub extract_max_tokens: usize,
    /// Most new tokens of one keyword call.
    pub keyword_max_tokens: usize,
    /// Keep only LLM entities whose name occurs in the chunk. Small models
    /// copy the prompt's example or invent names; LightRAG has no such check
    /// (its models are larger). Relations need both ends kept.
    #[serde(rename = "grounded")]
    pub require_grounded_names: bool,
    /// Co-occurrence relations the rule extractor adds per turn.
    pub rule_relations_per_turn: usize,
    /// Texts per embedding call when pending items are indexed.
    pub embed_batch: usize,
    /// Re-extract a chunk that lost some of its events to forgetting (on the
    /// next `manage`), so its remaining events get graph entries again.
    pub reextract_on_forget: bool,
}

impl Default for GraphConfig {
    fn default() -> Self {
        GraphConfig {
            chunk_tokens: 300,
            top_k: None,
            chunk_top_k: None,
            chunks_per_item: 5,
            rrf_k: 60.0,
            lexical_chunks: true,
            graph_share: 0.25,
            description_tokens: 60,
            extraction: Extractor::Llm,
            keywords: Extractor::Llm,
            extract_max_tokens: 384,
            keyword_max_tokens: 96,
            require_grounded_names: true,
            rule_relations_per_turn: 6,
            embed_batch: 32,
            reextract_on_forget: true,
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta] $name:ident => $field:ident : $ty:ty),* $(,)?) => {
        $(#[$doc] pub fn $name(mut self, v: $ty) -> Self { self.$field = v; self })*
    };
}

impl GraphConfig {
    setter! {
        /// Sets [`GraphConfig::chunk_tokens`].
        with_chunk_tokens => chunk_tokens: usize,
        /// Sets [`GraphConfig::top_k`].
        with_top_k => top_k: Option<usize>,
        /// Sets [`GraphConfig::chunk_top_k`].
        with_chunk_top_k => chunk_top_k: Option<usize>,
        /// Sets [`GraphConfig::chunks_per_item`].
        with_chunks_per_item => chunks_per_item: usize,
        /// Sets [`GraphConfig::rrf_k`].
        with_rrf_k => rrf_k: f32,
        /// Sets [`GraphConfig::lexical_chunks`].
        with_lexical_chunks => lexical_chunks: bool,
        /// Sets [`GraphConfig::graph_share`].
        with_graph_share => graph_share: f32,
        /// Sets [`GraphConfig::description_tokens`].
        with_description_tokens => description_tokens: usize,
        /// Sets [`GraphConfig::extraction`].
        with_extraction => extraction: Extractor,
        /// Sets [`GraphConfig::keywords`].
        with_keywords => keywords: Extractor,
        /// Sets [`GraphConfig::extract_max_tokens`].
        with_extract_max_tokens => extract_max_tokens: usize,
        /// Sets [`GraphConfig::keyword_max_tokens`].
        with_keyword_max_tokens => keyword_max_tokens: usize,
        /// Sets [`GraphConfig::require_grounded_names`].
        with_require_grounded_names => require_grounded_names: bool,
        /// Sets [`GraphConfig::rule_relations_per_turn`].
        with_rule_relations_per_turn => rule_relations_per_turn: usize,
        /// Sets [`GraphConfig::embed_batch`].
        with_embed_batch => embed_batch: usize,
        /// Sets [`GraphConfig::reextract_on_forget`].
        with_reextract_on_forget => reextract_on_forget: bool,
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), GraphError> {
        let bad = |m: &str| Err(GraphError::Config(m.to_string()));
        if self.chunk_tokens == 0 {
            return bad("chunk_tokens must be at least 1");
        }
        if self.top_k == Some(0) || self.chunk_top_k == Some(0) {
            return bad("top_k and chunk_top_k must be at least 1");
        }
        if self.chunks_per_item == 0 {
            return bad("chunks_per_item must be at least 1");
        }
        if !(self.rrf_k.is_finite() && self.rrf_k >= 0.0) {
            return bad("rrf_k must be finite and >= 0");
        }
        if !(0.0..=1.0).contains(&self.graph_share) {
            return bad("graph_share must be in 0..=1");
        }
        if self.description_tokens == 0 || self.embed_batch == 0 {
            return bad("description_tokens and embed_batch must be at least 1");
        }
        if self.extract_max_tokens == 0 || self.keyword_max_tokens == 0 {
            return bad("extract_max_tokens and keyword_max_tokens must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_ranges_checked() {
        GraphConfig::default().validate().unwrap();
        assert!(GraphConfig::default()
            .with_chunk_tokens(0)
            .validate()
            .is_err());
        assert!(GraphConfig::default()
            .with_graph_share(1.5)
            .validate()
            .is_err());
        assert!(GraphConfig::default()
            .with_top_k(Some(0))
            .validate()
            .is_err());
    }
}
