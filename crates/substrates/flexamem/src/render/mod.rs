//! Rendering memory for one call (Section 3, Algorithm 1): the budget
//! arithmetic, the recent window, the timeline with merges, then unit or piece
//! recovery, and the final fit. A render is a pure function of the store, its
//! caches and the query; when it needs something the caches lack (a vector, a
//! merged record written by the LLM) it returns [`Outcome::Need`] and the
//! caller fetches it and renders again, so no lock is held across a model call
//! and the result is deterministic for the same store, query and budget.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use submem_core::{cosine, Query, ReadTrace, Recall, Regime, Resolution, SourceHit, TokenCounter};
use submem_kit::count::SegmentCounts;
use submem_kit::fit::{fit_or_degrade, pick_pieces, Costs};
use submem_kit::record::rule_record;
use submem_kit::text::query_terms;

use crate::rank::{best_first, rank_pieces};
use crate::record::rule_merge;
use crate::state::{record_line, MergeKey, NsState, PieceKey, Unit};
use crate::timeline::{merge_threshold, Entry, Timeline};
use crate::{FlexaConfig, RecoveryMode};

mod pieces;
mod units;

/// Header line before the pieces of piece recovery.
pub const PIECES_HEADER: &str = "Excerpts from the history (best matches, in time order):";

/// Tokens of a render by what they show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenBreakdown {
    /// Records and merged records in the timeline.
    pub record: usize,
    /// Excerpts of recovered units (their record included).
    pub excerpt: usize,
    /// Raw text of recovered units (or the whole history before memory starts).
    pub raw: usize,
    /// Pieces of piece recovery (with their header and marks).
    pub pieces: usize,
    /// The recent window (not part of memory).
    pub window: usize,
}

/// Share of the memory tokens (window excluded) on each resolution, the
/// measure of the paper's Figure 6.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Shares {
    /// Records.
    pub record: f64,
    /// Excerpts.
    pub excerpt: f64,
    /// Raw text.
    pub raw: f64,
    /// Pieces.
    pub pieces: f64,
}

impl TokenBreakdown {
    /// The shares of memory tokens.
    pub fn shares(&self) -> Shares {
        let total = (self.record + self.excerpt + self.raw + self.pieces) as f64;
        if total == 0.0 {
            return Shares::default();
        }
        Shares {
            record: self.record as f64 / total,
            excerpt: self.excerpt as f64 / total,
            raw: self.raw as f64 / total,
            pieces: self.pieces as f64 / total,
        }
    }
}

/// A render with its accounting.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// What `Substrate::read` returns.
    pub recall: Recall,
    /// Tokens by resolution.
    pub tokens_by: TokenBreakdown,
    /// Shares of memory tokens by resolution.
    pub shares: Shares,
    /// The recovery mode used; `None` while the whole history still fits.
    pub mode: Option<RecoveryMode>,
    /// Merged records shown.
    pub merged_records: usize,
    /// Entries hidden for this call.
    pub hidden_entries: usize,
    /// The evidence trace asked for with [`Ctx::trace`] (piece recovery
    /// only; `None` otherwise).
    pub trace: Option<ReadTrace>,
}

/// Something to embed before rendering again.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedTarget {
    /// A piece vector.
    Piece(PieceKey),
    /// A provisional note vector of an unsealed unit.
    Provisional((u64, u32, usize)),
}

/// What a render lacks.
#[derive(Debug, Clone, Default)]
pub struct Need {
    /// Texts to embed.
    pub embed: Vec<(EmbedTarget, String)>,
    /// A merged record to write with the LLM: key and the texts merged.
    pub merge: Option<(MergeKey, Vec<String>)>,
}

/// A finished render and the cache updates it implies.
#[derive(Debug)]
pub struct Done {
    /// The render.
    pub rendered: Rendered,
    /// Rule merges written during the render (to cache and log).
    pub new_merges: Vec<(MergeKey, String)>,
    /// Merged records to adopt for the episode.
    pub adopt: Vec<MergeKey>,
    /// Merged records found in the cache.
    pub cache_hits: usize,
}

/// Result of one render attempt.
#[derive(Debug)]
pub enum Outcome {
    /// Rendered.
    Done(Box<Done>),
    /// Fetch these and render again.
    Need(Need),
}

/// Everything a render reads.
pub struct Ctx<'a> {
    /// The namespace.
    pub st: &'a NsState,
    /// Settings.
    pub cfg: &'a FlexaConfig,
    /// Token counter.
    pub counter: &'a dyn TokenCounter,
    /// The query.
    pub query: &'a Query,
    /// `φ(q)` for unit recovery and cosine scores.
    pub qvec: &'a [f32],
    /// The vector pieces are compared with (newest unit for agents).
    pub piece_qvec: &'a [f32],
    /// Whether merged records are written by the LLM (else by rule, inline).
    pub llm_merges: bool,
    /// Source ids to trace (see [`submem_core::trace`]); `None` for a plain
    /// render.
    pub trace: Option<&'a [String]>,
}

/// The past unit as a render sees it.
struct Past<'a> {
    u: &'a Unit,
    record: Cow<'a, str>,
    rec_tokens: usize,
    vec: &'a [f32],
    mergeable: bool,
}

/// The text of the newest unit for queries that do not carry one.
pub fn newest_unit_text(st: &NsState) -> Option<String> {
    st.units.values().next_back().map(Unit::raw)
}

/// Keeps the longest tail of `text` within `limit` tokens (cut at a line
/// start when possible, else inside the last line).
pub fn tail_within(text: &str, limit: usize, counter: &dyn TokenCounter) -> String {
    if counter.count(text) <= limit {
        return text.to_string();
    }
    let mut starts: Vec<usize> = vec![0];
    starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    // Tails shrink as the start moves on, so the first start whose tail fits
    // is found by bisection.
    let fits = |from: &str| counter.count(from) <= limit;
    let line = starts.partition_point(|&s| !fits(&text[s..]));
    if let Some(&start) = starts.get(line) {
        return text[start..].to_string();
    }
    let last = &text[starts[starts.len() - 1]..];
    let bounds: Vec<usize> = last.char_indices().map(|(i, _)| i).collect();
    let char_at = bounds.partition_point(|&b| !fits(&last[b..]));
    bounds
        .get(char_at)
        .map_or(String::new(), |&b| last[b..].trim_start().to_string())
}

fn event_hits(u: &Unit, score: f32, res: Resolution) -> impl Iterator<Item = SourceHit> + '_ {
    u.events.iter().map(move |e| SourceHit {
        source_id: e.event.source_id().to_string(),
        score,
        resolution: res,
    })
}

fn join(parts: &[String]) -> String {
    parts.join("\n")
}

/// [`join`], with the byte offset where each part starts: where a final
/// fit loop's recount may cut the text ([`SegmentCounts`]).
fn join_with_cuts(parts: &[String]) -> (String, Vec<usize>) {
    let mut text = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    let mut cuts = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        cuts.push(text.len());
        text.push_str(part);
    }
    (text, cuts)
}

/// Renders one call.
pub fn render(ctx: &Ctx<'_>) -> Outcome {
    let units: Vec<&Unit> = ctx
        .st
        .units
        .values()
        .filter(|u| !u.events.is_empty())
        .collect();
    let counter = ctx.counter;
    let allowance = ctx.query.allowance();
    if units.is_empty() {
        return done_plain(Recall::empty(), TokenBreakdown::default(), None);
    }
    // Before memory starts: the whole history, unchanged.
    let sep = counter.count("\n");
    let estimate: usize =
        units.iter().map(|u| u.raw_tokens).sum::<usize>() + sep * units.len().saturating_sub(1);
    if estimate <= allowance.saturating_mul(2) {
        let text = join(&units.iter().map(|u| u.raw()).collect::<Vec<_>>());
        let tokens = counter.count(&text);
        if tokens <= allowance {
            let sources = units
                .iter()
                .rev()
                .flat_map(|u| event_hits(u, 1.0, Resolution::Raw))
                .collect();
            let tb = TokenBreakdown {
                raw: tokens,
                ..Default::default()
            };
            return done_plain(Recall::new(text, tokens, sources), tb, None);
        }
    }
    // The recent window (agents only).
    let agentic = ctx.query.regime == Regime::Agentic;
    let quarter = ctx.query.budget / 4;
    let mut w_start = units.len();
    if agentic {
        w_start -= 1;
        let mut used = units[w_start].raw_tokens;
        while w_start > 0 && used + sep + units[w_start - 1].raw_tokens <= quarter {
            w_start -= 1;
            used += sep + units[w_start].raw_tokens;
        }
    }
    let mut window = join(&units[w_start..].iter().map(|u| u.raw()).collect::<Vec<_>>());
    let mut window_tokens = if window.is_empty() {
        0
    } else {
        counter.count(&window)
    };
    if window_tokens > allowance {
        window = tail_within(&window, allowance, counter);
        window_tokens = counter.count(&window);
    }
    let window_cost = if window.is_empty() {
        0
    } else {
        window_tokens + sep
    };
    let a = allowance.saturating_sub(window_cost);
    // Appendix A: merges are sized by the larger of the current allowance and
    // the one with a full recent window; when the newest unit alone exceeds a
    // quarter of the budget the current allowance is the smaller, and the
    // oldest records are hidden for this call to fit it.
    let a_ref = allowance.saturating_sub(quarter);
    let a_merge = if agentic { a.max(a_ref) } else { a };

    // Past units with their records and vectors.
    let mut need = Need::default();
    let mut past: Vec<Past<'_>> = Vec::with_capacity(w_start);
    for u in &units[..w_start] {
        match &u.note {
            Some(n) => past.push(Past {
                u,
                record: Cow::Borrowed(n.record.as_str()),
                rec_tokens: u.record_tokens,
                vec: &n.embedding,
                mergeable: true,
            }),
            None => {
                let raw = u.raw();
                let w = rule_record(&u.rule_lines(), &raw, ctx.cfg.record_words);
                let key = (u.id, u.version, u.events.len());
                let rec_tokens = counter.count(&record_line(&w.record));
                match ctx.st.provisional.get(&key) {
                    Some(v) => past.push(Past {
                        u,
                        record: Cow::Owned(w.record),
                        rec_tokens,
                        vec: v,
                        mergeable: false,
                    }),
                    None => need.embed.push((
                        EmbedTarget::Provisional(key),
                        format!("{}\n{}", w.record, w.fields.joined()),
                    )),
                }
            }
        }
    }
    if !need.embed.is_empty() {
        return Outcome::Need(need);
    }
    let mode = match ctx.cfg.mode {
        RecoveryMode::Auto if agentic => RecoveryMode::Unit,
        RecoveryMode::Auto => RecoveryMode::Piece,
        m => m,
    };
    let r = Renderer {
        ctx,
        past,
        sep,
        allowance,
        a,
        a_merge,
        window,
        window_tokens,
    };
    r.run(mode)
}

fn done_plain(recall: Recall, tb: TokenBreakdown, mode: Option<RecoveryMode>) -> Outcome {
    Outcome::Done(Box::new(Done {
        rendered: Rendered {
            recall,
            shares: tb.shares(),
            tokens_by: tb,
            mode,
            merged_records: 0,
            hidden_entries: 0,
            trace: None,
        },
        new_merges: Vec::new(),
        adopt: Vec::new(),
        cache_hits: 0,
    }))
}

struct Renderer<'c, 'a> {
    ctx: &'c Ctx<'a>,
    past: Vec<Past<'a>>,
    sep: usize,
    allowance: usize,
    a: usize,
    a_merge: usize,
    window: String,
    window_tokens: usize,
}

/// The timeline after merging, with the merged lines by covered range.
struct Built<'t> {
    tl: Timeline<'t>,
    merged: HashMap<(usize, usize), MergeKey>,
    overlay: HashMap<MergeKey, String>,
    new_merges: Vec<(MergeKey, String)>,
    cache_hits: usize,
}

/// A recovered unit's excerpt.
struct Excerpt {
    text: String,
    tokens: usize,
    events_shown: HashSet<u64>,
}

impl<'c, 'a> Renderer<'c, 'a> {
    /// Each past unit's index in `past`, by unit id.
    fn past_index(&self) -> HashMap<u64, usize> {
        self.past
            .iter()
            .enumerate()
            .map(|(i, p)| (p.u.id, i))
            .collect()
    }

    fn key(&self, first: usize, last: usize) -> MergeKey {
        self.past[first..=last]
            .iter()
            .map(|p| (p.u.id, p.u.version))
            .collect()
    }

    fn entry_text(&self, e: &Entry, b: &Built<'_>) -> String {
        if e.is_merged() {
            b.merged
                .get(&(e.first, e.last))
                .and_then(|k| {
                    self.ctx
                        .st
                        .merges
                        .get(k)
                        .map(|m| m.text.clone())
                        .or_else(|| b.overlay.get(k).cloned())
                })
                .unwrap_or_default()
        } else {
            record_line(&self.past[e.first].record)
        }
    }

    /// Builds the timeline: adopted merges first, then merges while the
    /// timeline is longer than `threshold`, then, for this call only, hides
    /// the oldest entries while it is longer than `hide_threshold` (the one
    /// place that rule lives: merges cannot always reach a tiny budget's
    /// share, and an agent's newest unit may crowd the window).
    fn build<'t>(
        &self,
        tl_tokens: &'t [usize],
        mergeable: &'t [bool],
        threshold: f64,
        hide_threshold: Option<f64>,
    ) -> Result<Built<'t>, Need> {
        let cfg = self.ctx.cfg;
        let st = self.ctx.st;
        let mut b = Built {
            tl: Timeline::new(tl_tokens, mergeable, cfg.merge_group, self.sep),
            merged: HashMap::new(),
            overlay: HashMap::new(),
            new_merges: Vec::new(),
            cache_hits: 0,
        };
        let mut adopted_phase = !st.adopted.is_empty();
        loop {
            let over = b.tl.tokens() as f64 > threshold;
            if !over && !adopted_phase {
                break;
            }
            let mut probe = b.tl.clone();
            let Some(plan) = probe.next_merge() else {
                break;
            };
            let key = self.key(plan.first(), plan.last());
            if adopted_phase && !st.adopted.contains(&key) {
                adopted_phase = false;
                continue;
            }
            b.tl = probe;
            let tokens = if let Some(m) = st.merges.get(&key) {
                b.cache_hits += 1;
                m.tokens
            } else if let Some(line) = b.overlay.get(&key) {
                self.ctx.counter.count(line)
            } else {
                let inputs: Vec<String> = plan
                    .children
                    .iter()
                    .map(|e| {
                        let t = self.entry_text(e, &b);
                        t.strip_prefix("- ").unwrap_or(&t).to_string()
                    })
                    .collect();
                if self.ctx.llm_merges {
                    return Err(Need {
                        embed: Vec::new(),
                        merge: Some((key, inputs)),
                    });
                }
                let text = rule_merge(&inputs, cfg.merged_record_words);
                let line = record_line(&text);
                let n = self.ctx.counter.count(&line);
                b.overlay.insert(key.clone(), line);
                b.new_merges.push((key.clone(), text));
                n
            };
            b.tl.apply(&plan, tokens);
            b.merged.insert((plan.first(), plan.last()), key);
        }
        if let Some(h) = hide_threshold {
            while b.tl.tokens() as f64 > h && b.tl.hide_oldest() {}
        }
        Ok(b)
    }

    fn run(self, mode: RecoveryMode) -> Outcome {
        let tl_tokens: Vec<usize> = self.past.iter().map(|p| p.rec_tokens).collect();
        let mergeable: Vec<bool> = self.past.iter().map(|p| p.mergeable).collect();
        if self.past.is_empty() {
            return self.finish_window_only();
        }
        match mode {
            RecoveryMode::Piece => self.piece_mode(&tl_tokens, &mergeable),
            _ => self.unit_mode(&tl_tokens, &mergeable),
        }
    }

    fn finish_window_only(&self) -> Outcome {
        let tb = TokenBreakdown {
            window: self.window_tokens,
            ..Default::default()
        };
        let text = self.window.clone();
        let tokens = self.ctx.counter.count(&text);
        let units: Vec<&Unit> = self.ctx.st.units.values().rev().collect();
        let sources = if tokens > 0 {
            units
                .iter()
                .flat_map(|u| event_hits(u, 1.0, Resolution::Raw))
                .collect()
        } else {
            Vec::new()
        };
        done_plain(
            Recall::new(text, tokens, sources),
            tb,
            Some(RecoveryMode::Unit),
        )
    }

    fn with_window(&self, memory: &str) -> String {
        match (memory.is_empty(), self.window.is_empty()) {
            (true, _) => self.window.clone(),
            (false, true) => memory.to_string(),
            (false, false) => format!("{memory}\n{}", self.window),
        }
    }

    /// A render of the timeline `b` whose shown entries are `entries`.
    fn done_timeline(
        &self,
        b: &Built<'_>,
        entries: &[Entry],
        recall: Recall,
        tb: TokenBreakdown,
        mode: RecoveryMode,
    ) -> Outcome {
        Outcome::Done(Box::new(Done {
            rendered: Rendered {
                recall,
                shares: tb.shares(),
                tokens_by: tb,
                mode: Some(mode),
                merged_records: entries.iter().filter(|e| e.is_merged()).count(),
                hidden_entries: b.tl.hidden().len(),
                trace: None,
            },
            new_merges: b.new_merges.clone(),
            adopt: self.adoptions(b, entries),
            cache_hits: b.cache_hits,
        }))
    }

    fn adoptions(&self, b: &Built<'_>, entries: &[Entry]) -> Vec<MergeKey> {
        if !(self.ctx.cfg.sticky_agent_merges && self.ctx.query.regime == Regime::Agentic) {
            return Vec::new();
        }
        entries
            .iter()
            .chain(b.tl.hidden())
            .filter(|e| e.is_merged())
            .filter_map(|e| b.merged.get(&(e.first, e.last)).cloned())
            .filter(|k| !self.ctx.st.adopted.contains(k))
            .collect()
    }

    fn push_window_sources(&self, sources: &mut Vec<SourceHit>) {
        if self.window.is_empty() {
            return;
        }
        let first_line = self.window.lines().next().unwrap_or("");
        let w_units: Vec<&Unit> = self
            .ctx
            .st
            .units
            .values()
            .filter(|u| !u.events.is_empty())
            .skip(self.past.len())
            .collect();
        for u in w_units.iter().rev() {
            for ev in u.events.iter().rev() {
                let res = if self.window.contains(&ev.text) {
                    Resolution::Raw
                } else if !first_line.is_empty() && ev.text.contains(first_line) {
                    Resolution::Excerpt
                } else {
                    continue;
                };
                sources.push(SourceHit {
                    source_id: ev.event.source_id().to_string(),
                    score: 1.0,
                    resolution: res,
                });
            }
        }
    }

    fn push_record_sources(
        &self,
        sources: &mut Vec<SourceHit>,
        entries: &[Entry],
        seen: &HashSet<usize>,
        c: &[f32],
    ) {
        let mut rec: Vec<usize> = entries
            .iter()
            .flat_map(|e| e.first..=e.last)
            .filter(|i| !seen.contains(i))
            .collect();
        rec.sort_by(|a, b| c[*b].total_cmp(&c[*a]).then(a.cmp(b)));
        for i in rec {
            sources.extend(event_hits(self.past[i].u, c[i], Resolution::Record));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;

    #[test]
    fn tail_keeps_the_newest_lines() {
        let c = WhitespaceCounter;
        assert_eq!(tail_within("a b\nc d\ne f", 4, &c), "c d\ne f");
        assert_eq!(tail_within("a b c d e f", 2, &c), "e f");
        assert_eq!(tail_within("x", 5, &c), "x");
        assert_eq!(tail_within("a b", 0, &c), "");
    }
}
