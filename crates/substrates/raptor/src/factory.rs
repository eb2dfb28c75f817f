//! RAPTOR's plugin: `m6` (alias `raptor`) as a
//! [`SubstrateFactory`] a registry lists and builds by name. Without a memory
//! LLM its summaries are extractive.

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{Raptor, RaptorConfig};

submem_core::settings_checked_by_validate!(RaptorConfig);

/// `m6`: RAPTOR's tree of GMM-clustered summaries over leaves, read as a
/// collapsed tree.
pub fn raptor_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m6", crate::M6, Family::HIERARCHICAL)
        .aliases(&["raptor"])
        .paper("Harness the Memory, M6")
        .summary("hierarchical tree (RAPTOR): leaves + GMM-clustered summaries, collapsed-tree read; extractive summaries without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: RaptorConfig| {
            Ok(Arc::new(Raptor::new(ctx.services.clone(), config)?))
        })
}

/// Every factory of the RAPTOR family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![raptor_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SummarizerKind;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> RaptorConfig {
        f.typed::<RaptorConfig>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
    }

    #[test]
    fn m6_parses_settings_and_builds_without_an_llm() {
        let f = raptor_factory();
        f.validate().unwrap();
        assert_eq!(parsed(&f, &[]), RaptorConfig::default());
        let c = parsed(&f, &[("summary_input_tokens", "900"), ("embed_batch", "8")]);
        assert_eq!((c.summary_input_tokens, c.embed_batch), (900, 8));
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
