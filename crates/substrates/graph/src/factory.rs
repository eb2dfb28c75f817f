//! The graph family's plugin: `m5` (alias `lightrag`) as a
//! [`SubstrateFactory`] a registry lists and builds by name. Without a memory
//! LLM it runs on its rule extractor and rule keywords.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{Extractor, GraphConfig, GraphMemory};

/// Who does a step that may use the LLM ([`Extractor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorSetting {
    /// The memory LLM when one is configured, else the rules.
    Llm,
    /// Always the rules (no LLM call).
    #[serde(alias = "rules")]
    Rule,
}

impl From<ExtractorSetting> for Extractor {
    fn from(x: ExtractorSetting) -> Self {
        match x {
            ExtractorSetting::Llm => Extractor::Llm,
            ExtractorSetting::Rule => Extractor::Rule,
        }
    }
}

impl From<Extractor> for ExtractorSetting {
    fn from(x: Extractor) -> Self {
        match x {
            Extractor::Llm => ExtractorSetting::Llm,
            Extractor::Rule => ExtractorSetting::Rule,
        }
    }
}

/// Settings of `m5` (see [`GraphConfig`] for each default and where it
/// differs from LightRAG).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphSettings {
    /// Target chunk size in tokens; chunks end at event boundaries.
    pub chunk_tokens: usize,
    /// Entities and relations matched by the query's keywords (unset: the query's top-k).
    pub top_k: Option<usize>,
    /// Chunks taken from the dense chunk index (unset: the query's top-k).
    pub chunk_top_k: Option<usize>,
    /// Chunks gathered from one matched entity or relation.
    pub chunks_per_item: usize,
    /// Reciprocal-rank-fusion constant k0 in 1 / (k0 + rank).
    pub rrf_k: f32,
    /// Fuse a BM25 chunk list beside the dense one.
    pub lexical_chunks: bool,
    /// Share of the allowance entity and relation descriptions may take, in [0, 1].
    pub graph_share: f32,
    /// Longest description shown for one entity or relation, in tokens.
    pub description_tokens: usize,
    /// Who extracts entities and relations at write time.
    pub extraction: ExtractorSetting,
    /// Who extracts the query's keywords at read time.
    pub keywords: ExtractorSetting,
    /// Keep only LLM entities whose name occurs in the chunk.
    pub grounded: bool,
    /// Texts per embedding call.
    pub embed_batch: usize,
    /// Most new tokens of one extraction call.
    pub extract_max_tokens: usize,
}

impl Default for GraphSettings {
    fn default() -> Self {
        let c = GraphConfig::default();
        GraphSettings {
            chunk_tokens: c.chunk_tokens,
            top_k: c.top_k,
            chunk_top_k: c.chunk_top_k,
            chunks_per_item: c.chunks_per_item,
            rrf_k: c.rrf_k,
            lexical_chunks: c.lexical_chunks,
            graph_share: c.graph_share,
            description_tokens: c.description_tokens,
            extraction: c.extraction.into(),
            keywords: c.keywords.into(),
            grounded: c.require_grounded_names,
            embed_batch: c.embed_batch,
            extract_max_tokens: c.extract_max_tokens,
        }
    }
}

impl GraphSettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> GraphConfig {
        GraphConfig::default()
            .with_chunk_tokens(self.chunk_tokens)
            .with_top_k(self.top_k)
            .with_chunk_top_k(self.chunk_top_k)
            .with_chunks_per_item(self.chunks_per_item)
            .with_rrf_k(self.rrf_k)
            .with_lexical_chunks(self.lexical_chunks)
            .with_graph_share(self.graph_share)
            .with_description_tokens(self.description_tokens)
            .with_require_grounded_names(self.grounded)
            .with_embed_batch(self.embed_batch)
            .with_extract_max_tokens(self.extract_max_tokens)
            .with_extraction(self.extraction.into())
            .with_keywords(self.keywords.into())
    }
}

impl SubstrateSettings for GraphSettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m5`: LightRAG's dual-level graph (entities, relations and dense chunks,
/// fused by reciprocal rank).
pub fn graph_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m5", MethodId::M5, Family::STRUCTURAL)
        .aliases(&["lightrag"])
        .paper("Harness the Memory, M5")
        .summary("dual-level graph (LightRAG): entity-relation graph + dense chunks, RRF; rule extraction without an LLM")
        .llm(LlmUse::Optional)
        .settings(GraphSettings::default())
        .build(|ctx, s: GraphSettings| {
            Ok(Arc::new(GraphMemory::new(ctx.services.clone(), s.config())?))
        })
}

/// Every factory of the graph family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![graph_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> GraphConfig {
        f.typed::<GraphSettings>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
            .config()
    }

    #[test]
    fn parses_graph_settings_and_builds_without_an_llm() {
        let f = graph_factory();
        f.validate().unwrap();
        assert_eq!(GraphSettings::default().config(), GraphConfig::default());
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
