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
use submem_kit::text::StopWords;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{FlexaConfig, FlexaMem, Ranking, RecoveryMode};

/// How the room left after the timeline is filled ([`RecoveryMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeSetting {
    /// Unit recovery for agentic queries, piece recovery for conversational ones.
    Auto,
    /// Unit recovery.
    Unit,
    /// Piece recovery.
    Piece,
}

impl From<ModeSetting> for RecoveryMode {
    fn from(m: ModeSetting) -> Self {
        match m {
            ModeSetting::Auto => RecoveryMode::Auto,
            ModeSetting::Unit => RecoveryMode::Unit,
            ModeSetting::Piece => RecoveryMode::Piece,
        }
    }
}

impl From<RecoveryMode> for ModeSetting {
    fn from(m: RecoveryMode) -> Self {
        match m {
            RecoveryMode::Auto => ModeSetting::Auto,
            RecoveryMode::Unit => ModeSetting::Unit,
            RecoveryMode::Piece => ModeSetting::Piece,
        }
    }
}

/// How pieces are ranked against the query ([`Ranking`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RankingSetting {
    /// Okapi BM25 over content words.
    Bm25,
    /// Cosine of the embeddings.
    Dense,
    /// Reciprocal rank fusion of BM25 and dense.
    Hybrid,
}

impl From<RankingSetting> for Ranking {
    fn from(r: RankingSetting) -> Self {
        match r {
            RankingSetting::Bm25 => Ranking::Bm25,
            RankingSetting::Dense => Ranking::Dense,
            RankingSetting::Hybrid => Ranking::Hybrid,
        }
    }
}

/// Settings of `flexa` and `flexa-paper` (see [`FlexaConfig`] for each
/// default and the measurements behind it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlexaSettings {
    /// κ: most tokens of one piece of an agent step.
    pub kappa: usize,
    /// κ of a conversation turn (piece recovery ranks these pieces).
    pub turn_kappa: usize,
    /// E: most tokens of the pieces of one excerpt.
    pub e: usize,
    /// k: seed units in unit recovery (also written `k`).
    #[serde(alias = "k")]
    pub seeds: usize,
    /// λ: discount of units reached from a seed through a link or time, in (0, 1).
    pub lambda: f32,
    /// ρ: the timeline's share of the allowance, in both recovery modes (unset: each mode's default).
    pub rho: Option<f32>,
    /// ρ of piece recovery alone (unset: same as rho; both unset: piece recovery's default).
    pub piece_rho: Option<f32>,
    /// Recovery mode.
    pub mode: ModeSetting,
    /// Piece ranking in both recovery modes (unset: each mode's default).
    pub ranking: Option<RankingSetting>,
    /// Piece ranking of piece recovery alone (unset: same as ranking; both unset: piece recovery's default).
    pub piece_ranking: Option<RankingSetting>,
    /// Target tokens of a conversation span.
    pub unit_tokens: usize,
    /// Tokens at which an agent unit is sealed.
    pub agent_unit_tokens: usize,
    /// Links written per note (both directions).
    pub links: usize,
    /// Most records merged into one merged record.
    pub merge_group: usize,
    /// Most words of a record.
    pub record_words: usize,
    /// Show consecutive chosen pieces of one event as the raw text they span.
    pub join: bool,
    /// Stop words of the BM25 piece index: `english`, `lucene` or `none`.
    pub stopwords: StopWords,
}

impl FlexaSettings {
    /// The settings that leave `base` as it is.
    pub fn new(base: &FlexaConfig) -> Self {
        FlexaSettings {
            kappa: base.piece_tokens,
            turn_kappa: base.turn_piece_tokens,
            e: base.excerpt_tokens,
            seeds: base.seeds,
            lambda: base.lambda,
            rho: None,
            piece_rho: None,
            mode: base.mode.into(),
            ranking: None,
            piece_ranking: None,
            unit_tokens: base.conversation_unit_tokens,
            agent_unit_tokens: base.agent_unit_tokens,
            links: base.links,
            merge_group: base.merge_group,
            record_words: base.record_words,
            join: base.join_pieces,
            stopwords: base.stop_words,
        }
    }

    /// The substrate's config: these settings over `base` (not yet
    /// validated).
    pub fn config(&self, base: &FlexaConfig) -> FlexaConfig {
        let mut c = base
            .clone()
            .with_piece_tokens(self.kappa)
            .with_turn_piece_tokens(self.turn_kappa)
            .with_excerpt_tokens(self.e)
            .with_seeds(self.seeds)
            .with_lambda(self.lambda)
            .with_conversation_unit_tokens(self.unit_tokens)
            .with_agent_unit_tokens(self.agent_unit_tokens)
            .with_links(self.links)
            .with_merge_group(self.merge_group)
            .with_record_words(self.record_words)
            .with_join_pieces(self.join)
            .with_stop_words(self.stopwords)
            .with_mode(self.mode.into());
        if let Some(rho) = self.rho {
            c = c.with_rho(rho).with_piece_rho(rho);
        }
        if let Some(r) = self.ranking {
            c = c.with_ranking(r.into()).with_piece_ranking(r.into());
        }
        if let Some(rho) = self.piece_rho {
            c = c.with_piece_rho(rho);
        }
        if let Some(r) = self.piece_ranking {
            c = c.with_piece_ranking(r.into());
        }
        c
    }
}

impl SubstrateSettings for FlexaSettings {
    fn validate(&self) -> Result<()> {
        // The base only fills what these settings leave unset (piece
        // recovery's ρ and ranking), valid in both bases.
        self.config(&FlexaConfig::default())
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

fn factory(name: &str, aliases: &[&str], summary: &str, base: FlexaConfig) -> SubstrateFactory {
    SubstrateFactory::builder(name, MethodId::FLEXA_MEM, Family::WRITE_ONCE_RENDER)
        .aliases(aliases)
        .paper("FlexA-Mem")
        .summary(summary)
        .llm(LlmUse::Optional)
        .settings(FlexaSettings::new(&base))
        .build(move |ctx, s: FlexaSettings| {
            Ok(Arc::new(FlexaMem::new(
                ctx.services.clone(),
                s.config(&base),
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
    use submem_core::plugin::{BuildContext, Settings};

    /// The config `pairs` give over `base`, as the factory builds it.
    fn parsed(f: &SubstrateFactory, base: &FlexaConfig, pairs: &[(&str, &str)]) -> FlexaConfig {
        typed(f, base, f.settings_from_strs(pairs).unwrap())
    }

    /// The config checked JSON settings give over `base`.
    fn typed(f: &SubstrateFactory, base: &FlexaConfig, given: Settings) -> FlexaConfig {
        f.check(&given).unwrap();
        f.typed::<FlexaSettings>(&given).unwrap().config(base)
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
        assert!((c.piece_rho - 0.4).abs() < 1e-6 && c.piece_ranking == Ranking::Hybrid);
        assert_eq!(
            (c.piece_tokens, c.ranking, c.mode),
            (32, Ranking::Hybrid, RecoveryMode::Piece)
        );
        assert!((c.rho - 0.4).abs() < 1e-6);

        let c = parsed(&paper, &p, &[("piece_rho", "0.3")]);
        assert!(
            (c.piece_rho - 0.3).abs() < 1e-6 && c.piece_ranking == Ranking::Bm25 && !c.join_pieces
        );
        assert!((c.rho - 0.5).abs() < 1e-6);
        let c = parsed(
            &flexa,
            &d,
            &[
                ("rho", "0.3"),
                ("piece_rho", "0.2"),
                ("piece_ranking", "BM25"),
            ],
        );
        assert!((c.rho - 0.3).abs() < 1e-6 && (c.piece_rho - 0.2).abs() < 1e-6);
        assert_eq!(
            (c.ranking, c.piece_ranking),
            (Ranking::Hybrid, Ranking::Bm25)
        );
        let c = parsed(
            &flexa,
            &d,
            &[("ranking", "bm25"), ("piece_ranking", "dense")],
        );
        assert_eq!(
            (c.ranking, c.piece_ranking),
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
        assert!(flexa.settings_from_strs(&[("colour", "red")]).is_err());
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
            assert_eq!(s.info().method, MethodId::FLEXA_MEM);
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
