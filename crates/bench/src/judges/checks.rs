//! The judge checks: each judge grades the [`probes`] of a
//! seeded sample of questions with the run's judge prompt, each verdict is
//! logged in [`CHECKS_FILE`], and the log is summarised per judge into its
//! strictness and leniency ([`summarize`]).
//!
//! - *strictness*: gold answers rejected / gold answers read;
//! - *leniency (specific)*: specific wrong answers accepted / read;
//! - *leniency (vague)*: vague topical answers accepted / read;
//!
//! each with its 95 % Wilson interval; probes whose reply could not be read
//! are counted apart and left out of the shares. A judge is *lenient* when
//! either leniency exceeds the run's limit (`--judge-leniency-limit`, 0.2 by
//! default): its P4 counts wrong answers as right often enough to matter,
//! and the report says so at its top. It also warns about a judge that is
//! *strict* (it rejects more gold answers than the same limit) or whose
//! replies are *mostly unreadable* (more than half its probes): either way
//! its P4 says little. The summary counts every check in the log: a resume
//! with a smaller sample keeps the checks already made.

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::probes::{self, Probe, ProbeKind};
use crate::dataset::{DatasetKind, Question};
use crate::items::{read_jsonl, JsonlLog};
use crate::metrics::wilson;
use crate::options::Judge;
use crate::prompt::JudgeTemplate;
use crate::reader;
use crate::Result;

/// The log of a run's judge checks, in its output directory.
pub const CHECKS_FILE: &str = "judge_checks.jsonl";

/// Leniency above which a judge is flagged, unless the run sets its own.
pub const DEFAULT_LENIENCY_LIMIT: f64 = 0.2;

/// One judge's verdict on one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// The judge's name.
    pub judge: String,
    /// Dataset name.
    pub dataset: String,
    /// The probe: question, kind and answer offered.
    #[serde(flatten)]
    pub probe: Probe,
    /// The question's text.
    pub question: String,
    /// The question's gold answer.
    pub gold: String,
    /// Whether the judge accepted the probe's answer; `None` when its reply
    /// could not be read.
    pub accepted: Option<bool>,
    /// The judge's raw reply.
    pub reply: String,
    /// Tokens the call used (prompt + reply), as the judge counted them.
    pub tokens: u64,
}

/// What identifies a check: judge, dataset, conversation, question, probe.
type CheckKey = (String, String, String, String, ProbeKind);

impl CheckRecord {
    fn key(&self) -> CheckKey {
        (
            self.judge.clone(),
            self.dataset.clone(),
            self.probe.conversation.clone(),
            self.probe.question_id.clone(),
            self.probe.kind,
        )
    }
}

/// What the checks are run on: the dataset and the questions the run asks.
pub(crate) struct CheckPlan<'a> {
    /// Dataset name, for the records.
    pub dataset: &'a str,
    /// Which rubric a question gets.
    pub kind: DatasetKind,
    /// Conversation id and question, in dataset order.
    pub asked: Vec<(&'a str, &'a Question)>,
    /// Questions sampled.
    pub sample: usize,
    /// The sample's seed.
    pub seed: u64,
    /// Judge calls in flight at once.
    pub jobs: usize,
}

/// Judges every probe of `plan`'s sample that `out`'s log lacks, with each
/// of `judges` and `template`, appending each verdict to the log as it
/// comes; returns the log's records (earlier runs' included). A failed call
/// stops the checks with its error, the verdicts before it kept.
pub(crate) async fn run(
    out: &Path,
    plan: &CheckPlan<'_>,
    judges: &[Judge],
    template: &JudgeTemplate,
) -> Result<Vec<CheckRecord>> {
    let (mut log, mut records) = JsonlLog::open::<CheckRecord>(&out.join(CHECKS_FILE))?;
    let done: HashSet<CheckKey> = records.iter().map(CheckRecord::key).collect();
    let questions: HashMap<(&str, &str), &Question> = plan
        .asked
        .iter()
        .map(|(c, q)| ((*c, q.id.as_str()), *q))
        .collect();
    let probes = probes::build(&plan.asked, plan.sample, plan.seed);
    // Owned work items: a stream whose closure borrows its arguments would
    // make the run's future not `Send` (the Python binding spawns it).
    let pending: Vec<(Judge, Probe, Question)> = judges
        .iter()
        .flat_map(|j| probes.iter().map(move |p| (j, p)))
        .filter(|(j, p)| {
            !done.contains(&(
                j.name.clone(),
                plan.dataset.to_string(),
                p.conversation.clone(),
                p.question_id.clone(),
                p.kind,
            ))
        })
        .filter_map(|(j, p)| {
            let q = questions.get(&(p.conversation.as_str(), p.question_id.as_str()))?;
            Some((j.clone(), p.clone(), (*q).clone()))
        })
        .collect();
    if !pending.is_empty() {
        tracing::info!(
            checks = pending.len(),
            judges = judges.len(),
            "judge checks: grading known answers"
        );
    }
    let (dataset, kind) = (plan.dataset.to_string(), plan.kind);
    let mut verdicts = futures::stream::iter(pending)
        .map(move |(j, p, q)| {
            let dataset = dataset.clone();
            async move {
                let gold = q.answer.clone().unwrap_or_default();
                let v = reader::judge(&j.llm, template, kind, &q, &gold, &p.answer).await?;
                Ok::<_, crate::BenchError>(CheckRecord {
                    judge: j.name,
                    dataset,
                    probe: p,
                    question: q.text,
                    gold,
                    accepted: v.correct,
                    reply: v.reply,
                    tokens: v.tokens,
                })
            }
        })
        .buffered(plan.jobs.max(1));
    while let Some(done) = verdicts.next().await {
        let record = done?;
        log.append(&record)?;
        records.push(record);
    }
    Ok(records)
}

/// Writes into `out` the judge checks logged in `dirs` (the shards of one
/// run: shard 1 runs them), each check once; returns how many. Without any
/// log, `out` gets none (an earlier one is removed).
pub fn merge_logs(dirs: &[&Path], out: &Path) -> Result<usize> {
    let mut seen = HashSet::new();
    let mut merged = Vec::new();
    for dir in dirs {
        let log = dir.join(CHECKS_FILE);
        if log.is_file() {
            for r in read_jsonl::<CheckRecord>(&log)? {
                if seen.insert(r.key()) {
                    merged.push(r);
                }
            }
        }
    }
    let path = out.join(CHECKS_FILE);
    if merged.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(crate::BenchError::io(&path, e))
            }
            _ => Ok(0),
        };
    }
    let mut text = String::new();
    for r in &merged {
        text.push_str(
            &serde_json::to_string(r).map_err(|e| crate::BenchError::Json {
                what: "a judge check".into(),
                source: e,
            })?,
        );
        text.push('\n');
    }
    std::fs::write(&path, text).map_err(|e| crate::BenchError::io(&path, e))?;
    Ok(merged.len())
}

/// A share of probes with its 95 % Wilson interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Probes of the kind whose verdict could be read.
    pub n: usize,
    /// Of those, the ones counted (gold rejected, or wrong accepted).
    pub count: usize,
    /// Probes of the kind whose reply could not be read (not in `n`).
    pub unreadable: usize,
    /// `count / n`; `None` when `n` is 0.
    pub rate: Option<f64>,
    /// The interval's lower bound (`None` when `n` is 0).
    pub low: Option<f64>,
    /// The interval's upper bound.
    pub high: Option<f64>,
}

impl Rate {
    /// The share of `kind`'s probes in `records` whose verdict differs from
    /// the sound one.
    fn of(records: &[&CheckRecord], kind: ProbeKind) -> Rate {
        let of_kind = records.iter().filter(|r| r.probe.kind == kind);
        let (mut n, mut count, mut unreadable) = (0, 0, 0);
        for r in of_kind {
            match r.accepted {
                None => unreadable += 1,
                Some(a) => {
                    n += 1;
                    if a != kind.expected() {
                        count += 1;
                    }
                }
            }
        }
        let (lo, hi) = wilson(count, n);
        let some = |x: f64| (n > 0).then_some(x);
        Rate {
            n,
            count,
            unreadable,
            rate: (n > 0).then(|| count as f64 / n as f64),
            low: some(lo),
            high: some(hi),
        }
    }
}

/// One judge's check rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeCheckSummary {
    /// The judge's name.
    pub judge: String,
    /// Questions probed.
    pub questions: usize,
    /// Gold answers rejected.
    pub strictness: Rate,
    /// Specific wrong answers accepted.
    pub leniency_specific: Rate,
    /// Vague topical answers accepted.
    pub leniency_vague: Rate,
    /// Tokens the checks' calls used.
    pub tokens: u64,
    /// Whether either leniency exceeds the limit.
    pub lenient: bool,
    /// Whether the share of gold answers rejected exceeds the limit.
    #[serde(default)]
    pub strict: bool,
    /// Whether more than half the judge's probes got a reply that could
    /// not be read as a verdict.
    #[serde(default)]
    pub mostly_unreadable: bool,
}

impl JudgeCheckSummary {
    /// Probes whose reply could not be read, of every kind.
    pub fn unreadable(&self) -> usize {
        self.strictness.unreadable
            + self.leniency_specific.unreadable
            + self.leniency_vague.unreadable
    }

    /// Probes graded, of every kind.
    pub fn probes(&self) -> usize {
        self.unreadable() + self.strictness.n + self.leniency_specific.n + self.leniency_vague.n
    }
}

/// Every judge's check rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeChecks {
    /// The leniency above which a judge is flagged.
    pub leniency_limit: f64,
    /// Per judge, in the log's order.
    pub judges: Vec<JudgeCheckSummary>,
}

/// The rates of every judge in `records`, each flagged when a leniency
/// exceeds `leniency_limit`; `None` without records.
pub fn summarize(records: &[CheckRecord], leniency_limit: f64) -> Option<JudgeChecks> {
    let mut names: Vec<&str> = Vec::new();
    for r in records {
        if !names.contains(&r.judge.as_str()) {
            names.push(&r.judge);
        }
    }
    if names.is_empty() {
        return None;
    }
    let judges = names
        .into_iter()
        .map(|name| {
            let mine: Vec<&CheckRecord> = records.iter().filter(|r| r.judge == name).collect();
            let questions: HashSet<(&str, &str, &str)> = mine
                .iter()
                .map(|r| {
                    (
                        r.dataset.as_str(),
                        r.probe.conversation.as_str(),
                        r.probe.question_id.as_str(),
                    )
                })
                .collect();
            let leniency_specific = Rate::of(&mine, ProbeKind::SpecificWrong);
            let leniency_vague = Rate::of(&mine, ProbeKind::VagueTopical);
            let over = |r: &Rate| r.rate.is_some_and(|x| x > leniency_limit);
            let strictness = Rate::of(&mine, ProbeKind::Gold);
            let unreadable = mine.iter().filter(|r| r.accepted.is_none()).count();
            JudgeCheckSummary {
                judge: name.to_string(),
                questions: questions.len(),
                strict: over(&strictness),
                strictness,
                lenient: over(&leniency_specific) || over(&leniency_vague),
                leniency_specific,
                leniency_vague,
                tokens: mine.iter().map(|r| r.tokens).sum(),
                mostly_unreadable: 2 * unreadable > mine.len(),
            }
        })
        .collect();
    Some(JudgeChecks {
        leniency_limit,
        judges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(judge: &str, q: &str, kind: ProbeKind, accepted: Option<bool>) -> CheckRecord {
        CheckRecord {
            judge: judge.into(),
            dataset: "locomo".into(),
            probe: Probe {
                conversation: "c1".into(),
                question_id: q.into(),
                kind,
                answer: "a".into(),
                from: None,
            },
            question: "Q?".into(),
            gold: "g".into(),
            accepted,
            reply: "r".into(),
            tokens: 10,
        }
    }

    #[test]
    fn rates_count_readable_verdicts_and_flag_a_lenient_judge() {
        use ProbeKind::*;
        let records = vec![
            record("yes", "q1", Gold, Some(true)),
            record("yes", "q1", SpecificWrong, Some(true)),
            record("yes", "q1", VagueTopical, Some(true)),
            record("yes", "q2", Gold, Some(true)),
            record("yes", "q2", VagueTopical, None),
            record("strict", "q1", Gold, Some(false)),
            record("strict", "q1", SpecificWrong, Some(false)),
            record("strict", "q2", Gold, Some(true)),
            record("strict", "q2", VagueTopical, Some(false)),
        ];
        let s = summarize(&records, 0.2).unwrap();
        assert_eq!(s.judges.len(), 2);
        let yes = &s.judges[0];
        assert_eq!((yes.judge.as_str(), yes.questions), ("yes", 2));
        assert_eq!(yes.strictness.rate, Some(0.0));
        assert_eq!(yes.leniency_specific.rate, Some(1.0));
        assert_eq!(
            (yes.leniency_vague.n, yes.leniency_vague.unreadable),
            (1, 1)
        );
        assert!(yes.lenient);
        assert_eq!(yes.tokens, 50);
        let (lo, hi) = (
            yes.leniency_specific.low.unwrap(),
            yes.leniency_specific.high,
        );
        assert!(lo > 0.0 && lo < 1.0 && hi == Some(1.0), "{lo}");
        let strict = &s.judges[1];
        assert_eq!(strict.strictness.rate, Some(0.5));
        assert_eq!(strict.strictness.count, 1);
        assert_eq!(strict.leniency_vague.rate, Some(0.0));
        assert!(!strict.lenient);
        assert!(strict.strict && !yes.strict, "half the gold rejected");
        assert!(!yes.mostly_unreadable && (yes.unreadable(), yes.probes()) == (1, 5));
        let mumbled = summarize(
            &[records[4].clone(), records[4].clone(), records[0].clone()],
            0.2,
        );
        assert!(
            mumbled.unwrap().judges[0].mostly_unreadable,
            "2 of 3 unreadable"
        );
        // No verdict of a kind: no share, no interval.
        let none = Rate::of(&[], Gold);
        assert_eq!((none.rate, none.low, none.high), (None, None, None));
        assert!(summarize(&[], 0.2).is_none());
        // The limit is exclusive: a leniency equal to it is not flagged.
        assert!(!summarize(&records[..3], 1.0).unwrap().judges[0].lenient);
    }

    #[test]
    fn shard_logs_merge_each_check_once() {
        let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let line = |r: &CheckRecord| serde_json::to_string(r).unwrap() + "\n";
        let a = record("j", "q1", ProbeKind::Gold, Some(true));
        let b = record("j", "q2", ProbeKind::Gold, Some(false));
        std::fs::write(dirs[0].path().join(CHECKS_FILE), line(&a) + &line(&b)).unwrap();
        std::fs::write(dirs[1].path().join(CHECKS_FILE), line(&a)).unwrap();
        let out = tempfile::tempdir().unwrap();
        let paths: Vec<&Path> = dirs.iter().map(|d| d.path()).collect();
        assert_eq!(merge_logs(&paths, out.path()).unwrap(), 2);
        let back: Vec<CheckRecord> = read_jsonl(&out.path().join(CHECKS_FILE)).unwrap();
        assert_eq!(back, vec![a, b]);
        assert_eq!(merge_logs(&paths[2..], out.path()).unwrap(), 0);
        assert!(!out.path().join(CHECKS_FILE).exists());
    }

    #[test]
    fn records_read_back_with_the_probe_flattened() {
        let r = record("j", "q1", ProbeKind::SpecificWrong, Some(false));
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains("\"kind\":\"specific_wrong\""), "{line}");
        assert!(line.contains("\"question_id\":\"q1\""), "{line}");
        assert_eq!(serde_json::from_str::<CheckRecord>(&line).unwrap(), r);
    }
}
