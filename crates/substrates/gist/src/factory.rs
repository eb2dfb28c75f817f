//! The gist family's plugin: `m3` (alias `readagent`) as a
//! [`SubstrateFactory`] a registry lists and builds by name.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{GistConfig, GistIndex};

/// Settings of `m3` (see [`GistConfig`] for the reason behind each default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GistSettings {
    /// Target page size in tokens; pages are cut between events.
    pub page_tokens: usize,
    /// A session shorter than this many tokens joins the previous page when both fit.
    pub tiny_session_tokens: usize,
    /// Most words of a gist.
    pub gist_words: usize,
    /// Most pages expanded per read.
    pub max_expand: usize,
    /// Most tokens of gist lines in the page-selection prompt.
    pub select_prompt_tokens: usize,
    /// Let the memory LLM select the pages to expand (false: the BM25 rule even with an LLM).
    pub llm_select: bool,
    /// Token-set Jaccard similarity at or above which two gists count as duplicates.
    pub dedup_jaccard: f32,
}

impl Default for GistSettings {
    fn default() -> Self {
        let c = GistConfig::default();
        GistSettings {
            page_tokens: c.page_tokens,
            tiny_session_tokens: c.tiny_session_tokens,
            gist_words: c.gist_words,
            max_expand: c.max_expand,
            select_prompt_tokens: c.select_prompt_tokens,
            llm_select: c.llm_select,
            dedup_jaccard: c.dedup_jaccard,
        }
    }
}

impl GistSettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> GistConfig {
        GistConfig::default()
            .with_page_tokens(self.page_tokens)
            .with_tiny_session_tokens(self.tiny_session_tokens)
            .with_gist_words(self.gist_words)
            .with_max_expand(self.max_expand)
            .with_select_prompt_tokens(self.select_prompt_tokens)
            .with_llm_select(self.llm_select)
            .with_dedup_jaccard(self.dedup_jaccard)
    }
}

impl SubstrateSettings for GistSettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m3`: pages with one-sentence gists; a read expands the pages the LLM
/// (or, without one, BM25) selects.
pub fn gist_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m3", MethodId::M3, Family::TEXT_RECORD)
        .aliases(&["readagent"])
        .paper("Harness the Memory, M3")
        .summary("gist index (ReadAgent): paged history with gists; rule gists and BM25 page selection without an LLM")
        .llm(LlmUse::Optional)
        .settings(GistSettings::default())
        .build(|ctx, s: GistSettings| {
            Ok(Arc::new(GistIndex::new(ctx.services.clone(), s.config())?))
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
        f.typed::<GistSettings>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
            .config()
    }

    #[test]
    fn m3_parses_its_settings_and_builds_without_an_llm() {
        let f = gist_factory();
        f.validate().unwrap();
        assert!(f.answers_to("readagent") && f.answers_to("M3") && !f.answers_to("gist"));
        assert_eq!(GistSettings::default().config(), GistConfig::default());
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
        assert_eq!(s.info().method, MethodId::M3);
    }
}
