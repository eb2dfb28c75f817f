//! The answer key's part of `report.md`: a line under the title, then the
//! "Answer key" section: the key, the ceilings per category, every answer
//! metric under the original and the corrected key side by side (overall
//! and per category), and every change the key makes to a question the run
//! asked.

use serde_json::Value;
use std::fmt::Write as _;

use crate::summary::key_summary::KeySummary;
use crate::summary::{RunSummary, Summary};

/// The answer metrics set side by side: metric id and column title.
const METRICS: [(&str, &str); 6] = [
    ("P4", "P4 judge"),
    ("P1", "P1 EM"),
    ("P2", "P2 F1"),
    ("P3", "P3 BLEU-1"),
    ("P12", "P12 SubEM"),
    ("answer_recall", "ans"),
];

fn f3(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{x:.3}"))
}

/// `n` and the noun, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `text` fit for a table cell.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn short(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

/// The line under the report's title when the run applied a key.
pub fn headline(summary: &Summary) -> Option<String> {
    let k = summary.answer_key.as_ref()?;
    Some(format!(
        "Answer key `{}` (sha256 {}…) applied: the tables below score against the dataset's gold \
answers; the Answer key section gives every answer metric under both keys, with the ceilings.",
        k.id.name,
        short(&k.id.sha256)
    ))
}

/// A metric of `m` (a run's metrics or one category's) as a number.
fn number(m: &serde_json::Map<String, Value>, id: &str) -> Option<f64> {
    m.get(id).and_then(Value::as_f64)
}

/// `original / corrected` for `id` in `m`, whose corrected metrics are in
/// its `answer_key` map.
fn pair(m: &serde_json::Map<String, Value>, id: &str) -> (Option<f64>, Option<f64>) {
    let corrected = m
        .get("answer_key")
        .and_then(Value::as_object)
        .and_then(|k| number(k, id));
    (number(m, id), corrected)
}

/// Writes the "Answer key" section when the run applied a key.
pub fn write_section(out: &mut String, summary: &Summary) {
    let Some(k) = &summary.answer_key else {
        return;
    };
    let _ = writeln!(out, "## Answer key\n");
    write_key(out, k);
    let runs: Vec<&RunSummary> = summary
        .runs
        .iter()
        .filter(|r| r.metrics.contains_key("answer_key"))
        .collect();
    write_metrics(out, &runs);
    write_categories(out, &runs, k);
    write_changes(out, k);
}

fn write_key(out: &mut String, k: &KeySummary) {
    let _ = write!(
        out,
        "`{}` (sha256 {}…, {})",
        k.id.name,
        short(&k.id.sha256),
        k.format.describe()
    );
    if let Some(d) = &k.description {
        let _ = write!(out, ", \"{}\"", cell(d));
    }
    let _ = write!(
        out,
        ": {}; {} replaced, {} excluded",
        count(k.entries, "entry", "entries"),
        count(k.replaced, "gold answer", "gold answers"),
        count(k.excluded, "question", "questions")
    );
    for (why, n) in &k.set_aside {
        let _ = write!(
            out,
            "; {} set aside ({why}: the gold answer stands)",
            count(*n, "entry", "entries")
        );
    }
    let _ = write!(
        out,
        ". {} of its changes are to questions this run asked",
        k.changes.len()
    );
    if k.not_asked > 0 {
        let _ = write!(out, ", {} to questions it did not ask", k.not_asked);
    }
    if k.judge_tokens > 0 {
        let _ = write!(
            out,
            "; judging against the corrected gold answers took {} judge tokens",
            k.judge_tokens
        );
    }
    out.push_str(".\n\n");
    let _ = writeln!(
        out,
        "Ceiling: the share of the questions asked (with a gold answer) whose original gold answer the \
key keeps, the best a perfect reader can score under the original key.\n"
    );
    out.push_str(
        "| Category | questions | replaced | excluded | ceiling |\n|---|---:|---:|---:|---:|\n",
    );
    for (name, c) in k
        .per_category
        .iter()
        .chain([(&"all".to_string(), &k.overall)])
    {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} |",
            c.questions,
            c.replaced,
            c.excluded,
            f3(c.ceiling)
        );
    }
    out.push('\n');
}

fn write_metrics(out: &mut String, runs: &[&RunSummary]) {
    let shown: Vec<&(&str, &str)> = METRICS
        .iter()
        .filter(|(id, _)| {
            runs.iter().any(|r| {
                let (a, b) = pair(&r.metrics, id);
                a.is_some() || b.is_some()
            })
        })
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Answer metrics under the original / the corrected key (the corrected key scores a changed \
question against its new gold answer, judged again, and leaves an excluded one out):\n"
    );
    out.push_str("| Dataset | Budget | k | Substrate |");
    for (_, title) in &shown {
        let _ = write!(out, " {title} |");
    }
    out.push_str("\n|---|---:|---:|---|");
    for _ in &shown {
        out.push_str("---:|");
    }
    out.push('\n');
    for r in runs {
        let _ = write!(
            out,
            "| {} | {} | {} | {} |",
            r.dataset, r.budget, r.k, r.substrate
        );
        for (id, _) in &shown {
            let (a, b) = pair(&r.metrics, id);
            let _ = write!(out, " {} / {} |", f3(a), f3(b));
        }
        out.push('\n');
    }
    out.push('\n');
}

fn write_categories(out: &mut String, runs: &[&RunSummary], k: &KeySummary) {
    if k.per_category.len() < 2 {
        return;
    }
    let judged = runs.iter().any(|r| number(&r.metrics, "P4").is_some());
    let (id, title) = if judged {
        ("P4", "P4")
    } else {
        ("answer_recall", "Answer recall")
    };
    let _ = writeln!(
        out,
        "{title} per category under the original / the corrected key:\n"
    );
    out.push_str("| Substrate · budget · k |");
    for (name, c) in &k.per_category {
        let _ = write!(out, " {name} (ceiling {}) |", f3(c.ceiling));
    }
    out.push_str("\n|---|");
    for _ in &k.per_category {
        out.push_str("---:|");
    }
    out.push('\n');
    for r in runs {
        let _ = write!(out, "| {} · {} · {} |", r.substrate, r.budget, r.k);
        for name in k.per_category.keys() {
            let (a, b) = r
                .per_category
                .get(name)
                .map_or((None, None), |m| pair(m, id));
            let _ = write!(out, " {} / {} |", f3(a), f3(b));
        }
        out.push('\n');
    }
    out.push('\n');
}

fn write_changes(out: &mut String, k: &KeySummary) {
    if k.changes.is_empty() {
        let _ = writeln!(out, "The key changes no question this run asked.\n");
        return;
    }
    let _ = writeln!(
        out,
        "Every change the key makes to a question this run asked (entry: its place in the key file):\n"
    );
    out.push_str(
        "| Entry | Question | Category | Original gold | Corrected gold | Reason |\n|---:|---|---|---|---|---|\n",
    );
    for c in &k.changes {
        // The entry's own name for the question, where it is not ours.
        let named = format!("{}/{}", c.conversation, c.question_id);
        let id = if c.id.starts_with(&format!("{}/", c.conversation)) {
            named
        } else {
            format!("{named} ({})", c.id)
        };
        let _ = writeln!(
            out,
            "| {} | {}: {} | {} | {} | {} | {} |",
            c.entry,
            cell(&id),
            cell(&c.question),
            c.category,
            cell(&c.gold),
            c.corrected.as_deref().map_or("*excluded*".into(), cell),
            c.reason.as_deref().map_or(String::new(), cell)
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use crate::answer_key::AnswerKey;
    use crate::dataset::{Dataset, DatasetKind, QuestionKind};
    use crate::items::{Corrected, ItemKey, ItemRecord};
    use crate::summary::{key_summary as summary, RunSummary, Summary};
    use std::path::Path;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    fn locomo() -> Dataset {
        Dataset::load(DatasetKind::Locomo, &fixture("locomo-mini.json")).unwrap()
    }

    fn item(
        q: &str,
        category: &str,
        judge: Option<bool>,
        corrected: Option<Corrected>,
    ) -> ItemRecord {
        let key = ItemKey {
            substrate: "m2".into(),
            dataset: "locomo".into(),
            conversation: "conv-26".into(),
            question_id: q.into(),
            budget: 512,
            k: 5,
        };
        ItemRecord {
            gold: Some("gold".into()),
            answered: true,
            judge,
            em: Some(0.0),
            answer_recall: Some(1.0),
            corrected,
            ..ItemRecord::unmeasured(key, category.into(), QuestionKind::Standard)
        }
    }

    #[test]
    fn metrics_under_both_keys_and_the_ceilings() {
        let k = AnswerKey::load(&fixture("locomo-mini-answer-key.json"), &locomo()).unwrap();
        let items = vec![
            item("q0", "2:temporal", Some(true), None),
            item(
                "q1",
                "2:temporal",
                Some(false),
                Some(Corrected {
                    gold: Some("the year before 2023".into()),
                    judge: Some(true),
                    em: Some(1.0),
                    answer_recall: Some(0.0),
                    judge_tokens: Some(7),
                    ..Corrected::default()
                }),
            ),
            item("q2", "1:multi-hop", Some(true), Some(Corrected::default())),
        ];
        let mut s = crate::summary::summarize(&items, &[]);
        summary::add(&mut s, &items, &k);
        let r: &RunSummary = &s.runs[0];
        assert_eq!(r.number("P4"), Some(2.0 / 3.0));
        let under = &r.metrics["answer_key"];
        assert_eq!(under["P4"], 1.0, "q2 left out, q1 judged right: {under}");
        assert_eq!(under["P1"], 0.5);
        assert_eq!(under["answer_recall"], 0.5);
        assert_eq!(
            (under["replaced"].clone(), under["excluded"].clone()),
            (1.into(), 1.into())
        );
        assert_eq!(under["ceiling"], 1.0 / 3.0);
        assert_eq!(under["judge_tokens"], 7);
        assert_eq!(r.per_category["2:temporal"]["answer_key"]["ceiling"], 0.5);
        assert_eq!(
            r.per_category["1:multi-hop"]["answer_key"]["P4"],
            serde_json::Value::Null
        );
        let ks = s.answer_key.as_ref().unwrap();
        assert_eq!(
            (
                ks.overall.questions,
                ks.overall.replaced,
                ks.overall.excluded
            ),
            (3, 1, 1)
        );
        assert_eq!(ks.per_category["2:temporal"].ceiling, Some(0.5));
        assert_eq!((ks.changes.len(), ks.not_asked, ks.judge_tokens), (2, 0, 7));
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);

        let md = crate::report::markdown(&s, &[]);
        for needle in [
            "Answer key `",
            "## Answer key",
            "submem's corrections format), \"Corrections to the LoCoMo test fixture (made up for the tests)\": 2 entries; 1 gold answer replaced, 1 question excluded. 2 of its changes",
            "| 2:temporal | 2 | 1 | 0 | 0.500 |",
            "| all | 3 | 1 | 1 | 0.333 |",
            "| Dataset | Budget | k | Substrate | P4 judge | P1 EM | ans |",
            "| locomo | 512 | 5 | m2 | 0.667 / 1.000 | 0.000 / 0.500 | 1.000 / 0.500 |",
            "| m2 · 512 · 5 | 1.000 / n/a | 0.500 / 1.000 |",
            "| 1 | conv-26/q1: When did Melanie paint a sunrise? | 2:temporal | 2022 | the year before 2023 | D2:2 says 'last year' in a session of 25 May 2023 |",
            "| 2 | conv-26/q2: What did Caroline and Melanie talk about? | 1:multi-hop | support group, painting | *excluded* | too open to grade |",
        ] {
            assert!(md.contains(needle), "{needle}\n{md}");
        }
    }
}
