//! Settings of FlexA-Mem ([`FlexaConfig`]) with the paper's symbols. The paper
//! does not publish its exact values; the defaults are those of
//! `docs/METHODS.md` and are meant to be swept with `submem bench`.

use serde::{Deserialize, Serialize};
use submem_kit::text::StopWords;

use crate::FlexaError;

/// How the room left after the timeline is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
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

/// FlexA-Mem settings. Build with [`FlexaConfig::default`] and the `with_*`
/// setters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlexaConfig {
    /// κ: most tokens of one piece of an agent step (its label not counted).
    pub piece_tokens: usize,
    /// κ of a conversation turn. Default 128, not 64: a turn is then one
    /// piece unless it is long, so piece recovery ranks whole turns where
    /// they are short (LoCoMo) and still cuts long ones (LongMemEval's
    /// assistant turns). Agent steps keep [`FlexaConfig::piece_tokens`]:
    /// unit recovery's excerpts are cut from them. See the crate docs.
    pub turn_piece_tokens: usize,
    /// E: most tokens of the pieces of one excerpt.
    pub excerpt_tokens: usize,
    /// k: number of seed units in unit recovery.
    pub seeds: usize,
    /// λ: discount of units reached from a seed through a link or time (< 1).
    pub lambda: f32,
    /// ρ: share of the allowance given to the timeline in unit recovery
    /// (agents). Default 0.5.
    pub rho: f32,
    /// ρ of piece recovery (questions over a history). Default 0.05, not the
    /// paper's 0.5: on LoCoMo conv-26 (rule writer) the timeline's records
    /// crowded out the verbatim pieces that hold the evidence. See the crate
    /// docs for the sweeps.
    pub piece_rho: f32,
    /// How pieces are ranked in piece recovery. Default hybrid (dense until
    /// turns became one piece each: see the crate docs); the paper ranks by
    /// BM25.
    pub piece_ranking: Ranking,
    /// Recovery mode.
    pub mode: RecoveryMode,
    /// Piece ranking.
    pub ranking: Ranking,
    /// Tokens at which an agent unit is sealed (steps are packed until the
    /// next one would overflow it).
    pub agent_unit_tokens: usize,
    /// Target tokens of a conversation span (cut at turns of the session's
    /// opening speaker).
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
    /// Most tokens of raw text put into a record-writing prompt (small local
    /// models have short contexts).
    pub prompt_raw_tokens: usize,
    /// Most new tokens the record writer may generate.
    pub record_max_tokens: usize,
    /// Agentic queries: merged records, once used, persist for the episode
    /// (Appendix A).
    pub sticky_agent_merges: bool,
    /// Show consecutive chosen pieces of one event as the raw text they span
    /// (default), rather than each piece on its own line with its label (the
    /// paper's literal rendering). Joined, a turn longer than κ whose pieces
    /// are all chosen reads exactly as it was written; on LoCoMo conv-26 this
    /// alone is part of the whole-turn coverage gain measured in the crate
    /// docs.
    pub join_pieces: bool,
    /// Stop words of the BM25 piece index. Default [`StopWords::Lucene`], as
    /// before: the broad list that brought M2 to parity with `rank_bm25`
    /// (`english`) changes BM25 and hybrid piece ranking, including unit
    /// recovery's hybrid excerpts for agents, and that was not measured.
    pub stop_words: StopWords,
}

impl Default for FlexaConfig {
    fn default() -> Self {
        FlexaConfig {
            piece_tokens: 64,
            turn_piece_tokens: 128,
            excerpt_tokens: 160,
            seeds: 5,
            lambda: 0.8,
            rho: 0.5,
            piece_rho: 0.05,
            piece_ranking: Ranking::Hybrid,
            mode: RecoveryMode::Auto,
            ranking: Ranking::Hybrid,
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
            piece_rho: 0.5,
            piece_ranking: Ranking::Bm25,
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
        /// Sets ρ of unit recovery.
        with_rho: rho: f32,
        /// Sets ρ of piece recovery.
        with_piece_rho: piece_rho: f32,
        /// Sets the piece-recovery ranking.
        with_piece_ranking: piece_ranking: Ranking,
        /// Sets the recovery mode.
        with_mode: mode: RecoveryMode,
        /// Sets the piece ranking.
        with_ranking: ranking: Ranking,
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
        self.ranking != Ranking::Bm25 || self.piece_ranking != Ranking::Bm25
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
        if !(self.rho.is_finite() && self.rho > 0.0 && self.rho <= 1.0) {
            return bad("rho (ρ) must be in (0, 1]");
        }
        if !(self.piece_rho.is_finite() && self.piece_rho > 0.0 && self.piece_rho <= 1.0) {
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
        assert_eq!((c.lambda, c.rho), (0.8, 0.5));
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
            (paper.piece_rho, paper.piece_ranking, paper.join_pieces),
            (0.5, Ranking::Bm25, false)
        );
        assert_eq!(
            (c.turn_piece_tokens, c.piece_rho, c.piece_ranking),
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
