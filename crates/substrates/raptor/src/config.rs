//! Settings of the RAPTOR tree ([`RaptorConfig`]). Defaults follow the RAPTOR
//! paper and its public reference where it states a value (leaves of ~100
//! tokens, 10 reduced dimensions, soft-assignment threshold 0.1, at most 50
//! clusters per fit, summaries of ~100 tokens); the rest (rebuild rule,
//! extractive summariser, BIC sampling) are ours, documented field by field.

use serde::{Deserialize, Serialize};

use crate::RaptorError;

/// Who writes the summary of a cluster (`llm` or `extractive`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerKind {
    /// One LLM call per cluster when an LLM is configured; the extractive
    /// rule otherwise (and as the fallback when a call fails or echoes the
    /// prompt).
    #[default]
    Llm,
    /// Always the extractive rule: the most central sentences of the cluster
    /// (no LLM call in any phase).
    #[serde(alias = "rule")]
    Extractive,
}

/// RAPTOR settings. Build with [`RaptorConfig::default`] and the `with_*`
/// setters; [`RaptorConfig::validate`] checks ranges. They are also the `m6`
/// plugin's settings: every field under its serde name
/// (`m6:leaf_tokens=200,summarizer=extractive`), listed by `submem
/// substrates` with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RaptorConfig {
    /// Target tokens of a leaf: consecutive events of one session are packed
    /// until the next would overflow it (an event longer than this is a leaf
    /// of its own, never split). RAPTOR: 100.
    pub leaf_tokens: usize,
    /// Dimensions the embeddings are reduced to before clustering (PCA in
    /// place of RAPTOR's UMAP). RAPTOR: 10.
    #[serde(rename = "dims")]
    pub reduce_dims: usize,
    /// A node joins every cluster whose GMM responsibility is at least this,
    /// in (0, 1] (soft assignment; always at least its most likely one).
    /// RAPTOR: 0.1.
    #[serde(rename = "threshold")]
    pub membership_threshold: f64,
    /// Largest number of mixture components tried per fit. RAPTOR: 50.
    pub max_clusters: usize,
    /// BIC is computed on at most this many points (an even stride over the
    /// layer); the chosen model is then fitted on all of them. Keeps the
    /// search cheap on 10k-leaf layers.
    pub bic_sample: usize,
    /// A cluster whose members hold more tokens than this is clustered again
    /// on its own (RAPTOR's local re-clustering; its cap is 3,500 for a
    /// large model, ours is sized for a small local one).
    #[serde(rename = "cluster_tokens")]
    pub max_cluster_tokens: usize,
    /// Most summary levels above the leaves. RAPTOR: 5 layers in its reference.
    #[serde(rename = "depth")]
    pub max_depth: usize,
    /// A layer with fewer nodes than this is not clustered further, at least
    /// 2 (RAPTOR stops when a layer has at most `reduce_dims + 1` nodes).
    #[serde(rename = "min_nodes")]
    pub min_layer_nodes: usize,
    /// Who writes summaries.
    pub summarizer: SummarizerKind,
    /// Most new tokens asked of one LLM summary. RAPTOR: 100.
    pub summary_tokens: usize,
    /// Words at which a summary (LLM or extractive) is cut.
    pub summary_words: usize,
    /// Most tokens of member text put into one summary prompt.
    pub summary_input_tokens: usize,
    /// Incremental insert gives way to a full rebuild when the leaves added
    /// since the last full build exceed this share of the leaves it had.
    pub rebuild_fraction: f64,
    /// Incremental insert also gives way to a full rebuild when a level-1
    /// cluster it grew holds more than `drift_growth × cluster_tokens` tokens
    /// (at least 1).
    pub drift_growth: f64,
    /// Top-level summaries at least this similar (cosine, in (0, 1]) are
    /// merged by `manage`.
    #[serde(rename = "dedup")]
    pub dedup_similarity: f32,
    /// After the query's top-k nodes, keep taking nodes in rank order while
    /// they fit the allowance ("fill the budget").
    #[serde(rename = "fill")]
    pub fill_budget: bool,
    /// Texts per embedding call.
    pub embed_batch: usize,
}

impl Default for RaptorConfig {
    fn default() -> Self {
        RaptorConfig {
            leaf_tokens: 100,
            reduce_dims: 10,
            membership_threshold: 0.1,
            max_clusters: 50,
            bic_sample: 400,
            max_cluster_tokens: 1500,
            max_depth: 4,
            min_layer_nodes: 11,
            summarizer: SummarizerKind::Llm,
            summary_tokens: 100,
            summary_words: 90,
            summary_input_tokens: 1500,
            rebuild_fraction: 0.5,
            drift_growth: 2.0,
            dedup_similarity: 0.95,
            fill_budget: true,
            embed_batch: 64,
        }
    }
}

submem_kit::setters!(RaptorConfig {
    with_leaf_tokens => leaf_tokens: usize,
    with_reduce_dims => reduce_dims: usize,
    with_membership_threshold => membership_threshold: f64,
    with_max_clusters => max_clusters: usize,
    with_bic_sample => bic_sample: usize,
    with_max_cluster_tokens => max_cluster_tokens: usize,
    with_max_depth => max_depth: usize,
    with_min_layer_nodes => min_layer_nodes: usize,
    with_summarizer => summarizer: SummarizerKind,
    with_summary_tokens => summary_tokens: usize,
    with_summary_words => summary_words: usize,
    with_summary_input_tokens => summary_input_tokens: usize,
    with_rebuild_fraction => rebuild_fraction: f64,
    with_drift_growth => drift_growth: f64,
    with_dedup_similarity => dedup_similarity: f32,
    with_fill_budget => fill_budget: bool,
    with_embed_batch => embed_batch: usize,
});

impl RaptorConfig {
    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), RaptorError> {
        let bad = |m: &str| Err(RaptorError::Config(m.to_string()));
        if self.leaf_tokens == 0 {
            return bad("leaf_tokens must be at least 1");
        }
        if self.reduce_dims == 0 {
            return bad("reduce_dims must be at least 1");
        }
        if !(self.membership_threshold > 0.0 && self.membership_threshold <= 1.0) {
            return bad("membership_threshold must be in (0, 1]");
        }
        if self.max_clusters == 0 || self.bic_sample < 4 {
            return bad("max_clusters must be at least 1 and bic_sample at least 4");
        }
        if self.max_cluster_tokens == 0 || self.summary_input_tokens == 0 {
            return bad("max_cluster_tokens and summary_input_tokens must be at least 1");
        }
        if self.max_depth == 0 || self.min_layer_nodes < 2 {
            return bad("max_depth must be at least 1 and min_layer_nodes at least 2");
        }
        if self.summary_tokens == 0 || self.summary_words == 0 || self.embed_batch == 0 {
            return bad("summary_tokens, summary_words and embed_batch must be at least 1");
        }
        if !(self.rebuild_fraction.is_finite() && self.rebuild_fraction >= 0.0) {
            return bad("rebuild_fraction must be finite and >= 0");
        }
        if !(self.drift_growth.is_finite() && self.drift_growth >= 1.0) {
            return bad("drift_growth must be finite and >= 1");
        }
        if !(self.dedup_similarity > 0.0 && self.dedup_similarity <= 1.0) {
            return bad("dedup_similarity must be in (0, 1]");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_ranges_checked() {
        RaptorConfig::default().validate().unwrap();
        assert!(RaptorConfig::default()
            .with_membership_threshold(0.0)
            .validate()
            .is_err());
        assert!(RaptorConfig::default()
            .with_drift_growth(0.5)
            .validate()
            .is_err());
        assert!(RaptorConfig::default()
            .with_min_layer_nodes(1)
            .validate()
            .is_err());
    }
}
