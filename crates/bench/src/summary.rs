//! Aggregation of item and write records into one summary per run
//! (substrate × dataset × budget × k): the P and E metrics of Table 6 and
//! evidence coverage, with per-category breakdowns.
//!
//! Conventions (all times in **seconds**):
//! - P1–P3, P12: mean over answered items with a gold answer (abstention and
//!   LoCoMo adversarial items excluded); P4: share of CORRECT over judged
//!   items; P6: mean Recall@k over items with gold evidence, counting every
//!   source a recall reports at any resolution; `P6_verbatim` counts only
//!   sources shown verbatim (excerpt or raw) — a substrate that lists every
//!   unit as an LLM-written record (FlexA-Mem's timeline) has P6 = 1 by
//!   construction, so compare `P6_verbatim` and evidence coverage.
//! - P5 = Σ input tokens / Σ stored tokens over conversations (footprint).
//! - P8–P11 need a live environment and are always `null`.
//! - E1: Σ memory + disk bytes over conversations (each conversation has its
//!   own instance). E2: read + generate per answered item. E3: per-event write
//!   latency (batch time / batch events). E4: read latency per item.
//! - E5/E6, E10/E11: meter counts of the write and manage phases summed over
//!   conversations; E8/E9: LLM tokens/calls made inside reads; E12 = E5+E8+E10,
//!   E13 = E6+E9+E11 (the reader's answers are not auxiliary calls).
//! - Cross-episode regime (`train_episodes`): the training bank is written
//!   once per substrate; its cost is `training_bank` and is added once to
//!   E5/E6, E10/E11, E12/E13 and E14; the per-episode figures
//!   (`llm_per_conversation`, E3, E1) leave it out, though each episode's
//!   footprint holds the restored bank.
//! - `reader_tokens` / `judge_tokens`: Σ tokens (prompt + reply) the shared
//!   reader and the judges used on the items, as their servers reported
//!   them (the judge checks' tokens are in `judge_checks`, an answer key's judging counted in).
//! - `P4_by_judge` (runs with several judges): P4 by each judge;
//!   `judge_agreement`: Cohen's kappa of each pair of judges over every item,
//!   with the items they disagree on; `judge_checks`: each judge's
//!   strictness and leniency on known answers (see [`crate::judges`]).
//! - E7: mean rendered-memory tokens per item (`E7_total` is the sum).
//! - E14: Σ write + manage time over conversations + Σ (read + generate) over
//!   items (judging excluded); E15 = E14 / items.
//! - `evidence_coverage`: share of gold turns shown whole;
//!   `evidence_partial`: shown at least in part (whole included);
//!   `answer_recall`: share of questions with a gold answer whose normalised
//!   answer (every element of a list) appears in the rendered memory
//!   ([`answer_recall`](mod@crate::metrics::answer_recall)).
//! - P6 of a recall that names more events through LLM-written records than
//!   its k (FlexA-Mem's timeline) counts the events shown verbatim: it
//!   lists its memory rather than ranking it.
//! - `resolution_shares`: share of shown events at each resolution.
//! - `diagnostics`: the substrate's behaviour counters (LLM replies used or
//!   fallen back to rules...), summed over conversations: `write` as logged
//!   after write and manage, `read` as moved during the reads.
//! - `evidence_fates`: where gold turns went (see [`crate::metrics::fates`]):
//!   shares `whole`, `part_only`, `record_only`, `absent` of all gold turns
//!   and, when the run traced (`--trace`), `not_ranked`, `ranked_too_low`,
//!   `crowded_out`, `fit_not_whole`, `beyond_top_k` of the traced ones.
//!
//! A metric that is undefined for a run is `null` (shown as `n/a`), never 0.

pub mod key_summary;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use submem::LatencyStats;
use submem_core::Diagnostics;

use crate::instance::TRAINING_BANK;
use crate::items::{ItemRecord, WriteRecord};
use crate::judges::{agreement, Agreement, JudgeChecks};
use crate::metrics::EvidenceFates;
use crate::rescore::judge_tokens;

/// One run's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Substrate spec.
    pub substrate: String,
    /// Substrate family.
    pub family: String,
    /// Dataset.
    pub dataset: String,
    /// Budget.
    pub budget: usize,
    /// Top-k.
    pub k: usize,
    /// Metrics by id (`P6`, `E4`...), `null` when undefined.
    pub metrics: Map<String, Value>,
    /// The main answer and retrieval metrics per category.
    pub per_category: BTreeMap<String, Map<String, Value>>,
}

impl RunSummary {
    /// A metric as a number (`None` when absent or undefined). Latency
    /// metrics give their mean.
    pub fn number(&self, id: &str) -> Option<f64> {
        match self.metrics.get(id)? {
            Value::Number(n) => n.as_f64(),
            Value::Object(o) => o.get("mean").and_then(Value::as_f64),
            _ => None,
        }
    }
}

/// Every run of a results directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The runs.
    pub runs: Vec<RunSummary>,
    /// Each pair of judges' agreement over the items (runs with several
    /// judges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge_agreement: Vec<Agreement>,
    /// Each judge's strictness and leniency on known answers (runs whose
    /// judges were checked; [`crate::results::summarize_dir`] adds them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_checks: Option<JudgeChecks>,
    /// The answer key applied, metrics under it, ceilings ([`key_summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_key: Option<key_summary::KeySummary>,
}

fn mean(xs: impl Iterator<Item = f64>) -> Value {
    let (mut s, mut n) = (0.0, 0usize);
    for x in xs {
        s += x;
        n += 1;
    }
    if n == 0 {
        Value::Null
    } else {
        json!(s / n as f64)
    }
}

fn ratio(num: f64, den: f64) -> Value {
    if den > 0.0 {
        json!(num / den)
    } else {
        Value::Null
    }
}

fn latency(samples: &[f64]) -> Value {
    if samples.is_empty() {
        return Value::Null;
    }
    let s = LatencyStats::from_samples(samples);
    json!({"mean": s.mean, "p50": s.p50, "p90": s.p90})
}

fn answer_metrics(items: &[&ItemRecord], m: &mut Map<String, Value>) {
    m.insert("P1".into(), mean(items.iter().filter_map(|i| i.em)));
    m.insert("P2".into(), mean(items.iter().filter_map(|i| i.f1)));
    m.insert("P3".into(), mean(items.iter().filter_map(|i| i.bleu1)));
    m.insert(
        "P4".into(),
        mean(
            items
                .iter()
                .filter_map(|i| i.judge.map(|j| f64::from(u8::from(j)))),
        ),
    );
    m.insert("P12".into(), mean(items.iter().filter_map(|i| i.sub_em)));
    m.insert(
        "P6".into(),
        mean(items.iter().filter_map(|i| i.recall_at_k)),
    );
    m.insert(
        "P6_verbatim".into(),
        mean(items.iter().filter_map(|i| i.recall_verbatim)),
    );
    let gold: u32 = items.iter().map(|i| i.coverage.gold).sum();
    let whole: u32 = items.iter().map(|i| i.coverage.whole).sum();
    let part: u32 = items.iter().map(|i| i.coverage.part).sum();
    m.insert(
        "evidence_coverage".into(),
        ratio(f64::from(whole), f64::from(gold)),
    );
    m.insert(
        "evidence_partial".into(),
        ratio(f64::from(whole + part), f64::from(gold)),
    );
    m.insert(
        "answer_recall".into(),
        mean(items.iter().filter_map(|i| i.answer_recall)),
    );
    let mut fates = EvidenceFates::default();
    for i in items {
        fates.add(&i.fates);
    }
    m.insert("evidence_fates".into(), fate_shares(&fates));
}

/// Shares of gold turns by fate (`null` when no item counted any). The
/// traced buckets are shares of the traced turns.
fn fate_shares(f: &EvidenceFates) -> Value {
    if f.gold == 0 {
        return Value::Null;
    }
    let g = f64::from(f.gold);
    let mut o = json!({
        "gold": f.gold,
        "whole": f64::from(f.whole) / g,
        "part_only": f64::from(f.part_only) / g,
        "record_only": f64::from(f.record_only) / g,
        "absent": f64::from(f.absent) / g,
    });
    if f.traced > 0 {
        let t = f64::from(f.traced);
        o["traced"] = json!(f.traced);
        o["not_ranked"] = json!(f64::from(f.not_ranked) / t);
        o["ranked_too_low"] = json!(f64::from(f.ranked_too_low) / t);
        o["crowded_out"] = json!(f64::from(f.crowded_out) / t);
        o["fit_not_whole"] = json!(f64::from(f.fit_not_whole) / t);
        o["beyond_top_k"] = json!(f64::from(f.beyond_top_k) / t);
    }
    o
}

/// Builds the summary of `items` with the write costs in `writes`.
pub fn summarize(items: &[ItemRecord], writes: &[WriteRecord]) -> Summary {
    // Last record wins for a key (a resumed run never duplicates, but be safe).
    type RunKey = (String, String, usize, usize);
    let mut order: Vec<RunKey> = Vec::new();
    let mut groups: BTreeMap<RunKey, BTreeMap<(String, String), &ItemRecord>> = BTreeMap::new();
    for i in items {
        let g = (
            i.key.substrate.clone(),
            i.key.dataset.clone(),
            i.key.budget,
            i.key.k,
        );
        if !groups.contains_key(&g) {
            order.push(g.clone());
        }
        groups
            .entry(g)
            .or_default()
            .insert((i.key.conversation.clone(), i.key.question_id.clone()), i);
    }
    let mut write_map: BTreeMap<(&str, &str, &str), &WriteRecord> = BTreeMap::new();
    for w in writes {
        write_map.insert((&w.substrate, &w.dataset, &w.conversation), w);
    }
    let mut runs = Vec::new();
    for g in order {
        let Some(members) = groups.get(&g) else {
            continue;
        };
        let its: Vec<&ItemRecord> = members.values().copied().collect();
        let convs: std::collections::BTreeSet<&str> =
            its.iter().map(|i| i.key.conversation.as_str()).collect();
        let ws: Vec<&WriteRecord> = convs
            .iter()
            .filter_map(|c| write_map.get(&(g.0.as_str(), g.1.as_str(), *c)).copied())
            .collect();
        let mut m = Map::new();
        m.insert("questions".into(), json!(its.len()));
        m.insert(
            "answered".into(),
            json!(its.iter().filter(|i| i.answered).count()),
        );
        // What the shared reader and the judge spent, as their servers
        // counted it (the substrate's own LLM use is E12).
        m.insert(
            "reader_tokens".into(),
            json!(its.iter().filter_map(|i| i.reader_tokens).sum::<u64>()),
        );
        m.insert(
            "judge_tokens".into(),
            json!(its.iter().map(|i| judge_tokens(i)).sum::<u64>()),
        );
        if let Some(by) = agreement::p4_by_judge(&its) {
            m.insert("P4_by_judge".into(), by);
        }
        m.insert(
            "reader_rejected".into(),
            json!(its.iter().filter(|i| i.reader_error.is_some()).count()),
        );
        m.insert("conversations".into(), json!(convs.len()));
        answer_metrics(&its, &mut m);
        let input: u64 = ws.iter().map(|w| w.input_tokens).sum();
        let stored: u64 = ws.iter().map(|w| w.stored_tokens).sum();
        m.insert("P5".into(), ratio(input as f64, stored as f64));
        for p in ["P8", "P9", "P10", "P11"] {
            m.insert(p.into(), Value::Null);
        }
        let complete_writes = ws.len() == convs.len();
        let sum_w = |f: &dyn Fn(&WriteRecord) -> f64| -> Value {
            if complete_writes {
                json!(ws.iter().map(|w| f(w)).sum::<f64>())
            } else {
                Value::Null
            }
        };
        // The training bank (cross-episode regime) is paid once per run: in
        // the cost totals, not in the per-episode figures or footprints.
        let bank = write_map
            .get(&(g.0.as_str(), g.1.as_str(), TRAINING_BANK))
            .copied();
        m.insert("training_bank".into(), bank.map_or(Value::Null, bank_cost));
        let sum_cost = |f: &dyn Fn(&WriteRecord) -> f64| -> Value {
            match sum_w(f).as_f64() {
                Some(x) => json!(x + bank.map_or(0.0, f)),
                None => Value::Null,
            }
        };
        m.insert(
            "E1".into(),
            sum_w(&|w| (w.memory_bytes + w.disk_bytes) as f64),
        );
        let e2: Vec<f64> = its
            .iter()
            .filter_map(|i| i.generate_seconds.map(|g| g + i.read_seconds))
            .collect();
        m.insert("E2".into(), latency(&e2));
        let e3: Vec<f64> = ws
            .iter()
            .flat_map(|w| w.write_latency_samples.iter().copied())
            .collect();
        m.insert("E3".into(), latency(&e3));
        let e4: Vec<f64> = its.iter().map(|i| i.read_seconds).collect();
        m.insert("E4".into(), latency(&e4));
        let e5 = sum_cost(&|w| w.write.total_tokens() as f64);
        let e6 = sum_cost(&|w| w.write.llm_calls as f64);
        let e10 = sum_cost(&|w| w.manage.total_tokens() as f64);
        let e11 = sum_cost(&|w| w.manage.llm_calls as f64);
        let e8: u64 = its.iter().map(|i| i.read_llm_tokens).sum();
        let e9: u64 = its.iter().map(|i| i.read_llm_calls).sum();
        let total = |a: &Value, b: u64, c: &Value| match (a.as_f64(), c.as_f64()) {
            (Some(a), Some(c)) => json!(a + b as f64 + c),
            _ => Value::Null,
        };
        m.insert("E12".into(), total(&e5, e8, &e10));
        m.insert("E13".into(), total(&e6, e9, &e11));
        m.insert("E5".into(), e5);
        m.insert("E6".into(), e6);
        m.insert(
            "E7".into(),
            mean(its.iter().map(|i| i.retrieved_tokens as f64)),
        );
        m.insert(
            "E7_total".into(),
            json!(its.iter().map(|i| i.retrieved_tokens).sum::<usize>()),
        );
        m.insert("E8".into(), json!(e8));
        m.insert("E9".into(), json!(e9));
        m.insert(
            "llm_per_conversation".into(),
            llm_per_conversation(&ws, complete_writes, convs.len(), e8, e9),
        );
        m.insert("E10".into(), e10);
        m.insert("E11".into(), e11);
        // Texts embedded while writing and managing: what the substrate asked
        // for (its cost on a cold embedding cache) and what the model
        // computed (the rest came from the cache).
        m.insert(
            "embed_texts".into(),
            sum_cost(&|w| (w.write.embed_items + w.manage.embed_items) as f64),
        );
        m.insert(
            "embed_computed".into(),
            sum_cost(&|w| {
                (w.write.embed_items + w.manage.embed_items
                    - w.write.embed_cached
                    - w.manage.embed_cached) as f64
            }),
        );
        let e14_items: f64 = its
            .iter()
            .map(|i| i.read_seconds + i.generate_seconds.unwrap_or(0.0))
            .sum();
        let e14 = sum_cost(&|w| w.write_seconds + w.manage_seconds + w.restore_seconds)
            .as_f64()
            .map(|w| w + e14_items);
        m.insert("E14".into(), e14.map_or(Value::Null, |x| json!(x)));
        m.insert(
            "E15".into(),
            e14.filter(|_| !its.is_empty())
                .map_or(Value::Null, |x| json!(x / its.len() as f64)),
        );
        let shown: u32 = its
            .iter()
            .map(|i| i.resolutions.record + i.resolutions.excerpt + i.resolutions.raw)
            .sum();
        let shares = if shown == 0 {
            Value::Null
        } else {
            let f = |x: u32| f64::from(x) / f64::from(shown);
            json!({
                "record": f(its.iter().map(|i| i.resolutions.record).sum()),
                "excerpt": f(its.iter().map(|i| i.resolutions.excerpt).sum()),
                "raw": f(its.iter().map(|i| i.resolutions.raw).sum()),
            })
        };
        m.insert("resolution_shares".into(), shares);
        m.insert("diagnostics".into(), diagnostics(&ws, &its));

        let mut cats: BTreeMap<String, Vec<&ItemRecord>> = BTreeMap::new();
        for i in &its {
            cats.entry(i.category.clone()).or_default().push(i);
        }
        let per_category = cats
            .into_iter()
            .map(|(c, v)| {
                let mut cm = Map::new();
                cm.insert("questions".into(), json!(v.len()));
                answer_metrics(&v, &mut cm);
                (c, cm)
            })
            .collect();
        runs.push(RunSummary {
            family: ws.first().map(|w| w.family.clone()).unwrap_or_default(),
            substrate: g.0,
            dataset: g.1,
            budget: g.2,
            k: g.3,
            metrics: m,
            per_category,
        });
    }
    Summary {
        runs,
        judge_agreement: agreement::agreements(items),
        judge_checks: None,
        answer_key: None,
    }
}

/// The substrate's behaviour counters summed over conversations: `write`
/// (after write and manage) and `read` (moved during reads); `null` when the
/// substrate keeps none.
fn diagnostics(ws: &[&WriteRecord], its: &[&ItemRecord]) -> Value {
    let sum = |maps: &mut dyn Iterator<Item = &Diagnostics>| {
        let mut total = Diagnostics::new();
        for d in maps {
            for (name, n) in d {
                *total.entry(name.clone()).or_insert(0) += n;
            }
        }
        total
    };
    let write = sum(&mut ws.iter().map(|w| &w.diagnostics));
    let read = sum(&mut its.iter().map(|i| &i.read_diagnostics));
    if write.is_empty() && read.is_empty() {
        Value::Null
    } else {
        json!({"write": write, "read": read})
    }
}

/// What building a training bank cost, once.
fn bank_cost(b: &WriteRecord) -> Value {
    json!({
        "diagnostics": b.diagnostics,
        "events": b.events,
        "write_seconds": b.write_seconds,
        "manage_seconds": b.manage_seconds,
        "write": {"calls": b.write.llm_calls, "tokens": b.write.total_tokens()},
        "manage": {"calls": b.manage.llm_calls, "tokens": b.manage.total_tokens()},
        "bytes": b.memory_bytes + b.disk_bytes,
    })
}

/// Memory-LLM calls and tokens (input + output) per conversation, by phase:
/// what one conversation costs to write, manage and read (the reads of the
/// questions asked in the run). `null` until every conversation's writes are
/// logged.
fn llm_per_conversation(
    ws: &[&WriteRecord],
    complete_writes: bool,
    conversations: usize,
    read_tokens: u64,
    read_calls: u64,
) -> Value {
    if !complete_writes || conversations == 0 {
        return Value::Null;
    }
    let n = conversations as f64;
    let per = |f: &dyn Fn(&WriteRecord) -> u64| ws.iter().map(|w| f(w)).sum::<u64>() as f64 / n;
    json!({
        "write": {
            "calls": per(&|w| w.write.llm_calls),
            "tokens": per(&|w| w.write.total_tokens()),
        },
        "manage": {
            "calls": per(&|w| w.manage.llm_calls),
            "tokens": per(&|w| w.manage.total_tokens()),
        },
        "read": {
            "calls": read_calls as f64 / n,
            "tokens": read_tokens as f64 / n,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::QuestionKind;
    use crate::items::{ItemKey, ResolutionCounts};
    use crate::metrics::CoverageCounts;
    use submem::PhaseStats;

    fn item(q: &str, recall: Option<f64>, judge: Option<bool>, read: f64) -> ItemRecord {
        let key = ItemKey {
            substrate: "m2".into(),
            dataset: "locomo".into(),
            conversation: "c1".into(),
            question_id: q.into(),
            budget: 1024,
            k: 5,
        };
        ItemRecord {
            gold_evidence: 1,
            recall_at_k: recall,
            recall_verbatim: recall,
            coverage: CoverageCounts {
                gold: 2,
                whole: 1,
                part: 0,
            },
            resolutions: ResolutionCounts {
                record: 0,
                excerpt: 1,
                raw: 3,
            },
            retrieved_tokens: 100,
            read_seconds: read,
            answered: judge.is_some(),
            generate_seconds: judge.map(|_| 1.0),
            judge,
            ..ItemRecord::unmeasured(key, "cat".into(), QuestionKind::Standard)
        }
    }

    #[test]
    fn aggregates_hand_computed_values() {
        let items = vec![
            item("a", Some(1.0), Some(true), 0.1),
            item("b", Some(0.0), Some(false), 0.3),
            item("c", None, None, 0.2),
        ];
        let w = WriteRecord {
            substrate: "m2".into(),
            family: "Flat".into(),
            dataset: "locomo".into(),
            conversation: "c1".into(),
            events: 10,
            write_seconds: 2.0,
            write_latency_samples: vec![0.1, 0.3],
            manage_seconds: 0.4,
            restore_seconds: 0.0,
            write: PhaseStats {
                llm_calls: 3,
                input_tokens: 30,
                output_tokens: 6,
                ..PhaseStats::default()
            },
            manage: PhaseStats::default(),
            memory_bytes: 1000,
            disk_bytes: 0,
            stored_tokens: 50,
            input_tokens: 200,
            diagnostics: Diagnostics::from([("rule_notes".to_string(), 2)]),
        };
        let mut items = items;
        items[1].read_diagnostics = Diagnostics::from([("selection_fallbacks".to_string(), 1)]);
        items[2].read_diagnostics = Diagnostics::from([("selection_fallbacks".to_string(), 1)]);
        let s = summarize(&items, &[w]);
        assert_eq!(s.runs.len(), 1);
        let r = &s.runs[0];
        assert_eq!(r.number("P6"), Some(0.5));
        assert_eq!(r.number("P6_verbatim"), Some(0.5));
        assert_eq!(r.number("P4"), Some(0.5));
        assert_eq!(r.metrics["P1"], Value::Null);
        assert_eq!(r.metrics["P8"], Value::Null);
        assert_eq!(r.number("P5"), Some(4.0));
        assert_eq!(r.number("E1"), Some(1000.0));
        assert_eq!(r.number("E5"), Some(36.0));
        let per = &r.metrics["llm_per_conversation"];
        assert_eq!(per["write"]["calls"], json!(3.0));
        assert_eq!(per["write"]["tokens"], json!(36.0));
        assert_eq!(per["manage"]["calls"], json!(0.0));
        assert_eq!(r.number("E12"), Some(36.0));
        assert_eq!(r.number("E13"), Some(3.0));
        // E14 = 2.0 + 0.4 + (0.1 + 1) + (0.3 + 1) + 0.2 = 5.0; E15 = 5/3
        assert!((r.number("E14").unwrap() - 5.0).abs() < 1e-9);
        assert!((r.number("E15").unwrap() - 5.0 / 3.0).abs() < 1e-9);
        assert!((r.number("E4").unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(r.metrics["E4"]["p50"], json!(0.2));
        assert!((r.number("E2").unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(r.number("evidence_coverage"), Some(0.5));
        assert_eq!(r.metrics["resolution_shares"]["raw"], json!(0.75));
        assert_eq!(r.per_category["cat"]["questions"], json!(3));
        assert_eq!(
            r.metrics["diagnostics"],
            json!({"write": {"rule_notes": 2}, "read": {"selection_fallbacks": 2}})
        );
    }

    #[test]
    fn diagnostics_are_null_for_a_substrate_that_keeps_none() {
        let s = summarize(&[item("a", Some(1.0), None, 0.1)], &[]);
        assert_eq!(s.runs[0].metrics["diagnostics"], Value::Null);
    }
}
