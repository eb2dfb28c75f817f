//! The judges' part of `report.md`: the warnings at its top for a lenient,
//! strict or mostly unreadable judge, the judge checks' rates, P4 per judge
//! and the judges' agreement.

use std::fmt::Write as _;

use crate::judges::checks::{JudgeChecks, Rate};
use crate::summary::Summary;

/// Disagreeing items the report lists per pair of judges (the summary keeps
/// them all).
pub const LISTED_DISAGREEMENTS: usize = 20;

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// `count/n share [low, high]`, or `n/a` without a readable verdict.
fn rate_cell(r: &Rate) -> String {
    match (r.rate, r.low, r.high) {
        (Some(x), Some(lo), Some(hi)) => {
            format!("{}/{} = {x:.2} [{lo:.2}, {hi:.2}]", r.count, r.n)
        }
        _ => "n/a".into(),
    }
}

/// The warning lines: first for judges whose leniency passes the run's
/// limit, then for judges that are strict or mostly unreadable (none when
/// every judge is within bounds or no checks ran).
pub fn warnings(summary: &Summary) -> Vec<String> {
    let Some(checks) = &summary.judge_checks else {
        return Vec::new();
    };
    let mut lines = lenient_warnings(checks);
    for j in &checks.judges {
        if j.mostly_unreadable {
            lines.push(format!(
                "**Warning: the judge `{}` is mostly unreadable.** {} of its {} check replies gave no \
verdict that could be read: its P4 rests on the few it gave.",
                j.judge,
                j.unreadable(),
                j.probes()
            ));
        }
        if let (true, Some(x)) = (j.strict, j.strictness.rate) {
            lines.push(format!(
                "**Warning: the judge `{}` is strict.** In its checks it rejected {} of {} gold \
answers ({}), more than the limit of {}: its P4 counts right answers as wrong.",
                j.judge,
                j.strictness.count,
                j.strictness.n,
                pct(x),
                pct(checks.leniency_limit)
            ));
        }
    }
    lines
}

fn lenient_warnings(checks: &JudgeChecks) -> Vec<String> {
    checks
        .judges
        .iter()
        .filter(|j| j.lenient)
        .map(|j| {
            let part = |what: &str, r: &Rate| {
                r.rate.map(|x| {
                    format!(
                        "{} of {} {what} wrong answers ({})",
                        r.count,
                        r.n,
                        pct(x)
                    )
                })
            };
            let parts: Vec<String> = [
                part("specific", &j.leniency_specific),
                part("vague", &j.leniency_vague),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!(
                "**Warning: the judge `{}` is lenient.** In its checks it accepted {}, more than the \
limit of {}: its P4 counts wrong answers as right; read it with the checks below.",
                j.judge,
                parts.join(" and "),
                pct(checks.leniency_limit)
            )
        })
        .collect()
}

/// Writes the judge checks' section, when checks ran.
pub fn write_checks(out: &mut String, checks: &JudgeChecks) {
    let _ = writeln!(out, "## Judge checks\n");
    let _ = writeln!(
        out,
        "Each judge also graded, with the run's judge prompt, three answers to a seeded sample of \
questions: the gold answer (a sound judge accepts it), another question's gold answer of the same \
category and kind (specific wrong) and a sentence that names the question's topic without answering \
it (vague wrong). Shares are of the verdicts that could be read, with 95 % Wilson intervals; a judge \
is flagged lenient when it accepts more than {0} of either kind of wrong answer, strict when it \
rejects more than {0} of the gold answers, mostly unreadable when more than half its replies give no \
verdict (`judge_checks.jsonl` holds every probe and reply).\n",
        pct(checks.leniency_limit)
    );
    let _ = writeln!(
        out,
        "| Judge | questions | gold rejected (strictness) | specific wrong accepted | vague wrong accepted | unreadable | tokens | |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|");
    for j in &checks.judges {
        let flags: Vec<&str> = [
            (j.lenient, "lenient ⚠"),
            (j.strict, "strict ⚠"),
            (j.mostly_unreadable, "mostly unreadable ⚠"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            j.judge,
            j.questions,
            rate_cell(&j.strictness),
            rate_cell(&j.leniency_specific),
            rate_cell(&j.leniency_vague),
            j.unreadable(),
            j.tokens,
            flags.join(", ")
        );
    }
    out.push('\n');
}

/// Writes P4 per judge for every run and each pair's agreement, when the run
/// has several judges.
pub fn write_judges(out: &mut String, summary: &Summary) {
    let names: Vec<String> = {
        let mut n: Vec<String> = summary
            .runs
            .iter()
            .filter_map(|r| r.metrics.get("P4_by_judge")?.as_object())
            .flat_map(|o| o.keys().cloned())
            .collect();
        n.sort();
        n.dedup();
        n
    };
    if names.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Several judges\n");
    let _ = writeln!(
        out,
        "P4 by each judge (the tables above, `judge` in items.jsonl and `submem compare` use the \
first judge named; each judge's verdict is in the items' `judges`):\n"
    );
    let _ = write!(out, "| Dataset | Budget | k | Substrate |");
    for n in &names {
        let _ = write!(out, " P4 {n} |");
    }
    out.push_str("\n|---|---:|---:|---|");
    for _ in &names {
        out.push_str("---:|");
    }
    out.push('\n');
    for r in &summary.runs {
        let Some(by) = r.metrics.get("P4_by_judge").and_then(|v| v.as_object()) else {
            continue;
        };
        let _ = write!(
            out,
            "| {} | {} | {} | {} |",
            r.dataset, r.budget, r.k, r.substrate
        );
        for n in &names {
            match by.get(n).and_then(serde_json::Value::as_f64) {
                Some(x) => {
                    let _ = write!(out, " {x:.3} |");
                }
                None => out.push_str(" n/a |"),
            }
        }
        out.push('\n');
    }
    out.push('\n');
    if summary.judge_agreement.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Agreement over the items both judges read (Cohen's κ; n/a when both gave one and the same verdict throughout):\n"
    );
    let _ = writeln!(out, "| Judges | items | agree | κ | disagree |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for g in &summary.judge_agreement {
        let kappa = g.kappa.map_or("n/a".into(), |k| format!("{k:.3}"));
        let _ = writeln!(
            out,
            "| {} · {} | {} | {} | {kappa} | {} |",
            g.a,
            g.b,
            g.items,
            g.agree,
            g.disagreements.len()
        );
    }
    out.push('\n');
    for g in summary
        .judge_agreement
        .iter()
        .filter(|g| !g.disagreements.is_empty())
    {
        let shown = g.disagreements.len().min(LISTED_DISAGREEMENTS);
        let _ = writeln!(
            out,
            "{} and {} disagree on {} items{} (substrate · conversation · question · budget · k: who accepts):\n",
            g.a,
            g.b,
            g.disagreements.len(),
            if shown < g.disagreements.len() {
                format!(", the first {shown} listed (summary.json has all)")
            } else {
                String::new()
            }
        );
        for d in g.disagreements.iter().take(shown) {
            let k = &d.key;
            let _ = writeln!(
                out,
                "- {} · {} · {} · {} · {}: {}",
                k.substrate,
                k.conversation,
                k.question_id,
                k.budget,
                k.k,
                if d.a_accepts { &g.a } else { &g.b }
            );
        }
        out.push('\n');
    }
}
