//! The answer key's part of `report.md`: a line under the title, then the
//! "Answer key" section: the key, the ceilings per category, every answer
//! metric under the original and the corrected key side by side (overall
//! and per category), and every change the key makes to a question the run
//! asked.

use serde_json::Value;
use std::fmt::Write as _;

use super::KeySummary;
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
