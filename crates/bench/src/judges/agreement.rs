//! Several judges on one run: P4 per judge, and how far each pair agrees.
//!
//! For each pair of judges (in name order), the items both judged readably
//! give Cohen's kappa ([`crate::metrics::cohen_kappa`]) and the list of items
//! they disagree on, in item order. Only items of a run with several judges
//! carry every judge's verdict (their `judges` map).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

use crate::items::{ItemKey, ItemRecord};
use crate::metrics::cohen_kappa;

/// The judges named in `items`' verdict maps, in name order.
pub fn judge_names<'a>(items: impl IntoIterator<Item = &'a ItemRecord>) -> Vec<String> {
    items
        .into_iter()
        .flat_map(|i| i.judges.keys())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// P4 per judge over `items` (the share each accepted of the items it read):
/// `{name: share or null}`; `None` when no item has several verdicts.
pub fn p4_by_judge(items: &[&ItemRecord]) -> Option<Value> {
    let names = judge_names(items.iter().copied());
    if names.is_empty() {
        return None;
    }
    let mut m = Map::new();
    for name in names {
        let read: Vec<bool> = items
            .iter()
            .filter_map(|i| i.judges.get(&name).and_then(|v| v.correct))
            .collect();
        let share = if read.is_empty() {
            Value::Null
        } else {
            json!(read.iter().filter(|x| **x).count() as f64 / read.len() as f64)
        };
        m.insert(name, share);
    }
    Some(Value::Object(m))
}

/// An item two judges read differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Which item.
    #[serde(flatten)]
    pub key: ItemKey,
    /// Whether the first judge of the pair accepted the answer (the second
    /// did the opposite).
    pub a_accepts: bool,
}

/// How two judges agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// The first judge (by name).
    pub a: String,
    /// The second judge.
    pub b: String,
    /// Items both judged readably.
    pub items: usize,
    /// Of those, the ones they agree on.
    pub agree: usize,
    /// Cohen's kappa over those items (`None` when undefined: no items, or
    /// both gave one verdict throughout).
    pub kappa: Option<f64>,
    /// The items they disagree on, in item order.
    pub disagreements: Vec<Disagreement>,
}

/// Every pair of judges' agreement over `items` (empty with fewer than two
/// judges).
pub fn agreements(items: &[ItemRecord]) -> Vec<Agreement> {
    let names = judge_names(items);
    let mut out = Vec::new();
    for (x, a) in names.iter().enumerate() {
        for b in &names[x + 1..] {
            let mut pairs = Vec::new();
            let mut disagreements = Vec::new();
            for i in items {
                let verdict = |n: &str| i.judges.get(n).and_then(|v| v.correct);
                if let (Some(va), Some(vb)) = (verdict(a), verdict(b)) {
                    pairs.push((va, vb));
                    if va != vb {
                        disagreements.push(Disagreement {
                            key: i.key.clone(),
                            a_accepts: va,
                        });
                    }
                }
            }
            out.push(Agreement {
                a: a.clone(),
                b: b.clone(),
                items: pairs.len(),
                agree: pairs.len() - disagreements.len(),
                kappa: cohen_kappa(&pairs),
                disagreements,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::QuestionKind;
    use crate::items::JudgeVerdict;

    fn item(q: &str, verdicts: &[(&str, Option<bool>)]) -> ItemRecord {
        let key = ItemKey {
            substrate: "m2".into(),
            dataset: "locomo".into(),
            conversation: "c1".into(),
            question_id: q.into(),
            budget: 1024,
            k: 10,
        };
        let mut i = ItemRecord::unmeasured(key, "cat".into(), QuestionKind::Standard);
        for (n, v) in verdicts {
            i.judges.insert(
                n.to_string(),
                JudgeVerdict {
                    correct: *v,
                    reply: String::new(),
                    tokens: 1,
                },
            );
        }
        i.judge = verdicts.first().and_then(|v| v.1);
        i
    }

    #[test]
    fn pairs_agree_by_kappa_and_list_what_they_disagree_on() {
        let items = vec![
            item("q1", &[("b", Some(true)), ("a", Some(true))]),
            item("q2", &[("b", Some(true)), ("a", Some(false))]),
            item("q3", &[("b", Some(false)), ("a", Some(false))]),
            item("q4", &[("b", None), ("a", Some(true))]),
            item("q5", &[("b", Some(false)), ("a", Some(true))]),
            item("q6", &[]),
        ];
        let ag = agreements(&items);
        assert_eq!(ag.len(), 1);
        let g = &ag[0];
        assert_eq!((g.a.as_str(), g.b.as_str()), ("a", "b"));
        // Read by both: q1 (T,T), q2 (F,T), q3 (F,F), q5 (T,F): p_o = 0.5,
        // a yes 0.5, b yes 0.5, p_e = 0.5, κ = 0.
        assert_eq!((g.items, g.agree), (4, 2));
        assert_eq!(g.kappa, Some(0.0));
        let listed: Vec<(&str, bool)> = g
            .disagreements
            .iter()
            .map(|d| (d.key.question_id.as_str(), d.a_accepts))
            .collect();
        assert_eq!(listed, vec![("q2", false), ("q5", true)]);
        let refs: Vec<&ItemRecord> = items.iter().collect();
        let p4 = p4_by_judge(&refs).unwrap();
        assert_eq!(p4["a"], json!(0.6));
        assert_eq!(p4["b"], json!(0.5));
        assert!(p4_by_judge(&refs[5..]).is_none());
        assert!(agreements(&items[5..]).is_empty());
    }
}
