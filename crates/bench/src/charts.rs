//! The report's pictures, drawn with plotters into SVG next to `report.md`:
//!
//! - [`COVERAGE_SVG`]: evidence coverage against the token budget, one line
//!   per substrate, in two panels (evidence shown whole; shown whole or in
//!   part);
//! - [`QUALITY_LATENCY_SVG`]: answer-level quality against the median read
//!   latency (log scale), colour and marker per substrate, marker size per
//!   budget;
//! - [`FATES_SVG`]: where gold evidence turns went, one stacked bar per
//!   substrate × budget.
//!
//! Every chart keys its series in a legend beside the plot instead of
//! labelling points, so labels never print on top of each other. A summary
//! with nothing to draw gives an SVG that says "no data" and why, not an
//! error: the report of an empty run still has its pictures.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeSet;
use std::path::Path;

use crate::summary::{RunSummary, Summary};
use crate::{BenchError, Result};

/// File name of the coverage-against-budget chart.
pub const COVERAGE_SVG: &str = "coverage.svg";
/// File name of the quality-against-latency chart (the name the report has
/// always used for its scatter, which CLI and scripts look for).
pub const QUALITY_LATENCY_SVG: &str = "scatter.svg";
/// File name of the evidence-fates chart.
pub const FATES_SVG: &str = "fates.svg";

type Root<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A drawing failure, as text (wrapped into [`BenchError::Plot`] with the file).
type Drawn<T = ()> = std::result::Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Ten colours that stay apart on white (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Point shapes; with [`PALETTE`] they give 20 distinct series styles.
#[derive(Debug, Clone, Copy)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Cross,
];

/// The colour and marker of series number `i`.
fn style_of(i: usize) -> (RGBColor, Marker) {
    (PALETTE[i % PALETTE.len()], MARKERS[i % MARKERS.len()])
}

const FONT: &str = "sans-serif";
const LEGEND_ROW: i32 = 20;
const LEGEND_WIDTH: u32 = 280;

fn text_style(size: u32, h: HPos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).pos(Pos::new(h, VPos::Center))
}

/// Draws `m` of half-size `r` at pixel `at` of `root`.
fn mark(root: &Root, m: Marker, at: (i32, i32), r: i32, color: RGBColor) -> Drawn {
    let (x, y) = at;
    match m {
        Marker::Circle => root.draw(&Circle::new(at, r, color.mix(0.85).filled())),
        Marker::Triangle => root.draw(&TriangleMarker::new(at, r + 1, color.mix(0.85).filled())),
        Marker::Square => root.draw(&Rectangle::new(
            [(x - r + 1, y - r + 1), (x + r - 1, y + r - 1)],
            color.mix(0.85).filled(),
        )),
        Marker::Cross => root.draw(&Cross::new(at, r, color.stroke_width(2))),
    }
    .map_err(s)
}

/// One legend line: a sample (line, marker or swatch) and its label.
struct Entry {
    label: String,
    color: RGBColor,
    marker: Option<(Marker, i32)>,
    line: Option<bool>,
    swatch: bool,
}

impl Entry {
    fn series(label: String, i: usize, dashed: Option<bool>) -> Self {
        let (color, m) = style_of(i);
        Entry {
            label,
            color,
            marker: Some((m, 5)),
            line: dashed,
            swatch: false,
        }
    }
}

/// Draws a titled legend with its top-left corner at pixel `(x, y)`, one
/// row per entry (so no two labels share a position).
fn legend(root: &Root, (x, y): (i32, i32), title: &str, entries: &[Entry]) -> Drawn {
    root.draw(&Text::new(
        title.to_string(),
        (x, y),
        text_style(14, HPos::Left),
    ))
    .map_err(s)?;
    for (i, e) in entries.iter().enumerate() {
        let row = i32::try_from(i).map_err(s)?;
        let cy = y + LEGEND_ROW * (row + 1);
        let cx = x + 14;
        if let Some(dashed) = e.line {
            let style = e.color.stroke_width(2);
            if dashed {
                for seg in [(cx - 12, cx - 6), (cx - 2, cx + 4), (cx + 8, cx + 12)] {
                    root.draw(&PathElement::new(vec![(seg.0, cy), (seg.1, cy)], style))
                        .map_err(s)?;
                }
            } else {
                root.draw(&PathElement::new(vec![(cx - 12, cy), (cx + 12, cy)], style))
                    .map_err(s)?;
            }
        }
        if e.swatch {
            root.draw(&Rectangle::new(
                [(cx - 10, cy - 6), (cx + 10, cy + 6)],
                e.color.filled(),
            ))
            .map_err(s)?;
        }
        if let Some((m, r)) = e.marker {
            mark(root, m, (cx, cy), r, e.color)?;
        }
        root.draw(&Text::new(
            e.label.clone(),
            (x + 34, cy),
            text_style(13, HPos::Left),
        ))
        .map_err(s)?;
    }
    Ok(())
}

/// Height that fits `rows` legend rows (and at least `min`).
fn height_for(rows: usize, min: u32) -> u32 {
    let need = 110 + (rows as u32 + 1) * LEGEND_ROW as u32;
    need.max(min)
}

/// What tells two runs apart besides the substrate: k and the dataset, when
/// the summary has more than one of either.
struct Naming {
    many_k: bool,
    many_datasets: bool,
}

impl Naming {
    fn of(summary: &Summary) -> Self {
        let ks: BTreeSet<usize> = summary.runs.iter().map(|r| r.k).collect();
        let ds: BTreeSet<&str> = summary.runs.iter().map(|r| r.dataset.as_str()).collect();
        Naming {
            many_k: ks.len() > 1,
            many_datasets: ds.len() > 1,
        }
    }

    /// The series a run belongs to (a line of the coverage chart, a colour
    /// of the scatter).
    fn series(&self, r: &RunSummary) -> String {
        let mut name = r.substrate.clone();
        if self.many_k {
            name.push_str(&format!(" k={}", r.k));
        }
        if self.many_datasets {
            name.push_str(&format!(" · {}", r.dataset));
        }
        name
    }
}

/// The series of `runs` in first-seen order, each with its runs.
fn group<'a>(
    naming: &Naming,
    runs: impl Iterator<Item = &'a RunSummary>,
) -> Vec<(String, Vec<&'a RunSummary>)> {
    let mut out: Vec<(String, Vec<&RunSummary>)> = Vec::new();
    for r in runs {
        let name = naming.series(r);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(r),
            None => out.push((name, vec![r])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|r| r.budget);
    }
    out
}

/// Writes an SVG of `size` saying "no data" and why.
fn no_data(path: &Path, title: &str, why: &str) -> Drawn {
    let root = SVGBackend::new(path, (720, 240)).into_drawing_area();
    root.fill(&WHITE).map_err(s)?;
    root.draw(&Text::new(
        title.to_string(),
        (360, 60),
        text_style(20, HPos::Center),
    ))
    .map_err(s)?;
    root.draw(&Text::new(
        format!("no data: {why}"),
        (360, 130),
        text_style(15, HPos::Center),
    ))
    .map_err(s)?;
    root.present().map_err(s)
}

fn plot_err(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |reason| BenchError::Plot {
        path: path.to_path_buf(),
        reason,
    }
}

/// Draws evidence coverage against the token budget to `path`: two panels,
/// evidence shown whole (`evidence_coverage`) and shown whole or in part
/// (`evidence_partial`), one line per substrate over the budgets (placed
/// evenly, as categories). A substrate measured at one budget only, when
/// others have several, is a dashed level line across the panel.
pub fn coverage_svg(summary: &Summary, path: &Path) -> Result<()> {
    draw_coverage(summary, path).map_err(plot_err(path))
}

const COVERAGE_TITLE: &str = "Evidence coverage against token budget";

fn draw_coverage(summary: &Summary, path: &Path) -> Drawn {
    let has = |r: &&RunSummary| {
        r.number("evidence_coverage").is_some() || r.number("evidence_partial").is_some()
    };
    let naming = Naming::of(summary);
    let series = group(&naming, summary.runs.iter().filter(has));
    if series.is_empty() {
        return no_data(
            path,
            COVERAGE_TITLE,
            "no run has gold evidence to cover (evidence_coverage is null everywhere)",
        );
    }
    let budgets: Vec<usize> = summary
        .runs
        .iter()
        .filter(has)
        .map(|r| r.budget)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let slot = |b: usize| budgets.iter().position(|x| *x == b).unwrap_or(0) as f64;
    let nb = budgets.len() as f64;
    let ns = series.len() as f64;
    // Series side by side within a budget, so equal values stay visible.
    let step = (0.3 / ns).min(0.04);
    let level = |v: &[&RunSummary]| v.len() == 1 && budgets.len() > 1;

    let (w, h) = (1180u32, height_for(series.len(), 520));
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(s)?;
    let body = root
        .titled(COVERAGE_TITLE, (FONT, 22).into_font())
        .map_err(s)?;
    let (plots, _) = body.split_horizontally(w - LEGEND_WIDTH);
    let plot_h = 460.min(h - 40);
    let (plots, _) = plots.split_vertically(plot_h);
    let panels = plots.split_evenly((1, 2));
    let metrics = [
        ("evidence_coverage", "shown whole"),
        ("evidence_partial", "shown whole or in part"),
    ];
    for (panel, (metric, caption)) in panels.iter().zip(metrics) {
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, (FONT, 16).into_font())
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.5..nb - 0.5, 0.0..1.05f64)
            .map_err(s)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_label_formatter(&|v| format!("{v:.1}"))
            .y_desc("share of gold evidence turns")
            .x_desc("token budget")
            .draw()
            .map_err(s)?;
        // Budget labels and guides at the categories (plotters' ticks would
        // fall between them).
        for (i, b) in budgets.iter().enumerate() {
            let x = i as f64;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.0), (x, 1.05)],
                    RGBColor(225, 225, 225),
                )))
                .map_err(s)?;
            let (px, py) = chart.backend_coord(&(x, 0.0));
            root.draw(&Text::new(
                b.to_string(),
                (px, py + 14),
                text_style(13, HPos::Center),
            ))
            .map_err(s)?;
        }
        for (si, (_, runs)) in series.iter().enumerate() {
            let (color, m) = style_of(si);
            let dx = (si as f64 - (ns - 1.0) / 2.0) * step;
            let pts: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|r| Some((slot(r.budget) + dx, r.number(metric)?)))
                .collect();
            if level(runs) {
                if let Some(&(_, y)) = pts.first() {
                    chart
                        .draw_series(DashedLineSeries::new(
                            vec![(-0.45, y), (nb - 0.55, y)],
                            6,
                            4,
                            color.stroke_width(2),
                        ))
                        .map_err(s)?;
                }
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(s)?;
            }
            for p in &pts {
                mark(&root, m, chart.backend_coord(p), 5, color)?;
            }
        }
    }
    let entries: Vec<Entry> = series
        .iter()
        .enumerate()
        .map(|(i, (name, runs))| {
            let dashed = level(runs);
            let label = if dashed {
                format!("{name} (one budget)")
            } else {
                name.clone()
            };
            Entry::series(label, i, Some(dashed))
        })
        .collect();
    let x = i32::try_from(w - LEGEND_WIDTH + 10).map_err(s)?;
    legend(&root, (x, 60), "substrate", &entries)?;
    root.present().map_err(s)
}

/// The quality measure of the scatter: the first of these every run with a
/// latency has, else the one most runs have.
const QUALITY: [(&str, &str); 4] = [
    ("answer_recall", "answer recall (gold answer in the memory)"),
    ("evidence_partial", "evidence shown whole or in part"),
    ("P6_verbatim", "Recall@k, verbatim events"),
    ("P6", "Recall@k"),
];

/// Median read latency of a run in milliseconds (E4's p50, else its mean).
fn read_p50_ms(r: &RunSummary) -> Option<f64> {
    let v = r.metrics.get("E4")?;
    let secs = v
        .get("p50")
        .and_then(serde_json::Value::as_f64)
        .or_else(|| r.number("E4"))?;
    Some(secs * 1000.0)
}

fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.0e}")
    }
}

const QL_TITLE: &str = "Quality against read latency";

/// Draws quality against median read latency (E4 p50, log scale) to `path`:
/// one colour and marker per substrate, marker size growing with the budget,
/// a substrate's budgets joined by a thin line. Quality is answer recall
/// when every run has it, else evidence shown whole or in part, else
/// (verbatim) Recall@k; the y axis says which.
pub fn quality_latency_svg(summary: &Summary, path: &Path) -> Result<()> {
    draw_quality_latency(summary, path).map_err(plot_err(path))
}

fn draw_quality_latency(summary: &Summary, path: &Path) -> Drawn {
    let timed: Vec<&RunSummary> = summary
        .runs
        .iter()
        .filter(|r| read_p50_ms(r).is_some())
        .collect();
    let count = |m: &str| timed.iter().filter(|r| r.number(m).is_some()).count();
    let pick = QUALITY
        .iter()
        .find(|(m, _)| !timed.is_empty() && count(m) == timed.len())
        .or_else(|| QUALITY.iter().max_by_key(|(m, _)| count(m)))
        .filter(|(m, _)| count(m) > 0);
    let Some(&(metric, what)) = pick else {
        return no_data(
            path,
            QL_TITLE,
            "no run has both a read latency (E4) and a quality measure",
        );
    };
    let naming = Naming::of(summary);
    let series = group(
        &naming,
        timed.iter().copied().filter(|r| r.number(metric).is_some()),
    );
    let budgets: Vec<usize> = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|r| r.budget))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let radius = |b: usize| {
        let i = budgets.iter().position(|x| *x == b).unwrap_or(0);
        3 + 2 * i32::try_from(i.min(5)).unwrap_or(5)
    };
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().filter_map(|r| read_p50_ms(r)))
        .map(|x| x.max(1e-4))
        .collect();
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min) / 1.6;
    let hi = xs.iter().copied().fold(0.0f64, f64::max) * 1.6;

    let rows = series.len() + budgets.len() + 2;
    let (w, h) = (1000u32, height_for(rows, 560));
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(s)?;
    let body = root.titled(QL_TITLE, (FONT, 22).into_font()).map_err(s)?;
    let (plot, _) = body.split_horizontally(w - LEGEND_WIDTH);
    let (plot, _) = plot.split_vertically(500.min(h - 40));
    let mut chart = ChartBuilder::on(&plot)
        .margin(14)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.05f64)
        .map_err(s)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&|v| fmt_ms(*v))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .x_desc("read latency p50, ms (log scale; left is faster)")
        .y_desc(format!("{what} ↑"))
        .draw()
        .map_err(s)?;
    for (si, (_, runs)) in series.iter().enumerate() {
        let (color, m) = style_of(si);
        let pts: Vec<(f64, f64, usize)> = runs
            .iter()
            .filter_map(|r| Some((read_p50_ms(r)?.max(1e-4), r.number(metric)?, r.budget)))
            .collect();
        if pts.len() > 1 {
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    color.mix(0.45).stroke_width(1),
                ))
                .map_err(s)?;
        }
        for &(x, y, b) in &pts {
            mark(&root, m, chart.backend_coord(&(x, y)), radius(b), color)?;
        }
    }
    let mut entries: Vec<Entry> = series
        .iter()
        .enumerate()
        .map(|(i, (name, _))| Entry::series(name.clone(), i, None))
        .collect();
    let x = i32::try_from(w - LEGEND_WIDTH + 10).map_err(s)?;
    legend(&root, (x, 60), "substrate", &entries)?;
    let by = 60 + LEGEND_ROW * (i32::try_from(entries.len()).map_err(s)? + 2);
    entries = budgets
        .iter()
        .map(|b| Entry {
            label: format!("budget {b}"),
            color: RGBColor(90, 90, 90),
            marker: Some((Marker::Circle, radius(*b))),
            line: None,
            swatch: false,
        })
        .collect();
    legend(&root, (x, by), "marker size", &entries)?;
    root.present().map_err(s)
}

/// The four fates every gold turn has one of, with their colours.
const FATES: [(&str, &str, RGBColor); 4] = [
    ("whole", "shown whole", RGBColor(44, 160, 44)),
    ("part_only", "shown in part only", RGBColor(152, 223, 138)),
    (
        "record_only",
        "only inside an LLM record",
        RGBColor(255, 187, 120),
    ),
    ("absent", "not shown", RGBColor(199, 199, 199)),
];

const FATES_TITLE: &str = "Where gold evidence turns went";

/// Draws the evidence fates to `path`: one horizontal bar per substrate ×
/// budget, split into the shares of gold turns shown whole, shown in part
/// only, present only inside an LLM-written record, and not shown
/// (`evidence_fates` of the summary), grouped by budget as the report's
/// tables are.
pub fn fates_svg(summary: &Summary, path: &Path) -> Result<()> {
    draw_fates(summary, path).map_err(plot_err(path))
}

fn draw_fates(summary: &Summary, path: &Path) -> Drawn {
    let naming = Naming::of(summary);
    let mut rows: Vec<(&RunSummary, &serde_json::Map<String, serde_json::Value>)> = summary
        .runs
        .iter()
        .filter_map(|r| Some((r, r.metrics.get("evidence_fates")?.as_object()?)))
        .collect();
    if rows.is_empty() {
        return no_data(
            path,
            FATES_TITLE,
            "no run has gold evidence (evidence_fates is null everywhere)",
        );
    }
    // Stable: substrates keep their run order within a budget.
    rows.sort_by(|a, b| (&a.0.dataset, a.0.budget, a.0.k).cmp(&(&b.0.dataset, b.0.budget, b.0.k)));
    let labels: Vec<String> = rows
        .iter()
        .map(|(r, _)| format!("{} · budget {}", naming.series(r), r.budget))
        .collect();
    let label_w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(10) as u32 * 7 + 24;
    let label_w = label_w.clamp(120, 420);
    let n = rows.len();
    let (w, h) = (label_w + 560 + LEGEND_WIDTH, (120 + n * 26).max(300) as u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(s)?;
    let body = root
        .titled(FATES_TITLE, (FONT, 22).into_font())
        .map_err(s)?;
    let (plot, _) = body.split_horizontally(w - LEGEND_WIDTH);
    let nf = n as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0.0..1.0f64, 0.0..nf)
        .map_err(s)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(6)
        .x_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .x_desc("share of gold evidence turns")
        .draw()
        .map_err(s)?;
    for (i, ((r, fates), label)) in rows.iter().zip(&labels).enumerate() {
        // First row at the top.
        let top = nf - i as f64;
        let (y0, y1) = (top - 0.15, top - 0.85);
        let mut x = 0.0f64;
        for (key, _, color) in FATES {
            let share = fates
                .get(key)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0)
                .max(0.0)
                .min((1.0 - x).max(0.0));
            if share > 0.0 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x, y0), (x + share, y1)],
                        color.filled(),
                    )))
                    .map_err(s)?;
            }
            if key == "whole" && share >= 0.08 {
                let (px, py) = chart.backend_coord(&(x + share, top - 0.5));
                root.draw(&Text::new(
                    format!("{:.0}%", share * 100.0),
                    (px - 4, py),
                    text_style(12, HPos::Right),
                ))
                .map_err(s)?;
            }
            x += share;
        }
        let (px, py) = chart.backend_coord(&(0.0, top - 0.5));
        root.draw(&Text::new(
            label.clone(),
            (px - 8, py),
            text_style(13, HPos::Right),
        ))
        .map_err(s)?;
        // A rule between budgets.
        if i > 0 && rows[i - 1].0.budget != r.budget {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, top), (1.0, top)],
                    BLACK.stroke_width(1),
                )))
                .map_err(s)?;
        }
    }
    let entries: Vec<Entry> = FATES
        .iter()
        .map(|(_, label, color)| Entry {
            label: (*label).to_string(),
            color: *color,
            marker: None,
            line: None,
            swatch: true,
        })
        .collect();
    let x = i32::try_from(w - LEGEND_WIDTH + 10).map_err(s)?;
    legend(&root, (x, 60), "fate of a gold turn", &entries)?;
    root.present().map_err(s)
}

/// Draws all three charts into `dir` ([`COVERAGE_SVG`],
/// [`QUALITY_LATENCY_SVG`], [`FATES_SVG`]).
pub fn write_all(dir: &Path, summary: &Summary) -> Result<()> {
    coverage_svg(summary, &dir.join(COVERAGE_SVG))?;
    quality_latency_svg(summary, &dir.join(QUALITY_LATENCY_SVG))?;
    fates_svg(summary, &dir.join(FATES_SVG))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    /// A run of `name` at `budget` with coverage, latency and fates.
    fn run(name: &str, budget: usize, cover: f64, ms: f64) -> RunSummary {
        let mut m = Map::new();
        m.insert("evidence_coverage".into(), json!(cover));
        m.insert("evidence_partial".into(), json!((cover + 0.1).min(1.0)));
        m.insert("answer_recall".into(), json!(cover * 0.9));
        m.insert(
            "E4".into(),
            json!({"mean": ms / 900.0, "p50": ms / 1000.0, "p90": ms / 500.0}),
        );
        m.insert(
            "evidence_fates".into(),
            json!({"gold": 20, "whole": cover, "part_only": 0.1 * (1.0 - cover),
                   "record_only": 0.0, "absent": 0.9 * (1.0 - cover)}),
        );
        RunSummary {
            substrate: name.into(),
            family: "Flat".into(),
            dataset: "synthetic".into(),
            budget,
            k: 10,
            metrics: m,
            per_category: Default::default(),
        }
    }

    /// Three substrates × three budgets; `m1` and `m2` equal everywhere (the
    /// overlap the old scatter's labels drowned in).
    fn summary() -> Summary {
        let mut runs = Vec::new();
        for (i, b) in [1024, 2048, 4096].into_iter().enumerate() {
            let f = i as f64;
            runs.push(run("m1", b, 0.4 + 0.1 * f, 0.5));
            runs.push(run("m2", b, 0.4 + 0.1 * f, 0.5));
            runs.push(run("flexa:ranking=hybrid", b, 0.6 + 0.1 * f, 20.0 + f));
        }
        Summary {
            runs,
            ..Summary::default()
        }
    }

    /// `(x, y, text)` of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<(String, String, String)> {
        let attr = |tag: &str, name: &str| {
            let key = format!(" {name}=\"");
            let start = tag.find(&key)? + key.len();
            let len = tag[start..].find('"')?;
            Some(tag[start..start + len].to_string())
        };
        svg.split("<text")
            .skip(1)
            .filter_map(|rest| {
                let close = rest.find('>')?;
                let end = rest.find("</text>")?;
                let tag = &rest[..close];
                Some((
                    attr(tag, "x")?,
                    attr(tag, "y")?,
                    rest[close + 1..end].trim().to_string(),
                ))
            })
            .collect()
    }

    /// Draws with `draw`, then checks the SVG is well formed enough, holds
    /// each of `want` as a text, and no two texts share a position.
    fn check(draw: fn(&Summary, &Path) -> Result<()>, s: &Summary, want: &[&str]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        draw(s, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        let ts = texts(&svg);
        for w in want {
            assert!(
                ts.iter()
                    .any(|t| t.2 == *w || t.2.starts_with(&format!("{w} ("))),
                "no text {w:?} in {:?}",
                ts.iter().map(|t| &t.2).collect::<Vec<_>>()
            );
        }
        let mut seen = std::collections::BTreeMap::new();
        for (x, y, t) in &ts {
            if let Some(other) = seen.insert((x.clone(), y.clone()), t.clone()) {
                panic!("{other:?} and {t:?} both at ({x}, {y})");
            }
        }
        svg
    }

    const NAMES: [&str; 3] = ["m1", "m2", "flexa:ranking=hybrid"];

    #[test]
    fn coverage_has_a_legend_entry_per_substrate_and_budget_labels() {
        let mut want = NAMES.to_vec();
        want.extend([
            "shown whole",
            "shown whole or in part",
            "token budget",
            "share of gold evidence turns",
            "1024",
            "2048",
            "4096",
        ]);
        check(coverage_svg, &summary(), &want);
    }

    #[test]
    fn a_substrate_at_one_budget_is_a_level_line() {
        let mut s = summary();
        s.runs.push(run("m10", 2048, 0.3, 1.0));
        let svg = check(coverage_svg, &s, &["m10 (one budget)"]);
        assert!(svg.contains("m10 (one budget)"));
    }

    #[test]
    fn quality_latency_says_its_measure_and_keys_budgets() {
        let mut want = NAMES.to_vec();
        want.extend([
            "answer recall (gold answer in the memory) ↑",
            "read latency p50, ms (log scale; left is faster)",
            "budget 1024",
            "budget 4096",
        ]);
        check(quality_latency_svg, &summary(), &want);
        // Without answer recall on every run, whole-or-part coverage.
        let mut s = summary();
        s.runs[0]
            .metrics
            .insert("answer_recall".into(), json!(null));
        check(
            quality_latency_svg,
            &s,
            &["evidence shown whole or in part ↑"],
        );
    }

    #[test]
    fn fates_has_a_bar_per_run_and_a_legend() {
        let want = [
            "m1 · budget 1024",
            "flexa:ranking=hybrid · budget 4096",
            "shown whole",
            "shown in part only",
            "only inside an LLM record",
            "not shown",
            "share of gold evidence turns",
        ];
        check(fates_svg, &summary(), &want);
    }

    #[test]
    fn an_empty_summary_says_no_data() {
        let s = Summary::default();
        for draw in [coverage_svg, quality_latency_svg, fates_svg] {
            let svg = check(draw, &s, &[]);
            assert!(svg.contains("no data: "), "{svg}");
        }
        // Runs with nothing to draw (no gold evidence, no latency) too.
        let mut bare = run("m1", 1024, 0.5, 1.0);
        bare.metrics.clear();
        let s = Summary {
            runs: vec![bare],
            ..Summary::default()
        };
        for draw in [coverage_svg, quality_latency_svg, fates_svg] {
            assert!(check(draw, &s, &[]).contains("no data: "));
        }
    }

    #[test]
    fn write_all_draws_three_files() {
        let dir = tempfile::tempdir().unwrap();
        write_all(dir.path(), &summary()).unwrap();
        for f in [COVERAGE_SVG, QUALITY_LATENCY_SVG, FATES_SVG] {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        let err = write_all(&dir.path().join("missing/dir"), &summary()).unwrap_err();
        assert!(matches!(err, BenchError::Plot { .. }), "{err}");
    }
}
