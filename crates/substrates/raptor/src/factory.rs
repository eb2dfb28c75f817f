//! RAPTOR's plugin: `m6` (alias `raptor`) as a
//! [`SubstrateFactory`] a registry lists and builds by name. Without a memory
//! LLM its summaries are extractive.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{Raptor, RaptorConfig, SummarizerKind};

/// Who writes the summary of a cluster ([`SummarizerKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SummarizerSetting {
    /// The memory LLM when one is configured, else the extractive rule.
    Llm,
    /// Always the extractive rule (no LLM call).
    #[serde(alias = "rule")]
    Extractive,
}

impl From<SummarizerSetting> for SummarizerKind {
    fn from(s: SummarizerSetting) -> Self {
        match s {
            SummarizerSetting::Llm => SummarizerKind::Llm,
            SummarizerSetting::Extractive => SummarizerKind::Extractive,
        }
    }
}

impl From<SummarizerKind> for SummarizerSetting {
    fn from(s: SummarizerKind) -> Self {
        match s {
            SummarizerKind::Llm => SummarizerSetting::Llm,
            SummarizerKind::Extractive => SummarizerSetting::Extractive,
        }
    }
}

/// Settings of `m6` (see [`RaptorConfig`] for each default and the RAPTOR
/// value it follows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RaptorSettings {
    /// Target tokens of a leaf (consecutive events of one session).
    pub leaf_tokens: usize,
    /// Dimensions embeddings are reduced to (PCA) before clustering.
    pub dims: usize,
    /// Soft-assignment threshold: a node joins every cluster at least this likely, in (0, 1].
    pub threshold: f64,
    /// Most mixture components tried per fit.
    pub max_clusters: usize,
    /// Most points BIC is computed on (at least 4).
    pub bic_sample: usize,
    /// A cluster holding more tokens than this is clustered again.
    pub cluster_tokens: usize,
    /// Most summary levels above the leaves.
    pub depth: usize,
    /// A layer with fewer nodes than this is not clustered further (at least 2).
    pub min_nodes: usize,
    /// Who writes summaries.
    pub summarizer: SummarizerSetting,
    /// Most new tokens of one LLM summary.
    pub summary_tokens: usize,
    /// Words at which a summary is cut.
    pub summary_words: usize,
    /// Share of new leaves since the last full build that triggers a rebuild.
    pub rebuild_fraction: f64,
    /// A grown level-1 cluster over drift_growth × cluster_tokens triggers a rebuild (at least 1).
    pub drift_growth: f64,
    /// Cosine at or above which top-level summaries are merged by manage, in (0, 1].
    pub dedup: f32,
    /// After the top-k nodes, keep taking nodes in rank order while they fit the allowance.
    pub fill: bool,
}

impl Default for RaptorSettings {
    fn default() -> Self {
        let c = RaptorConfig::default();
        RaptorSettings {
            leaf_tokens: c.leaf_tokens,
            dims: c.reduce_dims,
            threshold: c.membership_threshold,
            max_clusters: c.max_clusters,
            bic_sample: c.bic_sample,
            cluster_tokens: c.max_cluster_tokens,
            depth: c.max_depth,
            min_nodes: c.min_layer_nodes,
            summarizer: c.summarizer.into(),
            summary_tokens: c.summary_tokens,
            summary_words: c.summary_words,
            rebuild_fraction: c.rebuild_fraction,
            drift_growth: c.drift_growth,
            dedup: c.dedup_similarity,
            fill: c.fill_budget,
        }
    }
}

impl RaptorSettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> RaptorConfig {
        RaptorConfig::default()
            .with_leaf_tokens(self.leaf_tokens)
            .with_reduce_dims(self.dims)
            .with_membership_threshold(self.threshold)
            .with_max_clusters(self.max_clusters)
            .with_bic_sample(self.bic_sample)
            .with_max_cluster_tokens(self.cluster_tokens)
            .with_max_depth(self.depth)
            .with_min_layer_nodes(self.min_nodes)
            .with_summary_tokens(self.summary_tokens)
            .with_summary_words(self.summary_words)
            .with_rebuild_fraction(self.rebuild_fraction)
            .with_drift_growth(self.drift_growth)
            .with_dedup_similarity(self.dedup)
            .with_fill_budget(self.fill)
            .with_summarizer(self.summarizer.into())
    }
}

impl SubstrateSettings for RaptorSettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m6`: RAPTOR's tree of GMM-clustered summaries over leaves, read as a
/// collapsed tree.
pub fn raptor_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m6", MethodId::M6, Family::HIERARCHICAL)
        .aliases(&["raptor"])
        .paper("Harness the Memory, M6")
        .summary("hierarchical tree (RAPTOR): leaves + GMM-clustered summaries, collapsed-tree read; extractive summaries without an LLM")
        .llm(LlmUse::Optional)
        .settings(RaptorSettings::default())
        .build(|ctx, s: RaptorSettings| {
            Ok(Arc::new(Raptor::new(ctx.services.clone(), s.config())?))
        })
}

/// Every factory of the RAPTOR family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![raptor_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> RaptorConfig {
        f.typed::<RaptorSettings>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
            .config()
    }

    #[test]
    fn m6_parses_settings_and_builds_without_an_llm() {
        let f = raptor_factory();
        f.validate().unwrap();
        assert_eq!(RaptorSettings::default().config(), RaptorConfig::default());
        let c = parsed(
            &f,
            &[
                ("dims", "8"),
                ("threshold", "0.2"),
                ("summarizer", "extractive"),
                ("fill", "false"),
            ],
        );
        assert_eq!(
            (c.reduce_dims, c.summarizer, c.fill_budget),
            (8, SummarizerKind::Extractive, false)
        );
        assert!((c.membership_threshold - 0.2).abs() < 1e-9);
        let c = parsed(
            &f,
            &[
                ("leaf_tokens", "50"),
                ("max_clusters", "9"),
                ("bic_sample", "100"),
                ("cluster_tokens", "900"),
                ("depth", "2"),
                ("min_nodes", "5"),
                ("summarizer", "rule"),
                ("summary_tokens", "60"),
                ("summary_words", "50"),
                ("rebuild_fraction", "0.25"),
                ("drift_growth", "3"),
                ("dedup", "0.9"),
            ],
        );
        assert_eq!(
            (
                c.leaf_tokens,
                c.max_clusters,
                c.bic_sample,
                c.max_cluster_tokens,
                c.max_depth,
                c.min_layer_nodes,
                c.summarizer,
                c.summary_tokens,
                c.summary_words
            ),
            (50, 9, 100, 900, 2, 5, SummarizerKind::Extractive, 60, 50)
        );
        assert!((c.rebuild_fraction - 0.25).abs() < 1e-9 && (c.drift_growth - 3.0).abs() < 1e-9);
        assert!((c.dedup_similarity - 0.9).abs() < 1e-6);
        assert!(f.settings_from_strs(&[("threshold", "2")]).is_err());
        assert!(f.settings_from_strs(&[("summarizer", "poem")]).is_err());
        assert!(f.settings_from_strs(&[("colour", "red")]).is_err());
        assert!(f.answers_to("raptor") && f.answers_to("M6") && !f.answers_to("tree"));
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let built = f.build(&ctx, &Settings::new()).unwrap();
        assert!(!built.info().needs_llm);
    }
}
