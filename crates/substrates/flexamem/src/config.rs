//! Settings of FlexA-Mem ([`FlexaConfig`]) with the paper's symbols. The paper
//! does not publish its exact values; the defaults are those of
//! `docs/METHODS.md` and are meant to be swept with `submem bench`.

use serde::{Deserialize, Serialize};
use submem_kit::text::StopWords;

use crate::FlexaError;

/// How the room left after the timeline is filled.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryMode {
    /// Unit recovery for agentic queries, piece recovery for conversational ones
    /// (the paper's setting per task type, Section 3.5).
    #[default]
    Auto,
    /// Unit recovery (Section 3.3, Algorithm 1).
    Unit,
    /// Piece recovery (Section 3.4).
    Piece,
}

/// How pieces are ranked against the query (piece recovery and excerpts).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// Okapi BM25 (k1 = 1.2, b = 0.75) over content words, IDF over the whole
    /// store of the namespace; ties go to cosine, then to the earlier piece
    /// (the paper's rule).
    Bm25,
    /// Cosine between the piece's and the query's embeddings.
    Dense,
    /// Reciprocal rank fusion (k = 60) of the BM25 and dense rankings. The
    /// default of both recovery modes; see [`FlexaConfig::piece_ranking`]
    /// for piece recovery's measurements.
    #[default]
    Hybrid,
}

/// κ of agent steps and of conversation turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceSizes {
    /// κ of an agent step.
    pub step: usize,
    /// κ of a conversation turn.
    pub turn: usize,
}

impl PieceSizes {
    /// κ of `event`.
    pub fn of(&self, event: &submem_core::Event) -> usize {
        match event {
            submem_core::Event::Turn(_) => self.turn,
            submem_core::Event::Step(_) => self.step,
        }
    }
}

/// Each recovery mode's own ρ and piece ranking: what a [`FlexaConfig`] uses
/// where its `rho`, `piece_rho`, `ranking` and `piece_ranking` are unset.
/// They differ between [`FlexaConfig::default`] and [`FlexaConfig::paper`]
/// (piece recovery's ρ and ranking), so they belong to the variant, not to
/// the settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecoveryDefaults {
    /// ρ of unit recovery (agents). 0.5.
    pub unit_rho: f32,
    /// Piece ranking of unit recovery's excerpts. Hybrid.
    pub unit_ranking: Ranking,
    /// ρ of piece recovery (questions over a history). 0.05, not the
    /// paper's 0.5: on LoCoMo conv-26 (rule writer) the timeline's records
    /// crowded out the verbatim pieces that hold the evidence. See the crate
    /// docs for the sweeps.
    pub piece_rho: f32,
    /// How pieces are ranked in piece recovery. Hybrid (dense until turns
    /// became one piece each: see the crate docs); the paper ranks by BM25.
    pub piece_ranking: Ranking,
}

impl Default for RecoveryDefaults {
    fn default() -> Self {
        RecoveryDefaults {
            unit_rho: 0.5,
            unit_ranking: Ranking::Hybrid,
            piece_rho: 0.05,
            piece_ranking: Ranking::Hybrid,
        }
    }
}

/// FlexA-Mem settings, and those of the `flexa` and `flexa-paper` plugins:
/// every field but [`FlexaConfig::recovery_defaults`] is a setting
/// (`flexa:kappa=32`), listed by `submem substrates` with the first sentence
/// of its doc. Build with [`FlexaConfig::default`] (or
/// [`FlexaConfig::paper`]) and the `with_*` setters.
///
/// `rho` and `ranking` set both recovery modes; `piece_rho` and
/// `piece_ranking` then set piece recovery alone. Left unset, each mode keeps
/// its own default ([`FlexaConfig::recovery_defaults`]), which is why all
/// four are optional: a plain `rho` with a default could not tell "keep
/// piece recovery's own ρ" from "set both to 0.5". The values in use are
/// [`FlexaConfig::unit_recovery_rho`] and its siblings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FlexaConfig {
    /// κ: most tokens of one piece of an agent step. Its label is not
    /// counted. Its setting is `kappa`.
    #[serde(rename = "kappa")]
    pub piece_tokens: usize,
    /// κ of a conversation turn (piece recovery ranks these pieces). Default
    /// 128, not 64: a turn is then one piece unless it is long, so piece
    /// recovery ranks whole turns where they are short (LoCoMo) and still
    /// cuts long ones (LongMemEval's assistant turns). Agent steps keep
    /// [`FlexaConfig::piece_tokens`]: unit recovery's excerpts are cut from
    /// them. See the crate docs. Its setting is `turn_kappa`.
    #[serde(rename = "turn_kappa")]
    pub turn_piece_tokens: usize,
    /// E: most tokens of the pieces of one excerpt. Its setting is `e`.
    #[serde(rename = "e")]
    pub excerpt_tokens: usize,
    /// k: seed units in unit recovery (also written `k`).
    #[serde(alias = "k")]
    pub seeds: usize,
    /// λ: discount of units reached from a seed through a link or time, in (0, 1).
    pub lambda: f32,
    /// ρ: the timeline's share of the allowance, in both recovery modes (unset: each mode's default).
    /// Each mode's own default is in [`FlexaConfig::recovery_defaults`]; the
    /// value in use is [`FlexaConfig::unit_recovery_rho`].
    pub rho: Option<f32>,
    /// ρ of piece recovery alone (unset: same as rho; both unset: piece recovery's default).
    /// The value in use is [`FlexaConfig::piece_recovery_rho`].
    pub piece_rho: Option<f32>,
    /// Piece ranking of piece recovery alone (unset: same as ranking; both unset: piece recovery's default).
    /// The value in use is [`FlexaConfig::piece_recovery_ranking`].
    pub piece_ranking: Option<Ranking>,
    /// Recovery mode.
    pub mode: RecoveryMode,
    /// Piece ranking in both recovery modes (unset: each mode's default).
    /// The value in use is [`FlexaConfig::unit_recovery_ranking`].
    pub ranking: Option<Ranking>,
    /// Tokens at which an agent unit is sealed. Steps are packed until the
    /// next one would overflow it.
    pub agent_unit_tokens: usize,
    /// Target tokens of a conversation span. Spans are cut at turns of the
    /// session's opening speaker. Its setting is `unit_tokens`.
    #[serde(rename = "unit_tokens")]
    pub conversation_unit_tokens: usize,
    /// Links written per note (both directions).
    pub links: usize,
    /// Most records merged into one merged record.
    pub merge_group: usize,
    /// Words asked of a merged record.
    pub merged_record_words: usize,
    /// Words at which a merged record is cut.
    pub merged_record_cut_words: usize,
    /// Most words of a record.
    pub record_words: usize,
    /// Most tokens of raw text put into a record-writing prompt. Small local
    /// models have short contexts.
    pub prompt_raw_tokens: usize,
    /// Most new tokens the record writer may generate.
    pub record_max_tokens: usize,
    /// Agentic queries: merged records, once used, persist for the episode.
    /// See Appendix A.
    pub sticky_agent_merges: bool,
    /// Show consecutive chosen pieces of one event as the raw text they span.
    /// The default; otherwise each piece is on its own line with its label
    /// (the paper's literal rendering). Joined, a turn longer than κ whose
    /// pieces are all chosen reads exactly as it was written; on LoCoMo
    /// conv-26 this alone is part of the whole-turn coverage gain measured in
    /// the crate docs. Its setting is `join`.
    #[serde(rename = "join")]
    pub join_pieces: bool,
    /// Stop words of the BM25 piece index: `english`, `lucene` or `none`.
    /// Default [`StopWords::Lucene`], as before: the broad list that brought
    /// M2 to parity with `rank_bm25` (`english`) changes BM25 and hybrid
    /// piece ranking, including unit recovery's hybrid excerpts for agents,
    /// and that was not measured. Its setting is `stopwords`.
    #[serde(rename = "stopwords")]
    pub stop_words: StopWords,
    /// Each recovery mode's ρ and piece ranking where the four settings above
    /// leave them unset. Not a setting: it comes with the variant
    /// ([`FlexaConfig::default`] or [`FlexaConfig::paper`]), and the plugins
    /// take it from theirs.
    #[serde(skip)]
    pub recovery_defaults: RecoveryDefaults,
}

impl Default for FlexaConfig {
    fn default() -> Self {
        FlexaConfig {
            piece_tokens: 64,
            turn_piece_tokens: 128,
            excerpt_tokens: 160,
            seeds: 5,
            lambda: 0.8,
            rho: None,
            piece_rho: None,
            piece_ranking: None,
            mode: RecoveryMode::Auto,
            ranking: None,
            agent_unit_tokens: 1000,
            conversation_unit_tokens: 2000,
            links: 3,
            merge_group: 4,
            merged_record_words: 120,
            merged_record_cut_words: 150,
            record_words: 80,
            prompt_raw_tokens: 1500,
            record_max_tokens: 256,
            sticky_agent_merges: true,
            join_pieces: true,
            stop_words: StopWords::Lucene,
            recovery_defaults: RecoveryDefaults::default(),
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta] $name:ident : $field:ident : $ty:ty),* $(,)?) => {
        $(
            #[$doc]
            pub fn $name(mut self, v: $ty) -> Self {
                self.$field = v;
                self
            }
        )*
    };
}

impl FlexaConfig {
    /// The paper's method as written in `docs/METHODS.md`: the timeline's
    /// share ρ = 0.5 and BM25 piece ranking in piece recovery too, one κ for
    /// turns and steps, and each piece on its own line with its label. Kept as a named option
    /// (`flexa-paper` in `submem bench`); [`FlexaConfig::default`] is the
    /// variant that showed the most whole evidence turns.
    pub fn paper() -> Self {
        FlexaConfig {
            recovery_defaults: RecoveryDefaults {
                piece_rho: 0.5,
                piece_ranking: Ranking::Bm25,
                ..RecoveryDefaults::default()
            },
            turn_piece_tokens: 64,
            join_pieces: false,
            ..FlexaConfig::default()
        }
    }

    setter! {
        /// Sets κ of agent steps.
        with_piece_tokens: piece_tokens: usize,
        /// Sets κ of conversation turns.
        with_turn_piece_tokens: turn_piece_tokens: usize,
        /// Sets E.
        with_excerpt_tokens: excerpt_tokens: usize,
        /// Sets k.
        with_seeds: seeds: usize,
        /// Sets λ.
        with_lambda: lambda: f32,
        /// Sets the recovery mode.
        with_mode: mode: RecoveryMode,
        /// Sets the agent unit size.
        with_agent_unit_tokens: agent_unit_tokens: usize,
        /// Sets the conversation span size.
        with_conversation_unit_tokens: conversation_unit_tokens: usize,
        /// Sets the number of links per note.
        with_links: links: usize,
        /// Sets the merge group size.
        with_merge_group: merge_group: usize,
        /// Sets the record word limit.
        with_record_words: record_words: usize,
        /// Sets whether agentic merges persist.
        with_sticky_agent_merges: sticky_agent_merges: bool,
        /// Sets whether consecutive pieces of one event are joined.
        with_join_pieces: join_pieces: bool,
        /// Sets the stop words of the BM25 piece index.
        with_stop_words: stop_words: StopWords,
        /// Sets each mode's ρ and ranking where the settings leave them unset.
        with_recovery_defaults: recovery_defaults: RecoveryDefaults,
    }

    /// Sets ρ of unit recovery; piece recovery keeps the ρ it has now.
    pub fn with_rho(mut self, rho: f32) -> Self {
        self.piece_rho = Some(self.piece_recovery_rho());
        self.rho = Some(rho);
        self
    }

    /// Sets ρ of piece recovery.
    pub fn with_piece_rho(mut self, rho: f32) -> Self {
        self.piece_rho = Some(rho);
        self
    }

    /// Sets the piece ranking of unit recovery; piece recovery keeps the
    /// ranking it has now.
    pub fn with_ranking(mut self, ranking: Ranking) -> Self {
        self.piece_ranking = Some(self.piece_recovery_ranking());
        self.ranking = Some(ranking);
        self
    }

    /// Sets the piece-recovery ranking.
    pub fn with_piece_ranking(mut self, ranking: Ranking) -> Self {
        self.piece_ranking = Some(ranking);
        self
    }

    /// ρ of unit recovery: `rho`, else the variant's default.
    pub fn unit_recovery_rho(&self) -> f32 {
        self.rho.unwrap_or(self.recovery_defaults.unit_rho)
    }

    /// ρ of piece recovery: `piece_rho`, else `rho`, else the variant's
    /// default.
    pub fn piece_recovery_rho(&self) -> f32 {
        self.piece_rho
            .or(self.rho)
            .unwrap_or(self.recovery_defaults.piece_rho)
    }

    /// Piece ranking of unit recovery's excerpts: `ranking`, else the
    /// variant's default.
    pub fn unit_recovery_ranking(&self) -> Ranking {
        self.ranking.unwrap_or(self.recovery_defaults.unit_ranking)
    }

    /// Piece ranking of piece recovery: `piece_ranking`, else `ranking`,
    /// else the variant's default.
    pub fn piece_recovery_ranking(&self) -> Ranking {
        self.piece_ranking
            .or(self.ranking)
            .unwrap_or(self.recovery_defaults.piece_ranking)
    }

    /// κ of each kind of event.
    pub fn piece_sizes(&self) -> PieceSizes {
        PieceSizes {
            step: self.piece_tokens,
            turn: self.turn_piece_tokens,
        }
    }

    /// Whether a ranking in use needs piece vectors (dense or hybrid), so
    /// writes embed every piece.
    pub fn ranks_by_vectors(&self) -> bool {
        self.unit_recovery_ranking() != Ranking::Bm25
            || self.piece_recovery_ranking() != Ranking::Bm25
    }

    /// Rejects settings the algorithm cannot run with.
    pub fn validate(&self) -> Result<(), FlexaError> {
        let bad = |what: &str| Err(FlexaError::Config(what.to_string()));
        if self.piece_tokens == 0 || self.turn_piece_tokens == 0 {
            return bad("piece_tokens and turn_piece_tokens (κ) must be at least 1");
        }
        if self.seeds == 0 {
            return bad("seeds (k) must be at least 1");
        }
        if !(self.lambda.is_finite() && self.lambda > 0.0 && self.lambda < 1.0) {
            return bad("lambda (λ) must be in (0, 1)");
        }
        let (rho, piece_rho) = (self.unit_recovery_rho(), self.piece_recovery_rho());
        if !(rho.is_finite() && rho > 0.0 && rho <= 1.0) {
            return bad("rho (ρ) must be in (0, 1]");
        }
        if !(piece_rho.is_finite() && piece_rho > 0.0 && piece_rho <= 1.0) {
            return bad("piece_rho (ρ of piece recovery) must be in (0, 1]");
        }
        if self.agent_unit_tokens == 0 || self.conversation_unit_tokens == 0 {
            return bad("unit sizes must be at least 1 token");
        }
        if self.merge_group < 2 {
            return bad("merge_group must be at least 2");
        }
        if self.record_words == 0 || self.merged_record_words == 0 {
            return bad("record word limits must be at least 1");
        }
        if self.merged_record_cut_words < self.merged_record_words {
            return bad("merged_record_cut_words must be >= merged_record_words");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec() {
        let c = FlexaConfig::default();
        assert_eq!((c.piece_tokens, c.excerpt_tokens, c.seeds), (64, 160, 5));
        assert_eq!((c.lambda, c.unit_recovery_rho()), (0.8, 0.5));
        assert_eq!(
            (c.agent_unit_tokens, c.conversation_unit_tokens),
            (1000, 2000)
        );
        assert_eq!((c.links, c.merge_group, c.record_words), (3, 4, 80));
        assert!(c.validate().is_ok());
        assert!(c.clone().with_lambda(1.0).validate().is_err());
        assert!(c.clone().with_rho(0.0).validate().is_err());
        assert!(c.clone().with_piece_rho(0.0).validate().is_err());
        let paper = FlexaConfig::paper();
        assert_eq!(
            (
                paper.piece_recovery_rho(),
                paper.piece_recovery_ranking(),
                paper.join_pieces
            ),
            (0.5, Ranking::Bm25, false)
        );
        assert_eq!(
            (
                c.turn_piece_tokens,
                c.piece_recovery_rho(),
                c.piece_recovery_ranking()
            ),
            (128, 0.05, Ranking::Hybrid)
        );
        assert!(c.clone().with_turn_piece_tokens(0).validate().is_err());
        assert!(c.with_piece_tokens(0).validate().is_err());
    }

    #[test]
    fn config_round_trips_and_fills_defaults() {
        let c: FlexaConfig = serde_json::from_str(r#"{"seeds": 3, "mode": "piece"}"#).unwrap();
        assert_eq!(c.seeds, 3);
        assert_eq!(c.mode, RecoveryMode::Piece);
        assert_eq!(c.piece_tokens, 64);
    }
}
