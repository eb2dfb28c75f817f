//! Settings of the gist index (M3). Every number the method uses lives here,
//! with the reason for its default.

use serde::{Deserialize, Serialize};

use crate::GistError;

/// Settings of [`crate::GistIndex`], and of the `m3` plugin: every field is a
/// setting (`m3:page_tokens=300`), listed by `submem substrates` with the
/// first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GistConfig {
    /// Target page size in o200k tokens (`docs/METHODS.md`: about 600). Pages are
    /// cut at turn/step boundaries, so a single longer event makes a longer
    /// page. Default 600.
    pub page_tokens: usize,
    /// A session (or episode) run shorter than this many tokens joins the
    /// previous page when both fit in `page_tokens`, instead of opening a
    /// page of its own: the only case where a page spans two sessions.
    /// Default 150 (a quarter of a page: a few turns).
    pub tiny_session_tokens: usize,
    /// Most words of a gist; the LLM's reply is cut at its first sentence and
    /// then at this many words (SmolLM2 ignores "one sentence"). Default 40.
    pub gist_words: usize,
    /// Most new tokens of a gist-writing call. Default 80 (a sentence of 40
    /// words with room; anything longer is cut anyway).
    pub gist_max_new_tokens: usize,
    /// Most pages to expand per read (ReadAgent looks up "up to N pages";
    /// its parallel lookup uses a handful). Default 5: at a 4k budget five
    /// 600-token pages plus the gists of the rest fill the allowance.
    pub max_expand: usize,
    /// Most new tokens of the page-selection call (a list of numbers).
    /// Default 24.
    pub select_max_new_tokens: usize,
    /// Most tokens of gist lines in the page-selection prompt; beyond that
    /// only the gists of the best pages by BM25 are listed (in time order),
    /// so the prompt stays inside a small model's context. Default 3000.
    pub select_prompt_tokens: usize,
    /// Whether the read uses the LLM to select pages when one is configured.
    /// `false` uses the BM25 rule even with an LLM. Default true.
    pub llm_select: bool,
    /// Token-set Jaccard similarity at or above which two gists count as
    /// duplicates in `manage` (exact equality after normalisation always
    /// does). Default 0.8.
    pub dedup_jaccard: f32,
}

impl Default for GistConfig {
    fn default() -> Self {
        GistConfig {
            page_tokens: 600,
            tiny_session_tokens: 150,
            gist_words: 40,
            gist_max_new_tokens: 80,
            max_expand: 5,
            select_max_new_tokens: 24,
            select_prompt_tokens: 3000,
            llm_select: true,
            dedup_jaccard: 0.8,
        }
    }
}

submem_kit::setters!(GistConfig {
    with_page_tokens => page_tokens: usize,
    with_tiny_session_tokens => tiny_session_tokens: usize,
    with_gist_words => gist_words: usize,
    with_gist_max_new_tokens => gist_max_new_tokens: usize,
    with_max_expand => max_expand: usize,
    with_select_max_new_tokens => select_max_new_tokens: usize,
    with_select_prompt_tokens => select_prompt_tokens: usize,
    with_llm_select => llm_select: bool,
    with_dedup_jaccard => dedup_jaccard: f32,
});

impl GistConfig {
    /// Rejects settings the method cannot work with.
    pub fn validate(&self) -> Result<(), GistError> {
        let positive = [
            ("page_tokens", self.page_tokens),
            ("gist_words", self.gist_words),
            ("gist_max_new_tokens", self.gist_max_new_tokens),
            ("max_expand", self.max_expand),
            ("select_max_new_tokens", self.select_max_new_tokens),
            ("select_prompt_tokens", self.select_prompt_tokens),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(GistError::Config(format!("{name} must be at least 1")));
        }
        if self.tiny_session_tokens > self.page_tokens {
            return Err(GistError::Config(format!(
                "tiny_session_tokens ({}) must not exceed page_tokens ({})",
                self.tiny_session_tokens, self.page_tokens
            )));
        }
        if !(self.dedup_jaccard > 0.0 && self.dedup_jaccard <= 1.0) {
            return Err(GistError::Config(format!(
                "dedup_jaccard must be in (0, 1], got {}",
                self.dedup_jaccard
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_are_refused() {
        assert!(GistConfig::default().validate().is_ok());
        assert!(GistConfig::default()
            .with_page_tokens(0)
            .validate()
            .is_err());
        assert!(GistConfig::default()
            .with_tiny_session_tokens(700)
            .validate()
            .is_err());
        assert!(GistConfig::default()
            .with_dedup_jaccard(0.0)
            .validate()
            .is_err());
        assert!(GistConfig::default().with_max_expand(0).validate().is_err());
    }
}
