//! The summary under both keys. Each run gets `answer_key` among its
//! metrics and in each category: every answer metric (P1–P4, P12, answer
//! recall, and P4 per judge with several) under the corrected key, the
//! items whose gold answer it replaced and excluded, and the *ceiling*,
//! the share of the run's questions with a gold answer whose original gold
//! answer the key keeps (the best a perfect reader can score under the
//! original key). The summary's [`KeySummary`] names the key and gives the
//! ceilings over every question the run asked, by category, with the
//! changes to those questions.
//!
//! Under the corrected key an item the key changes counts with its
//! [`Corrected`] scores, an item whose question it excludes counts in no
//! answer metric, and every other item with its original scores.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

use super::Summary;
use crate::answer_key::{AnswerKey, Change, KeyFormat, KeyId};
use crate::items::Corrected;
use crate::items::ItemRecord;

/// How much of a set of questions the key keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Questions with a gold answer.
    pub questions: usize,
    /// Of them, those whose gold answer the key replaces.
    pub replaced: usize,
    /// Of them, those the key excludes.
    pub excluded: usize,
    /// The share whose original gold answer the key keeps (`null` without
    /// questions).
    pub ceiling: Option<f64>,
}

impl Ceiling {
    fn add(&mut self, change: Option<&Change>) {
        self.questions += 1;
        match change {
            Some(c) if c.excludes() => self.excluded += 1,
            Some(_) => self.replaced += 1,
            None => {}
        }
        let kept = self.questions - self.replaced - self.excluded;
        self.ceiling = Some(kept as f64 / self.questions as f64);
    }
}

/// The key a run applied, and how much of what it asked the key changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeySummary {
    /// Which file.
    #[serde(flatten)]
    pub id: KeyId,
    /// Its format.
    pub format: KeyFormat,
    /// What the key says of itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Entries in the file.
    pub entries: usize,
    /// Entries that change no gold answer, by why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_aside: BTreeMap<String, usize>,
    /// Gold answers the whole key replaces.
    pub replaced: usize,
    /// Questions the whole key excludes.
    pub excluded: usize,
    /// Over every question the run asked.
    pub overall: Ceiling,
    /// Per category, over the questions the run asked.
    pub per_category: BTreeMap<String, Ceiling>,
    /// The changes to questions the run asked, in the key's order.
    pub changes: Vec<Change>,
    /// Changes to questions the run did not ask.
    pub not_asked: usize,
    /// Tokens of the judge calls against corrected gold answers.
    pub judge_tokens: u64,
}

/// Adds the answer metrics under `key` to every run of `summary` (made
/// from `items`) and the key's [`KeySummary`].
pub fn add(summary: &mut Summary, items: &[ItemRecord], key: &AnswerKey) {
    type RunKey = (String, String, usize, usize);
    let mut groups: BTreeMap<RunKey, BTreeMap<(&str, &str), &ItemRecord>> = BTreeMap::new();
    for i in items {
        let k = &i.key;
        groups
            .entry((k.substrate.clone(), k.dataset.clone(), k.budget, k.k))
            .or_default()
            .insert((&k.conversation, &k.question_id), i);
    }
    for run in &mut summary.runs {
        let g = (
            run.substrate.clone(),
            run.dataset.clone(),
            run.budget,
            run.k,
        );
        let Some(members) = groups.get(&g) else {
            continue;
        };
        let its: Vec<&ItemRecord> = members.values().copied().collect();
        run.metrics
            .insert("answer_key".into(), Value::Object(under_key(&its)));
        let mut cats: BTreeMap<&str, Vec<&ItemRecord>> = BTreeMap::new();
        for i in &its {
            cats.entry(&i.category).or_default().push(i);
        }
        for (c, v) in cats {
            if let Some(m) = run.per_category.get_mut(c) {
                m.insert("answer_key".into(), Value::Object(under_key(&v)));
            }
        }
    }
    // Every question asked, once, whatever ran it.
    let mut asked: BTreeMap<(&str, &str), &ItemRecord> = BTreeMap::new();
    for i in items {
        asked.insert((&i.key.conversation, &i.key.question_id), i);
    }
    let mut overall = Ceiling::default();
    let mut per_category: BTreeMap<String, Ceiling> = BTreeMap::new();
    for ((conv, q), i) in &asked {
        if i.gold.is_none() {
            continue;
        }
        let change = key.change(conv, q);
        overall.add(change);
        per_category
            .entry(i.category.clone())
            .or_default()
            .add(change);
    }
    let ids: BTreeSet<(&str, &str)> = asked.keys().copied().collect();
    let changes: Vec<Change> = key
        .changes
        .iter()
        .filter(|c| ids.contains(&(c.conversation.as_str(), c.question_id.as_str())))
        .cloned()
        .collect();
    summary.answer_key = Some(KeySummary {
        id: key.id.clone(),
        format: key.format,
        description: key.description.clone(),
        entries: key.entries,
        set_aside: key.set_aside.clone(),
        replaced: key.replaced(),
        excluded: key.excluded(),
        overall,
        per_category,
        not_asked: key.changes.len() - changes.len(),
        changes,
        judge_tokens: items
            .iter()
            .filter_map(|i| i.corrected.as_ref()?.judge_tokens)
            .sum(),
    });
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

fn share(b: Option<bool>) -> Option<f64> {
    b.map(|b| f64::from(u8::from(b)))
}

/// The answer metrics of `its` under the corrected key, with the ceiling
/// and the items replaced and excluded.
fn under_key(its: &[&ItemRecord]) -> Map<String, Value> {
    // Each item's scores under the corrected key: its own, or the key's;
    // none when the key excludes its question.
    let kept: Vec<(&ItemRecord, Option<&Corrected>)> = its
        .iter()
        .filter(|i| !i.corrected.as_ref().is_some_and(Corrected::excluded))
        .map(|i| (*i, i.corrected.as_ref()))
        .collect();
    let pick = |own: fn(&ItemRecord) -> Option<f64>, key: fn(&Corrected) -> Option<f64>| {
        mean(kept.iter().filter_map(|(i, c)| match c {
            Some(c) => key(c),
            None => own(i),
        }))
    };
    let mut m = Map::new();
    m.insert("P1".into(), pick(|i| i.em, |c| c.em));
    m.insert("P2".into(), pick(|i| i.f1, |c| c.f1));
    m.insert("P3".into(), pick(|i| i.bleu1, |c| c.bleu1));
    m.insert("P4".into(), pick(|i| share(i.judge), |c| share(c.judge)));
    m.insert("P12".into(), pick(|i| i.sub_em, |c| c.sub_em));
    m.insert(
        "answer_recall".into(),
        pick(|i| i.answer_recall, |c| c.answer_recall),
    );
    let names: BTreeSet<&String> = its.iter().flat_map(|i| i.judges.keys()).collect();
    if !names.is_empty() {
        let by: Map<String, Value> = names
            .into_iter()
            .map(|name| {
                let verdicts = kept.iter().filter_map(|(i, c)| {
                    let judges = c.map_or(&i.judges, |c| &c.judges);
                    share(judges.get(name)?.correct)
                });
                (name.clone(), mean(verdicts))
            })
            .collect();
        m.insert("P4_by_judge".into(), Value::Object(by));
    }
    let with_gold: Vec<&&ItemRecord> = its.iter().filter(|i| i.gold.is_some()).collect();
    let changed = |excluded: bool| {
        with_gold
            .iter()
            .filter(|i| {
                i.corrected
                    .as_ref()
                    .is_some_and(|c| c.excluded() == excluded)
            })
            .count()
    };
    let (replaced, excluded) = (changed(false), changed(true));
    m.insert("replaced".into(), json!(replaced));
    m.insert("excluded".into(), json!(excluded));
    m.insert(
        "ceiling".into(),
        if with_gold.is_empty() {
            Value::Null
        } else {
            json!((with_gold.len() - replaced - excluded) as f64 / with_gold.len() as f64)
        },
    );
    m.insert(
        "judge_tokens".into(),
        json!(its
            .iter()
            .filter_map(|i| i.corrected.as_ref()?.judge_tokens)
            .sum::<u64>()),
    );
    m
}
