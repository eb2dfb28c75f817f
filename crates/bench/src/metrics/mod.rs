//! Metric functions: answer metrics ([`text`]), retrieval metrics
//! ([`retrieval`]), answer recall in the memory ([`answer_recall`](mod@answer_recall)) and paired statistics ([`stats`]). Aggregation into
//! per-run summaries lives in [`crate::summary`].

pub mod answer_recall;
pub mod fates;
pub mod retrieval;
pub mod stats;
pub mod text;

pub use answer_recall::answer_recall;
pub use fates::{evidence_fates, EvidenceFates};
pub use retrieval::{evidence_coverage, recall_at_k, Coverage, CoverageCounts};
pub use stats::{
    cohen_kappa, mcnemar_exact, mcnemar_paired, paired_bootstrap, wilson, BootstrapCi, McNemar,
};
pub use text::{bleu1, exact_match, normalize_answer, sub_em, token_f1};
