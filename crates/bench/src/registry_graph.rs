//! Registry entry of M5, the dual-level graph ([`submem_graph::GraphMemory`]):
//! settings `chunk_tokens`, `top_k`, `chunk_top_k`, `chunks_per_item`,
//! `rrf_k`, `graph_share`, `description_tokens`, `extraction=llm|rule`,
//! `keywords=llm|rule`, `grounded=true|false`, `embed_batch`, `extract_max_tokens`.
//! Without a memory LLM it runs on its rule extractor and rule keywords.

use submem_graph::{Extractor, GraphConfig};

use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

/// Settings `m5` accepts.
pub const GRAPH_SETTINGS: &[&str] = &[
    "chunk_tokens",
    "top_k",
    "chunk_top_k",
    "chunks_per_item",
    "rrf_k",
    "graph_share",
    "description_tokens",
    "extraction",
    "keywords",
    "grounded",
    "embed_batch",
    "extract_max_tokens",
];

fn extractor(spec: &SubstrateSpec, key: &str) -> Result<Option<Extractor>> {
    match spec.get(key).map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("llm") => Ok(Some(Extractor::Llm)),
        Some("rule") | Some("rules") => Ok(Some(Extractor::Rule)),
        Some(v) => Err(BenchError::BadSetting {
            substrate: spec.name.clone(),
            setting: format!("{key}={v}"),
            reason: "expected llm or rule".into(),
        }),
    }
}

/// Parses `m5`'s settings.
pub fn graph_config(spec: &SubstrateSpec) -> Result<GraphConfig> {
    spec.only(GRAPH_SETTINGS)?;
    let mut c = GraphConfig::default();
    if let Some(v) = spec.parse_setting("chunk_tokens")? {
        c = c.with_chunk_tokens(v);
    }
    if let Some(v) = spec.parse_setting("top_k")? {
        c = c.with_top_k(Some(v));
    }
    if let Some(v) = spec.parse_setting("chunk_top_k")? {
        c = c.with_chunk_top_k(Some(v));
    }
    if let Some(v) = spec.parse_setting("chunks_per_item")? {
        c = c.with_chunks_per_item(v);
    }
    if let Some(v) = spec.parse_setting("rrf_k")? {
        c = c.with_rrf_k(v);
    }
    if let Some(v) = spec.parse_setting("graph_share")? {
        c = c.with_graph_share(v);
    }
    if let Some(v) = spec.parse_setting("description_tokens")? {
        c = c.with_description_tokens(v);
    }
    if let Some(v) = spec.parse_setting("grounded")? {
        c = c.with_require_grounded_names(v);
    }
    if let Some(v) = spec.parse_setting("embed_batch")? {
        c = c.with_embed_batch(v);
    }
    if let Some(v) = spec.parse_setting("extract_max_tokens")? {
        c = c.with_extract_max_tokens(v);
    }
    if let Some(x) = extractor(spec, "extraction")? {
        c = c.with_extraction(x);
    }
    if let Some(x) = extractor(spec, "keywords")? {
        c = c.with_keywords(x);
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_graph_settings() {
        let s = SubstrateSpec::parse("m5:chunk_tokens=200,top_k=30,keywords=rule").unwrap();
        let c = graph_config(&s).unwrap();
        assert_eq!(
            (c.chunk_tokens, c.top_k, c.keywords),
            (200, Some(30), Extractor::Rule)
        );
        assert!(graph_config(&SubstrateSpec::parse("m5:graph_share=2").unwrap()).is_err());
        assert!(graph_config(&SubstrateSpec::parse("m5:extraction=maybe").unwrap()).is_err());
        assert!(graph_config(&SubstrateSpec::parse("m5:nope=1").unwrap()).is_err());
    }
}
