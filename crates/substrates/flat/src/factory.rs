//! The flat family's plugins: `m1`, `m1-fill`, `m2`, `m2-fill`, `hybrid`,
//! `hybrid-fill` and the piece-retrieval baselines `m2-pieces`, `m1-pieces`
//! and `hybrid-pieces` as [`SubstrateFactory`] values a registry lists and
//! builds by name.

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Family, Result};

use crate::hybrid::HYBRID;
use crate::pieces::PIECES;
use crate::{
    DenseConfig, DenseMemory, HybridConfig, HybridMemory, PieceConfig, PieceMemory, PieceRanking,
    SparseConfig, SparseMemory,
};

const PAPER: &str = "Harness the Memory";

submem_core::settings_checked_by_validate!(DenseConfig, SparseConfig, HybridConfig);

impl SubstrateSettings for PieceConfig {
    fn validate(&self) -> Result<()> {
        PieceConfig::validate(self)
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
    SubstrateFactory::builder(name, crate::M1, Family::FLAT)
        .aliases(aliases)
        .paper(format!("{PAPER}, M1"))
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(DenseConfig::default().with_fill(fill))
        .build(|ctx, config: DenseConfig| {
            Ok(Arc::new(DenseMemory::new(ctx.services.clone(), config)?))
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
    SubstrateFactory::builder(name, crate::M2, Family::FLAT)
        .aliases(aliases)
        .paper(format!("{PAPER}, M2"))
        .summary(summary)
        .llm(LlmUse::Never)
        .settings(SparseConfig::default().with_fill(fill))
        .build(|ctx, config: SparseConfig| {
            Ok(Arc::new(SparseMemory::new(ctx.services.clone(), config)?))
        })
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
        .settings(HybridConfig::default().with_fill(fill))
        .build(|ctx, config: HybridConfig| {
            Ok(Arc::new(HybridMemory::new(ctx.services.clone(), config)?))
        })
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
        .settings(PieceConfig::new(ranking))
        .build(move |ctx, config: PieceConfig| {
            // The ranking is the name's, not a setting.
            let config = config.with_ranking(ranking);
            Ok(Arc::new(PieceMemory::new(ctx.services.clone(), config)?))
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
    use crate::ReadDepth;
    use submem_core::plugin::{BuildContext, Settings};
    use submem_kit::text::StopWords;

    fn parsed<S: SubstrateSettings>(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> S {
        f.typed::<S>(&f.settings_from_strs(pairs).unwrap()).unwrap()
    }

    fn unknown(f: &SubstrateFactory, key: &str) -> bool {
        f.settings_from_strs(&[(key, "3")])
            .is_err_and(|e| e.to_string().contains(&format!("unknown setting `{key}`")))
    }

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
            assert!(unknown(f, "k"), "{}", f.name());
        }
        assert!(m1.settings_from_strs(&[("candidates", "300")]).is_err());
        assert!(m2_fill.settings_from_strs(&[("candidates", "0")]).is_err());
        assert!(m2.settings_from_strs(&[("fill", "maybe")]).is_err());
        assert!(m1_fill.settings_from_strs(&[("candidates", "300")]).is_ok());
        assert!(m1.settings_from_strs(&[("ef_search", "32")]).is_ok());
        assert!(m2.settings_from_strs(&[("stopwords", "Lucene")]).is_ok());

        // Each name's defaults, and each key lands in its field.
        assert_eq!(parsed::<DenseConfig>(&m1, &[]), DenseConfig::default());
        assert_eq!(
            parsed::<DenseConfig>(&m1_fill, &[]).depth(),
            ReadDepth::fill()
        );
        assert_eq!(parsed::<SparseConfig>(&m2, &[]), SparseConfig::default());
        assert_eq!(
            parsed::<SparseConfig>(&m2_fill, &[]).depth(),
            ReadDepth::fill()
        );
        let c: DenseConfig = parsed(
            &m1,
            &[
                ("m", "32"),
                ("ef_search", "96"),
                ("ef_construction", "50"),
                ("exact_threshold", "10"),
                ("embed_batch", "8"),
            ],
        );
        assert_eq!(
            (
                c.max_connections,
                c.ef_search,
                c.ef_construction,
                c.exact_threshold,
                c.embed_batch
            ),
            (32, 96, 50, 10, 8)
        );
        let c: DenseConfig = parsed(&m1, &[("fill", "true"), ("candidates", "500")]);
        assert_eq!(
            c.depth(),
            ReadDepth::Fill {
                max_candidates: 500
            }
        );
        assert!(m1.settings_from_strs(&[("m", "1")]).is_err());
        let c: SparseConfig = parsed(&m2, &[("stopwords", "Lucene")]);
        assert_eq!(c.stop_words, StopWords::Lucene);
        let c: SparseConfig = parsed(&m2_fill, &[("candidates", "500")]);
        assert_eq!(
            c.depth(),
            ReadDepth::Fill {
                max_candidates: 500
            }
        );
        let c: SparseConfig = parsed(&m2_fill, &[("fill", "false")]);
        assert_eq!(c.depth(), ReadDepth::TopK);
        let e = m2
            .settings_from_strs(&[("candidates", "5")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("candidates applies to fill reads only"), "{e}");
        let e = m1_fill
            .settings_from_strs(&[("candidates", "0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a fill read needs at least one candidate"),
            "{e}"
        );

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
    fn hybrid_factories_parse_their_settings() {
        let (hybrid, hybrid_fill) = (hybrid_factory(false), hybrid_factory(true));
        hybrid.validate().unwrap();
        assert_eq!(
            parsed::<HybridConfig>(&hybrid, &[]),
            HybridConfig::default()
        );
        assert_eq!(
            parsed::<HybridConfig>(&hybrid_fill, &[]).depth(),
            ReadDepth::fill()
        );
        let c: HybridConfig = parsed(
            &hybrid,
            &[("pool", "200"), ("rrf_k", "30"), ("stopwords", "none")],
        );
        assert_eq!(
            (c.pool, c.rrf_k, c.stop_words),
            (200, 30.0, StopWords::None)
        );
        let c: HybridConfig = parsed(&hybrid_fill, &[("candidates", "500")]);
        assert_eq!(
            c.depth(),
            ReadDepth::Fill {
                max_candidates: 500
            }
        );
        assert!(hybrid.settings_from_strs(&[("candidates", "5")]).is_err());
        assert!(hybrid_fill
            .settings_from_strs(&[("candidates", "0")])
            .is_err());
        for key in ["k", "dense", "sparse"] {
            assert!(unknown(&hybrid, key), "{key}");
        }
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
            assert!(f.settings_from_strs(&[("rrf_k", "-1")]).is_err());
            for key in ["kappa", "ranking", "dense", "sparse"] {
                assert!(unknown(&f, key), "{key}");
            }
            let c: PieceConfig = parsed(
                &f,
                &[
                    ("piece_tokens", "32"),
                    ("candidates", "100"),
                    ("stopwords", "lucene"),
                    ("rrf_k", "10"),
                ],
            );
            assert_eq!(
                (c.piece_tokens, c.candidates, c.stop_words, c.rrf_k),
                (32, 100, StopWords::Lucene, 10.0)
            );
            let s = f.settings_from_strs(&[("piece_tokens", "32")]).unwrap();
            let built = f.build(&ctx, &s).unwrap();
            assert_eq!(built.info().name, ranking.substrate_name());
        }
        assert_eq!(
            parsed::<PieceConfig>(&piece_factory(PieceRanking::Hybrid), &[]),
            PieceConfig::default()
        );
        assert!(piece_factory(PieceRanking::Bm25).answers_to("bm25-pieces"));
    }
}
