//! The graph family's plugin: `m5` (alias `lightrag`) as a
//! [`SubstrateFactory`] a registry lists and builds by name. Without a memory
//! LLM it runs on its rule extractor and rule keywords.

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{GraphConfig, GraphMemory};

submem_core::settings_checked_by_validate!(GraphConfig);

/// `m5`: LightRAG's dual-level graph (entities, relations and dense chunks,
/// fused by reciprocal rank).
pub fn graph_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m5", crate::M5, Family::STRUCTURAL)
        .aliases(&["lightrag"])
        .paper("Harness the Memory, M5")
        .summary("dual-level graph (LightRAG): entity-relation graph + dense chunks, RRF; rule extraction without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: GraphConfig| {
            Ok(Arc::new(GraphMemory::new(ctx.services.clone(), config)?))
        })
}

/// Every factory of the graph family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![graph_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Extractor;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> GraphConfig {
        f.typed::<GraphConfig>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
    }

    #[test]
    fn parses_graph_settings_and_builds_without_an_llm() {
        let f = graph_factory();
        f.validate().unwrap();
        assert_eq!(parsed(&f, &[]), GraphConfig::default());
        let c = parsed(
            &f,
            &[
                ("keyword_max_tokens", "64"),
                ("reextract_on_forget", "false"),
            ],
        );
        assert_eq!((c.keyword_max_tokens, c.reextract_on_forget), (64, false));
        let c = parsed(
            &f,
            &[
                ("chunk_tokens", "200"),
                ("top_k", "30"),
                ("keywords", "rule"),
            ],
        );
        assert_eq!(
            (c.chunk_tokens, c.top_k, c.keywords),
            (200, Some(30), Extractor::Rule)
        );
        let c = parsed(
            &f,
            &[
                ("chunk_top_k", "7"),
                ("chunks_per_item", "2"),
                ("rrf_k", "30"),
                ("graph_share", "0.5"),
                ("description_tokens", "40"),
                ("extraction", "rules"),
                ("grounded", "false"),
                ("embed_batch", "8"),
                ("extract_max_tokens", "200"),
            ],
        );
        assert_eq!(
            (
                c.chunk_top_k,
                c.chunks_per_item,
                c.description_tokens,
                c.extraction,
                c.require_grounded_names,
                c.embed_batch,
                c.extract_max_tokens
            ),
            (Some(7), 2, 40, Extractor::Rule, false, 8, 200)
        );
        assert!((c.rrf_k - 30.0).abs() < 1e-6 && (c.graph_share - 0.5).abs() < 1e-6);
        assert!(f.settings_from_strs(&[("graph_share", "2")]).is_err());
        assert!(f.settings_from_strs(&[("extraction", "maybe")]).is_err());
        assert!(f.settings_from_strs(&[("nope", "1")]).is_err());
        assert!(f.settings_from_strs(&[("top_k", "0")]).is_err());
        assert!(f.answers_to("lightrag") && f.answers_to("M5") && !f.answers_to("graph"));
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let s = f.build(&ctx, &Settings::new()).unwrap();
        assert!(!s.info().needs_llm);
    }
}
