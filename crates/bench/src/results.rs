//! What a run writes beside its logs once its tasks are over: `summary.json`,
//! `report.md` and `scatter.svg`, computed from its items and write records
//! (and its judge checks' log and the answer key it applied, when there are
//! any), under notes that say what
//! happened to its tasks. `submem bench` calls it
//! after a run and `submem bench merge` after merging shards, so that a merge
//! writes the very files the unsharded run would have.

use std::path::Path;

use crate::answer_key::AnswerKey;
use crate::items::{read_jsonl, ItemRecord, WriteRecord};
use crate::judges::{checks, CHECKS_FILE};
use crate::summary::Summary;
use crate::{report, summary, Result};

/// The report's notes on a run's tasks, in the run's order: each skipped
/// substrate with its reason, then each failed task with its error.
pub fn task_notes(skipped: &[String], failures: &[String]) -> Vec<String> {
    skipped
        .iter()
        .map(|s| format!("skipped {s}"))
        .chain(failures.iter().map(|f| format!("FAILED {f}")))
        .collect()
}

/// The summary of `items` with the costs in `writes`, the rates of the
/// judge checks logged in `dir` ([`CHECKS_FILE`]), judges flagged above
/// `leniency_limit`, and the answer metrics under the answer key `dir`
/// applied ([`answer_key::APPLIED_FILE`]).
pub fn summarize_dir(
    dir: &Path,
    items: &[ItemRecord],
    writes: &[WriteRecord],
    leniency_limit: f64,
) -> Result<Summary> {
    let mut s = summary::summarize(items, writes);
    let log = dir.join(CHECKS_FILE);
    if log.is_file() {
        s.judge_checks = checks::summarize(&read_jsonl(&log)?, leniency_limit);
    }
    if let Some(key) = AnswerKey::read_applied(dir)? {
        crate::summary::key_summary::add(&mut s, items, &key);
    }
    Ok(s)
}

/// Summarises `items` with the costs in `writes` and the judge checks logged
/// in `dir` ([`summarize_dir`]), and writes `summary.json`, `report.md`
/// (headed by a warning per lenient judge, then `notes`) and the pictures
/// into `dir`; returns the report's markdown.
pub fn write_results(
    dir: &Path,
    items: &[ItemRecord],
    writes: &[WriteRecord],
    notes: &[String],
    leniency_limit: f64,
) -> Result<String> {
    let summary = summarize_dir(dir, items, writes, leniency_limit)?;
    report::write_all(dir, &summary, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_come_before_failures() {
        let notes = task_notes(
            &["m3: needs a memory LLM".into()],
            &["m2 on c1: boom".into()],
        );
        assert_eq!(
            notes,
            vec!["skipped m3: needs a memory LLM", "FAILED m2 on c1: boom"]
        );
        assert!(task_notes(&[], &[]).is_empty());
    }
}
