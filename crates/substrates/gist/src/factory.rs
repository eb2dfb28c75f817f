//! The gist family's plugin: `m3` (alias `readagent`) as a
//! [`SubstrateFactory`] a registry lists and builds by name.

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{GistConfig, GistIndex};

submem_core::settings_checked_by_validate!(GistConfig);

/// `m3`: pages with one-sentence gists; a read expands the pages the LLM
/// (or, without one, BM25) selects.
pub fn gist_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m3", crate::M3, Family::TEXT_RECORD)
        .aliases(&["readagent"])
        .paper("Harness the Memory, M3")
        .summary("gist index (ReadAgent): paged history with gists; rule gists and BM25 page selection without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: GistConfig| {
            Ok(Arc::new(GistIndex::new(ctx.services.clone(), config)?))
        })
}

/// Every factory of the gist family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![gist_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> GistConfig {
        f.typed::<GistConfig>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
    }

    #[test]
    fn m3_parses_its_settings_and_builds_without_an_llm() {
        let f = gist_factory();
        f.validate().unwrap();
        assert!(f.answers_to("readagent") && f.answers_to("M3") && !f.answers_to("gist"));
        assert_eq!(parsed(&f, &[]), GistConfig::default());
        let c = parsed(&f, &[("gist_max_new_tokens", "60")]);
        assert_eq!(c.gist_max_new_tokens, 60);
        let c = parsed(&f, &[("page_tokens", "300"), ("max_expand", "3")]);
        assert_eq!((c.page_tokens, c.max_expand), (300, 3));
        let c = parsed(&f, &[("llm_select", "false"), ("dedup_jaccard", "0.5")]);
        assert!(!c.llm_select && (c.dedup_jaccard - 0.5).abs() < 1e-6);
        assert!(f.settings_from_strs(&[("page_tokens", "0")]).is_err());
        assert!(f
            .settings_from_strs(&[("tiny_session_tokens", "700")])
            .is_err());
        assert!(f.settings_from_strs(&[("dedup_jaccard", "0")]).is_err());
        let e = f
            .settings_from_strs(&[("pages", "3")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown setting `pages`"), "{e}");
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let s = f.build(&ctx, &Settings::new()).unwrap();
        assert!(!s.info().needs_llm);
        assert_eq!(s.info().method, crate::M3);
    }
}
