//! # submem-flexamem: FlexA-Mem
//!
//! A write-once store rendered anew at every call under a token budget,
//! following the *FlexA-Mem* paper (its Section 3, Algorithm 1 and Appendix
//! A; our specification is `docs/METHODS.md`).
//!
//! - **Units.** Agent steps are packed into units of up to 1,000 tokens;
//!   conversations are cut per session at turns of the session's opening
//!   speaker (the "user") into spans of about 2,000 tokens (one unit per
//!   session when it fits; hard cap twice that). Writes arrive per event or per
//!   batch: the newest unit stays *open* until the next event would overflow
//!   it, a new session starts, or [`Substrate::manage`] closes it.
//! - **Immutable store.** Each event's raw text is kept exactly and never
//!   rewritten. [`FlexaMem::open`] keeps an append-only log (length + CRC-32
//!   framing, synced per batch) so a process killed mid-write loses at most
//!   the record being written; reopening cuts a torn tail and continues.
//! - **Notes.** One LLM call per unit writes the record (≤ 80 words) and
//!   retrieval fields as JSON, repaired leniently
//!   ([`submem_kit::json_repair`]); when the model fails or the JSON is
//!   hopeless, or when no LLM is configured, the fixed-rule writer
//!   ([`submem_kit::record::rule_record`]) writes them. `e = φ(s‖f)`;
//!   links both ways to the 3 most similar earlier notes; pieces of ≤ κ
//!   tokens cut at line breaks inside one turn or step block, labelled.
//! - **Timeline.** Records in time order, merged oldest first in groups of up
//!   to 4 while `‖T‖ > max(ρA, A − D)` ([`timeline::merge_needed`]); merged
//!   records are cached by the units they cover, reused and persisted.
//! - **Recovery.** Unit recovery (agents): seeds by cosine, `g(j)` over
//!   links and time neighbours, fit-or-degrade over record ≺ excerpt ≺ raw
//!   ([`submem_kit::fit`], which other substrates use too). Piece recovery
//!   (readers): every piece ranked by BM25 and dense similarity fused (or
//!   either alone: `piece_ranking`), shown after
//!   the timeline grouped by unit with `[…]` marks.
//! - **Budget.** `B̄ = 0.95·B`, `A = B̄ − |P| − |W|`; the recent window `W`
//!   (agents) is rendered raw *inside* the recall, after memory, so
//!   `Recall::tokens ≤ Query::allowance()` always holds. Before the history
//!   would overflow the allowance it is shown whole and unchanged.
//!
//! ## Choices and deviations (documented here, as the paper leaves them open)
//! - **Open units at read time** are shown like sealed ones but with a
//!   provisional record from the rule writer (no LLM call at read time, never
//!   stored) and an embedding computed at read and cached; for agents the
//!   open unit is the newest unit and sits in the recent window anyway.
//! - **Merging merged records.** When merged records still overflow, runs
//!   of equal-level merged records are merged again (the paper merges only
//!   records); without this, 10,000 units could not fit an 8k budget.
//! - **Agentic merges persist** for the episode once used (Appendix A), so
//!   agentic renders depend on earlier agentic calls; reader renders are a
//!   pure function of the store, query and budget.
//! - **Piece vectors** (needed only for cosine tie-breaks and the dense and
//!   hybrid rankings) are computed when first needed and cached in memory,
//!   as in Appendix A; persisting (and log compaction) writes them too, tagged
//!   with the embedder's name, so a restored store does not embed every piece
//!   again (a store opened with another embedder ignores them). Logs holding
//!   them cannot be read by builds older than this record kind.
//! - **Forgetting** one event of a unit removes its text from the unit and
//!   writes the unit's note again from what remains (new version); merged
//!   records covering it are dropped. Tombstones stay in the log until
//!   `manage()` compacts it.
//! - **BM25** is our exact implementation ([`submem_kit::bm25`]), Lucene's
//!   IDF, Lucene's classic English stop words.
//! - **Relevance order** is the paper's: no unit is ever degraded to make
//!   room for a less relevant one, but a smaller, less relevant unit may
//!   still be shown raw after a larger, more relevant one had to become an
//!   excerpt (Eq. 4 gives each candidate the best resolution that fits the
//!   room left). Among equally sized candidates resolutions never increase.
//! - **Prompt echoes.** Small models often answer with the instructions;
//!   records and merged records that mostly repeat the prompt are treated as
//!   failures and replaced by the rule writer (counted in [`FlexaStats`]).
//! - Pieces of a step's output block are always labelled with the step
//!   number and the first line of its command (the output block never
//!   begins its step).
//!
//! ## Piece recovery: where the defaults depart from the paper, and why
//! Measured on LoCoMo conv-26 (199 questions, rule writer, `submem bench
//! --reader none --memory-llm none --trace`), whole-turn evidence coverage at
//! budgets 2k / 4k / 8k, with `m2-fill` (BM25 filling the budget with whole
//! turns) as the bar:
//!
//! | variant | 2k | 4k | 8k | shown in part (8k) |
//! |---|---:|---:|---:|---:|
//! | before: one labelled line per piece, hybrid ranking, ρ = 0.5 (`flexa:join=false,piece_ranking=hybrid,piece_rho=0.5`) | 0.255 | 0.287 | 0.382 | 0.865 |
//! | + consecutive pieces of a turn joined ([`FlexaConfig::join_pieces`]) | 0.311 | 0.398 | 0.625 | 0.869 |
//! | + dense piece ranking | 0.347 | 0.514 | 0.749 | 0.873 |
//! | + ρ = 0.15 for piece recovery (the default of that round) | 0.470 | 0.661 | 0.805 | 0.896 |
//! | ρ = 0.1 instead | 0.494 | 0.669 | 0.813 | 0.904 |
//! | `m2-fill` (BM25, whole turns, budget filled) | 0.602 | 0.649 | 0.749 | 0.805 |
//! | `m1-fill` (MiniLM, whole turns, budget filled) | 0.665 | 0.765 | 0.884 | 0.896 |
//!
//! `flexa-paper` ([`FlexaConfig::paper`]) is the method as written (BM25
//! piece ranking, ρ = 0.5, one line per piece); an earlier sweep measured
//! its BM25 ranking at 0.247 / 0.267 (4k / 8k). The trace
//! ([`submem_core::Substrate::trace`]) said why: before this change 26 % of the gold turns at 8k ranked high enough to fit yet were
//! not shown whole (a turn longer than κ was cut into pieces, each shown on
//! its own line with the speaker's label, so its text never appeared
//! verbatim); the timeline's records took half the allowance and crowded out
//! 11–16 %; the rest ranked too low. With the defaults the trace leaves
//! 0–0.8 % "fit but not whole", 1–2 % crowded out, and 18–50 % ranked too low
//! (2k: the ranking, not the room, is what loses evidence at small budgets,
//! where `m1-fill`'s turn ranking still does better). ρ = 0.1 was marginally
//! higher but compresses the timeline further (more merges, which cost LLM
//! calls with an LLM writer); 0.15 was the default measured here, since lowered
//! to 0.05 with a turn's κ of 128 and hybrid piece ranking (the sweep below). Unit recovery
//! (agents) keeps ρ = 0.5 and hybrid ranking: the agentic regime was not
//! re-measured.
//!
//! ## The defaults, cross-validated, against packing (earlier round)
//! Those defaults were chosen on conv-26 alone, so they were checked on data
//! they were not chosen on: conv-30 (105 questions), the two LongMemEval
//! oracle questions of its public release and the default synthetic set, beside
//! the hybrid fill (`hybrid-fill`: MiniLM and BM25 rankings of whole turns
//! fused by reciprocal rank, packed until the budget is spent). Whole-turn
//! coverage at 2k / 4k / 8k (`--reader none --memory-llm none`; synthetic:
//! its default 1k budget):
//!
//! | variant | conv-26 | conv-30 | LongMemEval (3 gold turns) | synthetic |
//! |---|---|---|---|---:|
//! | then default (dense, ρ = 0.15, κ = 64) | 0.470 / 0.661 / 0.805 | 0.473 / 0.595 / 0.771 | 0.33 / 0.33 / 1.00 | 1.000 |
//! | ρ = 0.05 | 0.494 / 0.681 / 0.817 | 0.473 / 0.618 / 0.779 | 0.33 / 0.33 / 1.00 | 1.000 |
//! | hybrid piece ranking | 0.386 / 0.550 / 0.733 | 0.473 / 0.611 / 0.779 | 0.33 / 0.67 / 1.00 | 0.919 |
//! | `hybrid-fill` | 0.737 / 0.805 / 0.904 | 0.702 / 0.809 / 0.901 | 1.00 / 1.00 / 1.00 | 0.919 |
//!
//! ## Piece recovery at the level of the hybrid fill: κ of a turn
//! Whole-turn coverage undersells piece recovery (an excerpt that holds the
//! answer counts for nothing), so this round compares evidence shown whole
//! *or in part* (`evidence_partial`) and answer recall (the normalised gold
//! answer in the memory; `answer_recall`) with the strongest packing
//! baseline. On LoCoMo conv-26 (199 questions) at 2k / 4k / 8k, rule writer,
//! `submem bench --dataset locomo --data locomo-conv26.json --budget
//! 2048,4096,8192 --reader none --memory-llm none`:
//!
//! | variant | whole | whole or part | answer recall |
//! |---|---|---|---|
//! | before (dense, ρ = 0.15, κ = 64) | 0.470 / 0.661 / 0.805 | 0.705 / 0.809 / 0.896 | 0.243 / 0.296 / 0.342 |
//! | ρ = 0.05 | 0.494 / 0.681 / 0.817 | 0.721 / 0.821 / 0.908 | 0.250 / 0.303 / 0.342 |
//! | hybrid ranking, ρ = 0.05 | 0.378 / 0.558 / 0.741 | 0.737 / 0.829 / 0.924 | 0.263 / 0.322 / 0.355 |
//! | + a turn's κ = 96 | 0.717 / 0.801 / 0.900 | 0.757 / 0.833 / 0.920 | 0.303 / 0.342 / 0.362 |
//! | + a turn's κ = 128 (**default**) | 0.733 / 0.809 / 0.896 | 0.765 / 0.837 / 0.916 | 0.303 / 0.342 / 0.362 |
//! | default with ρ = 0.02 or 0.01 | 0.733 / 0.809 / 0.900 | 0.765 / 0.837 / 0.916 | 0.303 / 0.342 / 0.362 |
//! | default with M2's broad stop list (`stopwords=english`) | 0.737 / 0.805 / 0.904 | 0.769 / 0.833 / 0.920 | 0.296 / 0.309 / 0.355 |
//! | `hybrid-fill` (whole turns, RRF) | 0.737 / 0.805 / 0.904 | 0.769 / 0.833 / 0.920 | 0.303 / 0.309 / 0.355 |
//! | `hybrid-pieces` (κ = 64 pieces, RRF, no timeline) | 0.582 / 0.713 / 0.849 | 0.761 / 0.853 / 0.936 | 0.263 / 0.309 / 0.355 |
//! | `m2-pieces` (the paper's piece retrieval) | 0.426 / 0.494 / 0.641 | 0.693 / 0.733 / 0.845 | 0.230 / 0.230 / 0.303 |
//! | `flexa-paper` | 0.227 / 0.247 / 0.267 | 0.614 / 0.653 / 0.717 | 0.230 / 0.243 / 0.289 |
//!
//! Cut at 64 tokens, a LoCoMo turn with its date and speaker is often two
//! pieces, ranked apart and shown apart; the answer then sits in the half
//! that missed the cut. At 128 nearly every turn is one piece, ranked as a
//! whole like the hybrid fill ranks it, while LongMemEval's assistant turns
//! (hundreds of tokens) are still cut. Agent steps keep κ = 64
//! ([`FlexaConfig::piece_tokens`]): unit recovery's excerpts come from them,
//! and its items on the ALFWorld sample are identical before and after
//! (timings aside). Cross-checked on data the choice was not made on, the
//! two LongMemEval oracle questions (3 gold turns) and the synthetic set:
//! the default shows 1.00 / 1.00 / 1.00 of the LongMemEval evidence whole
//! (κ = 64 with dense ranking: 0.33 / 0.33 / 1.00; κ = 96: 0.67 / 0.67 /
//! 1.00) with answer recall 1.00 everywhere, as `hybrid-fill` does, and
//! 1.000 on every figure of the synthetic set (`hybrid-fill` 0.919 whole,
//! 0.875 answer recall). On conv-26 the default is level with `hybrid-fill`
//! on whole-or-part coverage (−0.004 / +0.004 / −0.004: one gold turn of
//! 249 either way; per question, 5 against 6, 5 against 4 and 4 against 5
//! questions where one shows more evidence than the other) and ahead on
//! answer recall at 4k and 8k. With M2's broad stop list the piece ranking
//! reproduces the hybrid fill's coverage to the third decimal but loses
//! answer recall (−0.007 / −0.033 / −0.007 against the default); it would
//! also change unit recovery's excerpts, so Lucene's list stays. ρ below
//! 0.05 changes nothing measurable: the timeline is already at its floor.
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> submem_core::Result<()> {
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_flexamem::{FlexaConfig, FlexaMem};
//!
//! let mem = FlexaMem::new(services, FlexaConfig::default())?;
//! let ns = Namespace::new("alice")?;
//! mem.write(&ns, &[Event::Turn(Turn {
//!     session_id: "s1".into(),
//!     session_date: Some("8 May 2023".into()),
//!     speaker: "Alice".into(),
//!     text: "My violin teacher is Ms Berg.".into(),
//!     source_id: "D1:1".into(),
//! })]).await?;
//! mem.manage().await?;
//! let r = mem.render_detailed(&Query::question(ns, "Who teaches me violin?", 4096)).await?;
//! println!("{} tokens, raw share {:.2}", r.recall.tokens, r.shares.raw);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod error;
pub mod factory;
pub mod log;
mod mem;
pub mod pieces;
pub mod rank;
pub mod record;
pub mod render;
pub mod state;
mod substrate;
pub mod timeline;
pub mod vectors;

/// The method id of FlexA-Mem (shown as `FlexA-Mem`; the id is `FlexAMem`, as files
/// written before ids could hold a `-` spell it).
pub const FLEXA_MEM: submem_core::MethodId = submem_core::MethodId::from_static("FlexAMem");

pub use config::{FlexaConfig, PieceSizes, Ranking, RecoveryDefaults, RecoveryMode};
pub use error::FlexaError;
pub use factory::factories;
pub use mem::{FlexaMem, FlexaStats, FORMAT_VERSION, LOG_FILE, STORE_NAME};
pub use render::{Rendered, Shares, TokenBreakdown};

// Used only in docs.
#[allow(unused_imports)]
use submem_core::Substrate;
