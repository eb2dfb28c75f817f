//! FlexA-Mem's plugins: `flexa` (alias `flexamem`, from
//! [`FlexaConfig::default`]) and `flexa-paper` (from [`FlexaConfig::paper`])
//! as [`SubstrateFactory`] values a registry lists and builds by name.
//!
//! `rho` and `ranking` set both recovery modes; `piece_rho` and
//! `piece_ranking` then set piece recovery alone. Left unset, each mode keeps
//! its own default (unit recovery ρ 0.5 and hybrid ranking; piece recovery
//! ρ 0.05 and hybrid ranking, or 0.5 and BM25 for `flexa-paper`), which is
//! why all four are optional: a plain `rho` with a default could not tell
//! "keep piece recovery's own ρ" from "set both to 0.5". `kappa` is κ of an
//! agent step's pieces and `turn_kappa` κ of a conversation turn's (64 and
//! 128; both 64 for `flexa-paper`).

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{FlexaConfig, FlexaMem};

// Settings parse with `FlexaConfig::default`'s recovery defaults, which only
// fill what they leave unset (piece recovery's ρ and ranking), valid in both
// variants.
submem_core::settings_checked_by_validate!(FlexaConfig);

/// The factory `name` whose settings default to `base`; a build keeps
/// `base`'s recovery defaults, which are no setting.
fn factory(name: &str, aliases: &[&str], summary: &str, base: FlexaConfig) -> SubstrateFactory {
    let defaults = base.recovery_defaults;
    SubstrateFactory::builder(name, crate::FLEXA_MEM, Family::WRITE_ONCE_RENDER)
        .aliases(aliases)
        .paper("FlexA-Mem")
        .summary(summary)
        .llm(LlmUse::Optional)
        .settings(base)
        .build(move |ctx, config: FlexaConfig| {
            Ok(Arc::new(FlexaMem::new(
                ctx.services.clone(),
                config.with_recovery_defaults(defaults),
            )?))
        })
}

/// `flexa`: FlexA-Mem with this crate's defaults ([`FlexaConfig::default`]).
pub fn flexa_factory() -> SubstrateFactory {
    factory(
        "flexa",
        &["flexamem"],
        "write-once store rendered per call under the budget (timeline, records, pieces); rule records without an LLM",
        FlexaConfig::default(),
    )
}

/// `flexa-paper`: FlexA-Mem as the paper writes it ([`FlexaConfig::paper`]).
pub fn flexa_paper_factory() -> SubstrateFactory {
    factory(
        "flexa-paper",
        &[],
        "FlexA-Mem as the paper writes it (piece ρ 0.5, BM25 pieces, each piece on its own line)",
        FlexaConfig::paper(),
    )
}

/// Every factory of FlexA-Mem.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![flexa_factory(), flexa_paper_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ranking, RecoveryMode};
    use submem_core::plugin::{BuildContext, Settings};
    use submem_kit::text::StopWords;

    /// The config `pairs` give over `base`, as the factory builds it.
    fn parsed(f: &SubstrateFactory, base: &FlexaConfig, pairs: &[(&str, &str)]) -> FlexaConfig {
        typed(f, base, f.settings_from_strs(pairs).unwrap())
    }

    /// The config checked JSON settings give over `base`.
    fn typed(f: &SubstrateFactory, base: &FlexaConfig, given: Settings) -> FlexaConfig {
        f.check(&given).unwrap();
        f.typed::<FlexaConfig>(&given)
            .unwrap()
            .with_recovery_defaults(base.recovery_defaults)
    }

    #[test]
    fn flexa_settings_set_both_modes_then_the_piece_side() {
        let (flexa, paper) = (flexa_factory(), flexa_paper_factory());
        flexa.validate().unwrap();
        paper.validate().unwrap();
        assert!(flexa.answers_to("flexamem") && flexa.answers_to("FlexAMem"));
        assert!(paper.answers_to("flexa-paper") && !paper.answers_to("flexa"));
        let (d, p) = (FlexaConfig::default(), FlexaConfig::paper());
        assert_eq!(parsed(&flexa, &d, &[]), d);
        assert_eq!(parsed(&paper, &p, &[]), p);

        let c = parsed(
            &flexa,
            &d,
            &[
                ("ranking", "hybrid"),
                ("kappa", "32"),
                ("mode", "piece"),
                ("rho", "0.4"),
            ],
        );
        assert!(
            (c.piece_recovery_rho() - 0.4).abs() < 1e-6
                && c.piece_recovery_ranking() == Ranking::Hybrid
        );
        assert_eq!(
            (c.piece_tokens, c.unit_recovery_ranking(), c.mode),
            (32, Ranking::Hybrid, RecoveryMode::Piece)
        );
        assert!((c.unit_recovery_rho() - 0.4).abs() < 1e-6);

        let c = parsed(&paper, &p, &[("piece_rho", "0.3")]);
        assert!(
            (c.piece_recovery_rho() - 0.3).abs() < 1e-6
                && c.piece_recovery_ranking() == Ranking::Bm25
                && !c.join_pieces
        );
        assert!((c.unit_recovery_rho() - 0.5).abs() < 1e-6);
        // In `flexa-paper` too, `rho` sets both modes.
        let c = parsed(&paper, &p, &[("rho", "0.3"), ("ranking", "dense")]);
        assert!((c.unit_recovery_rho() - 0.3).abs() < 1e-6);
        assert!((c.piece_recovery_rho() - 0.3).abs() < 1e-6);
        assert_eq!(
            (c.unit_recovery_ranking(), c.piece_recovery_ranking()),
            (Ranking::Dense, Ranking::Dense)
        );
        let c = parsed(
            &flexa,
            &d,
            &[
                ("rho", "0.3"),
                ("piece_rho", "0.2"),
                ("piece_ranking", "BM25"),
            ],
        );
        assert!(
            (c.unit_recovery_rho() - 0.3).abs() < 1e-6
                && (c.piece_recovery_rho() - 0.2).abs() < 1e-6
        );
        assert_eq!(
            (c.unit_recovery_ranking(), c.piece_recovery_ranking()),
            (Ranking::Hybrid, Ranking::Bm25)
        );
        let c = parsed(
            &flexa,
            &d,
            &[("ranking", "bm25"), ("piece_ranking", "dense")],
        );
        assert_eq!(
            (c.unit_recovery_ranking(), c.piece_recovery_ranking()),
            (Ranking::Bm25, Ranking::Dense)
        );
        // `k` is read through serde's alias, from a string or from JSON.
        assert_eq!(parsed(&flexa, &d, &[("k", "3")]).seeds, 3);
        let k = |n: u64| Settings::from_iter([("k".to_string(), serde_json::Value::from(n))]);
        assert_eq!(typed(&flexa, &d, k(3)).seeds, 3);
        assert!(flexa.check(&k(0)).is_err());
        assert_eq!(parsed(&flexa, &d, &[("seeds", "2")]).seeds, 2);
        let c = parsed(
            &flexa,
            &d,
            &[
                ("e", "100"),
                ("lambda", "0.5"),
                ("unit_tokens", "900"),
                ("agent_unit_tokens", "700"),
                ("links", "2"),
                ("merge_group", "3"),
                ("record_words", "50"),
                ("join", "false"),
            ],
        );
        assert_eq!(
            (
                c.excerpt_tokens,
                c.conversation_unit_tokens,
                c.agent_unit_tokens,
                c.links,
                c.merge_group,
                c.record_words,
                c.join_pieces
            ),
            (100, 900, 700, 2, 3, 50, false)
        );
        assert!((c.lambda - 0.5).abs() < 1e-6);
        let c = parsed(
            &flexa,
            &d,
            &[
                ("stopwords", "english"),
                ("turn_kappa", "96"),
                ("merged_record_words", "100"),
                ("merged_record_cut_words", "110"),
                ("prompt_raw_tokens", "900"),
                ("record_max_tokens", "128"),
                ("sticky_agent_merges", "false"),
            ],
        );
        assert_eq!(
            (
                c.stop_words,
                c.turn_piece_tokens,
                c.merged_record_words,
                c.merged_record_cut_words,
                c.prompt_raw_tokens,
                c.record_max_tokens,
                c.sticky_agent_merges
            ),
            (StopWords::English, 96, 100, 110, 900, 128, false)
        );
    }

    #[test]
    fn bad_flexa_settings_are_refused_and_both_build() {
        let flexa = flexa_factory();
        let e = flexa
            .settings_from_strs(&[("ranking", "fuzzy")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bm25") && e.contains("dense") && e.contains("hybrid"),
            "{e}"
        );
        let e = flexa
            .settings_from_strs(&[("lambda", "1.5")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("lambda"), "{e}");
        assert!(flexa.settings_from_strs(&[("rho", "0")]).is_err());
        assert!(flexa.settings_from_strs(&[("piece_rho", "1.5")]).is_err());
        assert!(flexa.settings_from_strs(&[("merge_group", "1")]).is_err());
        assert!(flexa.settings_from_strs(&[("mode", "both")]).is_err());
        assert!(flexa.settings_from_strs(&[("kappa", "0")]).is_err());
        for key in ["colour", "piece_tokens", "recovery_defaults"] {
            let e = flexa
                .settings_from_strs(&[(key, "1")])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("unknown setting `{key}`")), "{e}");
        }
        assert!(flexa
            .settings_from_strs(&[("merged_record_cut_words", "10")])
            .is_err());
        let d = flexa.describe();
        let by_key = |k: &str| d.settings.iter().find(|s| s.key == k).unwrap().clone();
        assert_eq!(by_key("ranking").kind, "bm25|dense|hybrid?");
        assert_eq!(by_key("mode").kind, "auto|unit|piece");
        assert_eq!(by_key("rho").kind, "number?");
        assert_eq!(by_key("seeds").default, serde_json::json!(5));
        assert!(d.settings.iter().all(|s| !s.doc.is_empty()), "{d:?}");
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        for f in factories() {
            let s = f.build(&ctx, &Settings::new()).unwrap();
            assert_eq!(s.info().method, crate::FLEXA_MEM);
            assert!(!s.info().needs_llm);
        }
        let s = flexa
            .build(
                &ctx,
                &flexa
                    .settings_from_strs(&[("seeds", "2"), ("ranking", "dense")])
                    .unwrap(),
            )
            .unwrap();
        assert!(!s.info().name.is_empty());
    }
}
