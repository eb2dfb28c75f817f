//! The flat family's plugins: `m1`, `m1-fill`, `m2`, `m2-fill`, `hybrid`,
//! `hybrid-fill` and the piece-retrieval baselines `m2-pieces`, `m1-pieces`
//! and `hybrid-pieces` as [`SubstrateFactory`] values a registry lists and
//! builds by name.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};
use submem_kit::text::StopWords;

use crate::hybrid::{DEFAULT_POOL, DEFAULT_RRF_K, HYBRID};
use crate::pieces::{DEFAULT_PIECE_CANDIDATES, DEFAULT_PIECE_TOKENS, PIECES};
use crate::{
    DenseConfig, DenseMemory, HybridConfig, HybridMemory, PieceConfig, PieceMemory, PieceRanking,
    ReadDepth, SparseConfig, SparseMemory,
};

const PAPER: &str = "Harness the Memory";

/// How deep a flat read goes: the query's top-k, or ranked turns until the
/// budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DepthSettings {
    /// Show ranked turns until the budget is spent instead of the top-k.
    pub fill: bool,
    /// Most turns a fill read ranks (fill reads only; unset: 2,048).
    pub candidates: Option<usize>,
}

impl DepthSettings {
    fn new(fill: bool) -> Self {
        DepthSettings {
            fill,
            candidates: None,
        }
    }

    fn depth(&self) -> Result<ReadDepth> {
        match (self.fill, self.candidates) {
            (false, None) => Ok(ReadDepth::TopK),
            (false, Some(_)) => Err(Error::InvalidInput(
                "candidates applies to fill reads only (fill=true or a *-fill name)".into(),
            )),
            (true, Some(0)) => Err(Error::InvalidInput(
                "a fill read needs at least one candidate".into(),
            )),
            (true, None) => Ok(ReadDepth::fill()),
            (true, Some(n)) => Ok(ReadDepth::Fill { max_candidates: n }),
        }
    }
}

/// Settings of `m1` / `m1-fill` (see [`DenseConfig`] for the measurements
/// behind each default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenseSettings {
    /// Below this many turns a namespace is searched exactly; at or above, by HNSW.
    pub exact_threshold: usize,
    /// HNSW M: neighbours kept per node and layer.
    pub m: usize,
    /// HNSW candidate list size while building.
    pub ef_construction: usize,
    /// HNSW candidate list size while searching (the recall/latency dial).
    pub ef_search: usize,
    /// Texts per embedder call.
    pub embed_batch: usize,
    /// Show ranked turns until the budget is spent instead of the top-k.
    pub fill: bool,
    /// Most turns a fill read ranks (fill reads only; unset: 2,048).
    pub candidates: Option<usize>,
}

impl DenseSettings {
    /// The defaults, reading top-k or filling.
    pub fn new(fill: bool) -> Self {
        let c = DenseConfig::default();
        DenseSettings {
            exact_threshold: c.exact_threshold,
            m: c.max_connections,
            ef_construction: c.ef_construction,
            ef_search: c.ef_search,
            embed_batch: c.embed_batch,
            fill,
            candidates: None,
        }
    }

    /// The substrate's config.
    pub fn config(&self) -> Result<DenseConfig> {
        let depth = DepthSettings {
            fill: self.fill,
            candidates: self.candidates,
        }
        .depth()?;
        Ok(DenseConfig::default()
            .with_exact_threshold(self.exact_threshold)
            .with_max_connections(self.m)
            .with_ef_construction(self.ef_construction)
            .with_ef_search(self.ef_search)
            .with_embed_batch(self.embed_batch)
            .with_depth(depth))
    }
}

impl SubstrateSettings for DenseSettings {
    fn validate(&self) -> Result<()> {
        self.config()?
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// Settings of `m2` / `m2-fill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SparseSettings {
    /// Stop words dropped from the index and the query: `english` (a broad
    /// 179-word list), `lucene` (tantivy's 33 words) or `none`.
    pub stopwords: StopWords,
    /// Show ranked turns until the budget is spent instead of the top-k.
    pub fill: bool,
    /// Most turns a fill read ranks (fill reads only; unset: 2,048).
    pub candidates: Option<usize>,
}

impl SparseSettings {
    /// The defaults, reading top-k or filling.
    pub fn new(fill: bool) -> Self {
        let d = DepthSettings::new(fill);
        SparseSettings {
            stopwords: SparseConfig::default().stop_words,
            fill: d.fill,
            candidates: d.candidates,
        }
    }

    /// The substrate's config.
    pub fn config(&self) -> Result<SparseConfig> {
        let depth = DepthSettings {
            fill: self.fill,
            candidates: self.candidates,
        }
        .depth()?;
        Ok(SparseConfig::default()
            .with_stop_words(self.stopwords)
            .with_depth(depth))
    }
}

impl SubstrateSettings for SparseSettings {
    fn validate(&self) -> Result<()> {
        self.config()?
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m1` (or `m1-fill` when `fill`): MiniLM embeddings searched by HNSW.
pub fn dense_factory(fill: bool) -> SubstrateFactory {
    let (name, aliases, summary): (_, &[&str], _) = if fill {
        (
            "m1-fill",
            &["dense-fill"],
            "dense vectors (MiniLM + HNSW), ranked turns until the budget is spent",
        )
    } else {
        (
            "m1",
            &["dense"],
            "dense vectors (MiniLM + HNSW), top-k turns",
        )
    };
    SubstrateFactory::builder(name, MethodId::M1, Family::FLAT)
        .aliases(aliases)
        .paper(format!("{PAPER}, M1"))
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(DenseSettings::new(fill))
        .build(|ctx, s: DenseSettings| {
            Ok(Arc::new(DenseMemory::new(
                ctx.services.clone(),
                s.config()?,
            )?))
        })
}

/// `m2` (or `m2-fill` when `fill`): BM25 over turns with tantivy.
pub fn sparse_factory(fill: bool) -> SubstrateFactory {
    let (name, aliases, summary): (_, &[&str], _) = if fill {
        (
            "m2-fill",
            &["bm25-fill"],
            "BM25 (tantivy), ranked turns until the budget is spent",
        )
    } else {
        ("m2", &["bm25"], "BM25 (tantivy), top-k turns")
    };
    SubstrateFactory::builder(name, MethodId::M2, Family::FLAT)
        .aliases(aliases)
        .paper(format!("{PAPER}, M2"))
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(SparseSettings::new(fill))
        .build(|ctx, s: SparseSettings| {
            Ok(Arc::new(SparseMemory::new(
                ctx.services.clone(),
                s.config()?,
            )?))
        })
}

/// Settings of `hybrid` / `hybrid-fill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HybridSettings {
    /// The fusion constant k of 1 / (k + rank).
    pub rrf_k: f32,
    /// Turns each ranking contributes to a top-k read.
    pub pool: usize,
    /// Stop words of the BM25 side: `english`, `lucene` or `none`.
    pub stopwords: StopWords,
    /// Show ranked turns until the budget is spent instead of the top-k.
    pub fill: bool,
    /// Most turns a fill read ranks on each side (fill reads only; unset: 2,048).
    pub candidates: Option<usize>,
}

impl HybridSettings {
    /// The defaults, reading top-k or filling.
    pub fn new(fill: bool) -> Self {
        HybridSettings {
            rrf_k: DEFAULT_RRF_K,
            pool: DEFAULT_POOL,
            stopwords: SparseConfig::default().stop_words,
            fill,
            candidates: None,
        }
    }

    /// The substrate's config.
    pub fn config(&self) -> Result<HybridConfig> {
        let depth = DepthSettings {
            fill: self.fill,
            candidates: self.candidates,
        }
        .depth()?;
        Ok(HybridConfig {
            sparse: SparseConfig::default().with_stop_words(self.stopwords),
            rrf_k: self.rrf_k,
            pool: self.pool,
            ..HybridConfig::default()
        }
        .with_depth(depth))
    }
}

impl SubstrateSettings for HybridSettings {
    fn validate(&self) -> Result<()> {
        let config = self.config()?;
        HybridMemory::check(&config)
    }
}

/// `hybrid` (or `hybrid-fill` when `fill`): dense and BM25 rankings fused by
/// reciprocal rank.
pub fn hybrid_factory(fill: bool) -> SubstrateFactory {
    let (name, aliases, summary): (_, &[&str], _) = if fill {
        (
            "hybrid-fill",
            &["rrf-fill"],
            "dense + BM25 fused by reciprocal rank, ranked turns until the budget is spent",
        )
    } else {
        (
            "hybrid",
            &["rrf"],
            "dense + BM25 fused by reciprocal rank, top-k turns",
        )
    };
    SubstrateFactory::builder(name, HYBRID, Family::FLAT)
        .aliases(aliases)
        .paper("reciprocal-rank fusion (Cormack et al., SIGIR 2009) of M1 and M2")
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(HybridSettings::new(fill))
        .build(|ctx, s: HybridSettings| {
            Ok(Arc::new(HybridMemory::new(
                ctx.services.clone(),
                s.config()?,
            )?))
        })
}

/// Settings of `m2-pieces`, `m1-pieces` and `hybrid-pieces`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PieceSettings {
    /// κ: the most tokens in one piece (FlexA-Mem's default, so both cut the same pieces).
    pub piece_tokens: usize,
    /// Most pieces ranked per read.
    pub candidates: usize,
    /// Stop words of the BM25 ranking: `english`, `lucene` or `none`.
    pub stopwords: StopWords,
    /// The fusion constant k of 1 / (k + rank) (hybrid ranking only).
    pub rrf_k: f32,
}

impl PieceSettings {
    /// The defaults.
    pub fn new() -> Self {
        PieceSettings {
            piece_tokens: DEFAULT_PIECE_TOKENS,
            candidates: DEFAULT_PIECE_CANDIDATES,
            stopwords: SparseConfig::default().stop_words,
            rrf_k: DEFAULT_RRF_K,
        }
    }

    /// The substrate's config for `ranking`.
    pub fn config(&self, ranking: PieceRanking) -> PieceConfig {
        PieceConfig {
            piece_tokens: self.piece_tokens,
            candidates: self.candidates,
            sparse: SparseConfig::default().with_stop_words(self.stopwords),
            rrf_k: self.rrf_k,
            ..PieceConfig::new(ranking)
        }
    }
}

impl Default for PieceSettings {
    fn default() -> Self {
        Self::new()
    }
}

impl SubstrateSettings for PieceSettings {
    fn validate(&self) -> Result<()> {
        self.config(PieceRanking::Hybrid).validate()
    }
}

/// `m2-pieces`, `m1-pieces` or `hybrid-pieces`: pieces of κ tokens ranked by
/// BM25, dense cosine or both, packed until the budget is spent.
pub fn piece_factory(ranking: PieceRanking) -> SubstrateFactory {
    let (name, aliases, summary): (_, &[&str], _) = match ranking {
        PieceRanking::Bm25 => (
            "m2-pieces",
            &["bm25-pieces"],
            "pieces of κ tokens ranked by BM25, packed until the budget is spent",
        ),
        PieceRanking::Dense => (
            "m1-pieces",
            &["dense-pieces"],
            "pieces of κ tokens ranked by MiniLM cosine, packed until the budget is spent",
        ),
        PieceRanking::Hybrid => (
            "hybrid-pieces",
            &["rrf-pieces"],
            "pieces of κ tokens ranked by dense + BM25 reciprocal-rank fusion, packed until the budget is spent",
        ),
    };
    SubstrateFactory::builder(name, PIECES, Family::FLAT)
        .aliases(aliases)
        .paper("FlexA-Mem's piece retrieval baseline (BM25); dense and fused variants")
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(PieceSettings::new())
        .build(move |ctx, s: PieceSettings| {
            Ok(Arc::new(PieceMemory::new(
                ctx.services.clone(),
                s.config(ranking),
            )?))
        })
}

/// Every factory of the flat family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![
        dense_factory(false),
        dense_factory(true),
        sparse_factory(false),
        sparse_factory(true),
        hybrid_factory(false),
        hybrid_factory(true),
        piece_factory(PieceRanking::Bm25),
        piece_factory(PieceRanking::Dense),
        piece_factory(PieceRanking::Hybrid),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    #[test]
    fn flat_factories_parse_depth_and_build() {
        let [m1, m1_fill, m2, m2_fill] = [
            dense_factory(false),
            dense_factory(true),
            sparse_factory(false),
            sparse_factory(true),
        ];
        for f in [&m1, &m1_fill, &m2, &m2_fill] {
            f.validate().unwrap();
        }
        assert!(m1.settings_from_strs(&[("candidates", "300")]).is_err());
        assert!(m2_fill.settings_from_strs(&[("candidates", "0")]).is_err());
        assert!(m2.settings_from_strs(&[("fill", "maybe")]).is_err());
        assert!(m1_fill.settings_from_strs(&[("candidates", "300")]).is_ok());
        assert!(m1.settings_from_strs(&[("ef_search", "32")]).is_ok());
        assert!(m2.settings_from_strs(&[("stopwords", "Lucene")]).is_ok());
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let s = m2_fill.build(&ctx, &Settings::new()).unwrap();
        assert_eq!(s.info().name, "sparse-bm25-fill");
        let s = m2_fill
            .build(
                &ctx,
                &m2_fill.settings_from_strs(&[("fill", "false")]).unwrap(),
            )
            .unwrap();
        assert_eq!(s.info().name, "sparse-bm25");
        assert!(m1.answers_to("dense") && m2_fill.answers_to("bm25-fill"));
        let hybrid_fill = hybrid_factory(true);
        hybrid_fill.validate().unwrap();
        assert!(hybrid_fill.settings_from_strs(&[("rrf_k", "-3")]).is_err());
        assert!(hybrid_fill.settings_from_strs(&[("pool", "0")]).is_err());
        assert!(hybrid_fill.answers_to("rrf-fill"));
        let s = hybrid_fill.build(&ctx, &Settings::new()).unwrap();
        assert_eq!(s.info().name, "hybrid-rrf-fill");
    }

    #[test]
    fn piece_factories_parse_their_settings_and_build() {
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        for ranking in [
            PieceRanking::Bm25,
            PieceRanking::Dense,
            PieceRanking::Hybrid,
        ] {
            let f = piece_factory(ranking);
            f.validate().unwrap();
            assert!(f.settings_from_strs(&[("piece_tokens", "0")]).is_err());
            assert!(f.settings_from_strs(&[("candidates", "0")]).is_err());
            assert!(f.settings_from_strs(&[("kappa", "3")]).is_err());
            let s = f.settings_from_strs(&[("piece_tokens", "32")]).unwrap();
            let built = f.build(&ctx, &s).unwrap();
            assert_eq!(built.info().name, ranking.substrate_name());
        }
        assert!(piece_factory(PieceRanking::Bm25).answers_to("bm25-pieces"));
    }
}
