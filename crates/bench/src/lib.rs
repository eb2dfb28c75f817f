//! # submem-bench
//!
//! The submem harness: runs memory substrates on identical histories and
//! reports the performance and efficiency metrics of *Harness the Memory*
//! (Appendix D, Table 6) plus FlexA-Mem's evidence coverage.
//!
//! - [`dataset`]: LoCoMo, LongMemEval, ALFWorld trajectories, an agent-probe
//!   JSONL format and a seeded synthetic generator, all loaded into the same
//!   [`Dataset`];
//! - [`metrics`]: EM, token F1, BLEU-1, SubEM, Recall@k, evidence coverage,
//!   McNemar and the paired bootstrap;
//! - [`registry`]: substrates built by name (`m1`, `m2`, `m10`, `flexa:…`);
//! - [`runner`]: write → manage → read per conversation, metered, resumable;
//! - [`summary`] and [`report`]: `summary.json`, `report.md` and an SVG
//!   performance–latency scatter.
#![warn(missing_docs)]

pub mod dataset;
mod error;
pub mod metrics;

pub use dataset::{Conversation, Dataset, DatasetKind, HistorySource, Question, QuestionKind};
pub use error::{BenchError, Result};
pub mod baselines;
pub mod compare;
pub mod items;
pub mod reader;
pub mod registry;
pub mod report;
pub mod runner;
pub mod summary;
