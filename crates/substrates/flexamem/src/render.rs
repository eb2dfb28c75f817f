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
use submem_core::{cosine, Query, Recall, Regime, Resolution, SourceHit, TokenCounter};

use crate::bm25::query_terms;
use crate::fit::{excerpt_text, fit_or_degrade, pick_pieces, Costs};
use crate::rank::rank_pieces;
use crate::record::{rule_merge, rule_record};
use crate::state::{record_line, MergeKey, NsState, PieceKey, Unit};
use crate::timeline::{merge_threshold, Entry, Timeline};
use crate::{FlexaConfig, RecoveryMode};

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
    // Smallest line start whose tail fits (counts shrink as the start moves on).
    let (mut lo, mut hi) = (0usize, starts.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if counter.count(&text[starts[mid]..]) <= limit {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if lo < starts.len() {
        return text[starts[lo]..].to_string();
    }
    let last = &text[starts[starts.len() - 1]..];
    let bounds: Vec<usize> = last.char_indices().map(|(i, _)| i).collect();
    let (mut lo, mut hi) = (0usize, bounds.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if counter.count(&last[bounds[mid]..]) <= limit {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    bounds
        .get(lo)
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
            return done_plain(
                Recall {
                    text,
                    tokens,
                    sources,
                    reader: None,
                },
                tb,
                None,
            );
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
    let newest_tokens = units.last().map_or(0, |u| u.raw_tokens);
    // Appendix A: merges are sized by the larger of the current allowance and
    // the one with a full recent window; the oldest records are hidden for
    // this call when the newest unit alone exceeds a quarter of the budget.
    let a_ref = allowance.saturating_sub(quarter);
    let a_merge = if agentic { a.max(a_ref) } else { a };
    let hide = agentic && newest_tokens > quarter;

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
        hide,
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
    hide: bool,
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
    /// timeline is longer than `threshold`, then hiding (agents).
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
            Recall {
                text,
                tokens,
                sources,
                reader: None,
            },
            tb,
            Some(RecoveryMode::Unit),
        )
    }

    fn cosines(&self) -> Vec<f32> {
        self.past
            .iter()
            .map(|p| cosine(self.ctx.qvec, p.vec))
            .collect()
    }

    /// Candidates ordered by g (Eq. 2): (past index, g).
    fn candidates(&self, c: &[f32]) -> Vec<(usize, f32)> {
        let cfg = self.ctx.cfg;
        let n = self.past.len();
        let mut order: Vec<usize> = (0..n).collect();
        let k = cfg.seeds.min(n);
        let cmp = |a: &usize, b: &usize| c[*b].total_cmp(&c[*a]).then(a.cmp(b));
        if k < n {
            order.select_nth_unstable_by(k, cmp);
            order.truncate(k);
        }
        order.sort_by(cmp);
        let index: HashMap<u64, usize> = self
            .past
            .iter()
            .enumerate()
            .map(|(i, p)| (p.u.id, i))
            .collect();
        let mut g: BTreeMap<usize, f32> = BTreeMap::new();
        let mut offer = |j: usize, v: f32| {
            let e = g.entry(j).or_insert(f32::NEG_INFINITY);
            if v > *e {
                *e = v;
            }
        };
        for &i in &order {
            offer(i, c[i]);
            let reach = cfg.lambda * c[i];
            if let Some(links) = self.ctx.st.links.get(&self.past[i].u.id) {
                for l in links {
                    if let Some(&j) = index.get(l) {
                        if j != i {
                            offer(j, reach);
                        }
                    }
                }
            }
            if i > 0 {
                offer(i - 1, reach);
            }
            if i + 1 < n {
                offer(i + 1, reach);
            }
        }
        let mut out: Vec<(usize, f32)> = g.into_iter().collect();
        out.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(c[b.0].total_cmp(&c[a.0]))
                .then(a.0.cmp(&b.0))
        });
        out
    }

    /// The excerpt of past unit `i` (None when no piece matches).
    fn excerpt(&self, i: usize, terms: &[String], need: &mut Need) -> Option<Excerpt> {
        let u = self.past[i].u;
        let pieces: Vec<(PieceKey, String, usize)> =
            u.pieces().map(|(k, p, t)| (k, p.shown(), t)).collect();
        let items: Vec<(PieceKey, f32)> = pieces
            .iter()
            .map(|(k, _, _)| (*k, self.ctx.st.bm25.score_doc(terms, *k)))
            .collect();
        let st = self.ctx.st;
        let look = |k: PieceKey| st.piece_vecs.get(&k).map(Vec::as_slice);
        let ranked = match rank_pieces(&items, self.ctx.cfg.ranking, &look, self.ctx.piece_qvec) {
            Ok(r) => r,
            Err(missing) => {
                for k in missing {
                    if let Some((_, text, _)) = pieces.iter().find(|(pk, _, _)| *pk == k) {
                        need.embed.push((EmbedTarget::Piece(k), text.clone()));
                    }
                }
                return None;
            }
        };
        let pos: HashMap<PieceKey, usize> = pieces
            .iter()
            .enumerate()
            .map(|(i, (k, _, _))| (*k, i))
            .collect();
        let ranked_idx: Vec<usize> = ranked
            .iter()
            .filter_map(|(k, _)| pos.get(k).copied())
            .collect();
        let toks: Vec<usize> = pieces.iter().map(|(_, _, t)| *t).collect();
        let chosen = pick_pieces(&ranked_idx, &toks, self.ctx.cfg.excerpt_tokens);
        if chosen.is_empty() {
            return None;
        }
        let texts: Vec<String> = pieces.iter().map(|(_, t, _)| t.clone()).collect();
        let text = excerpt_text(&record_line(&self.past[i].record), &texts, &chosen);
        let tokens = self.ctx.counter.count(&text);
        let events_shown = chosen.iter().map(|&c| pieces[c].0 .0).collect();
        Some(Excerpt {
            text,
            tokens,
            events_shown,
        })
    }

    fn unit_mode(&self, tl_tokens: &[usize], mergeable: &[bool]) -> Outcome {
        let cfg = self.ctx.cfg;
        let c = self.cosines();
        let cands = self.candidates(&c);
        let exc_query = match (&self.ctx.query.regime, &self.ctx.query.newest) {
            (Regime::Agentic, Some(n)) if !n.is_empty() => n.clone(),
            (Regime::Agentic, _) => newest_unit_text(self.ctx.st).unwrap_or_default(),
            _ => self.ctx.query.text.clone(),
        };
        let terms = query_terms(&exc_query);
        let mut need = Need::default();
        let excerpts: Vec<Option<Excerpt>> = cands
            .iter()
            .map(|(i, _)| self.excerpt(*i, &terms, &mut need))
            .collect();
        if !need.embed.is_empty() {
            return Outcome::Need(need);
        }
        // D with τ of the timeline before this call's merges (Algorithm 1, line 2):
        // records inside adopted merges no longer stand alone.
        let pre = match self.build(tl_tokens, mergeable, f64::INFINITY, None) {
            Ok(b) => b,
            Err(n) => return Outcome::Need(n),
        };
        let alone_pre = standalone(&pre.tl, self.past.len());
        let d: i64 = cands
            .iter()
            .map(|(i, _)| {
                self.past[*i].u.raw_tokens as i64
                    - tau(&alone_pre, *i) * self.past[*i].rec_tokens as i64
            })
            .sum();
        let d = d.max(0) as usize;
        let threshold = merge_threshold(self.a_merge, cfg.rho, d);
        let hide =
            (self.hide && self.a < self.a_merge).then(|| merge_threshold(self.a, cfg.rho, d));
        let mut built = match self.build(tl_tokens, mergeable, threshold, hide) {
            Ok(b) => b,
            Err(n) => return Outcome::Need(n),
        };
        let alone = standalone(&built.tl, self.past.len());
        let room = self.a as i64 - built.tl.tokens() as i64;
        let costs: Vec<Costs> = cands
            .iter()
            .zip(&excerpts)
            .map(|((i, _), e)| {
                let t = tau(&alone, *i) * self.past[*i].rec_tokens as i64;
                Costs {
                    excerpt: e.as_ref().map(|e| e.tokens as i64 - t),
                    raw: self.past[*i].u.raw_tokens as i64 - t,
                }
            })
            .collect();
        let (mut res, _) = fit_or_degrade(&costs, room);
        // Final loop: while the render is too long, drop the lowest-ranked
        // recovered unit, then (timeline alone too long) hide the oldest entry.
        loop {
            let (text, tb, shown) = self.assemble_units(&built, &cands, &res, &excerpts);
            let full = self.with_window(&text);
            let tokens = self.ctx.counter.count(&full);
            if tokens <= self.allowance {
                return self
                    .finish_units(&built, &cands, &res, &excerpts, &c, full, tokens, tb, shown);
            }
            if let Some(p) = res.iter().rposition(|r| *r != Resolution::Record) {
                res[p] = Resolution::Record;
            } else if !built.tl.hide_oldest() {
                let (full, tokens) = (self.with_window(""), 0);
                let tokens = if full.is_empty() {
                    tokens
                } else {
                    self.ctx.counter.count(&full)
                };
                let tb = TokenBreakdown {
                    window: self.window_tokens,
                    ..Default::default()
                };
                return self.finish_units(
                    &built,
                    &cands,
                    &res,
                    &excerpts,
                    &c,
                    full,
                    tokens,
                    tb,
                    Vec::new(),
                );
            }
        }
    }

    fn with_window(&self, memory: &str) -> String {
        match (memory.is_empty(), self.window.is_empty()) {
            (true, _) => self.window.clone(),
            (false, true) => memory.to_string(),
            (false, false) => format!("{memory}\n{}", self.window),
        }
    }

    /// M: the timeline with recovered units in place. Returns the text, the
    /// token breakdown and the entries shown.
    fn assemble_units(
        &self,
        b: &Built<'_>,
        cands: &[(usize, f32)],
        res: &[Resolution],
        excerpts: &[Option<Excerpt>],
    ) -> (String, TokenBreakdown, Vec<Entry>) {
        let mut recovered: BTreeMap<usize, usize> = BTreeMap::new(); // past idx -> candidate pos
        for (pos, ((i, _), r)) in cands.iter().zip(res).enumerate() {
            if *r != Resolution::Record {
                recovered.insert(*i, pos);
            }
        }
        let mut tb = TokenBreakdown {
            window: self.window_tokens,
            ..Default::default()
        };
        let mut parts: Vec<String> = Vec::new();
        let show = |i: usize, parts: &mut Vec<String>, tb: &mut TokenBreakdown| {
            let Some(&pos) = recovered.get(&i) else {
                return;
            };
            match res[pos] {
                Resolution::Raw => {
                    parts.push(self.past[i].u.raw());
                    tb.raw += self.past[i].u.raw_tokens;
                }
                Resolution::Excerpt => {
                    if let Some(e) = &excerpts[pos] {
                        parts.push(e.text.clone());
                        tb.excerpt += e.tokens;
                    }
                }
                Resolution::Record => {}
            }
        };
        // Units whose entries are hidden come first, in time order.
        let mut hidden_units: Vec<usize> =
            b.tl.hidden()
                .iter()
                .flat_map(|e| e.first..=e.last)
                .filter(|i| recovered.contains_key(i))
                .collect();
        hidden_units.sort_unstable();
        for i in hidden_units {
            show(i, &mut parts, &mut tb);
        }
        let entries: Vec<Entry> = b.tl.entries().collect();
        for e in &entries {
            if e.is_merged() {
                parts.push(self.entry_text(e, b));
                tb.record += e.tokens;
                for i in e.first..=e.last {
                    show(i, &mut parts, &mut tb);
                }
            } else if recovered.contains_key(&e.first) {
                show(e.first, &mut parts, &mut tb);
            } else {
                parts.push(record_line(&self.past[e.first].record));
                tb.record += e.tokens;
            }
        }
        (join(&parts), tb, entries)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_units(
        &self,
        b: &Built<'_>,
        cands: &[(usize, f32)],
        res: &[Resolution],
        excerpts: &[Option<Excerpt>],
        c: &[f32],
        text: String,
        tokens: usize,
        tb: TokenBreakdown,
        entries: Vec<Entry>,
    ) -> Outcome {
        let mut sources: Vec<SourceHit> = Vec::new();
        let mut seen: HashSet<usize> = HashSet::new();
        for ((i, g), (r, e)) in cands.iter().zip(res.iter().zip(excerpts)) {
            let u = self.past[*i].u;
            match r {
                Resolution::Raw => sources.extend(event_hits(u, *g, Resolution::Raw)),
                Resolution::Excerpt => {
                    let shown = e.as_ref().map(|e| &e.events_shown);
                    for ev in &u.events {
                        let res = if shown.is_some_and(|s| s.contains(&ev.seq)) {
                            Resolution::Excerpt
                        } else {
                            Resolution::Record
                        };
                        sources.push(SourceHit {
                            source_id: ev.event.source_id().to_string(),
                            score: *g,
                            resolution: res,
                        });
                    }
                }
                Resolution::Record => continue,
            }
            seen.insert(*i);
        }
        self.push_window_sources(&mut sources);
        self.push_record_sources(&mut sources, &entries, &seen, c);
        let merged_records = entries.iter().filter(|e| e.is_merged()).count();
        let adopt = self.adoptions(b, &entries);
        Outcome::Done(Box::new(Done {
            rendered: Rendered {
                recall: Recall {
                    text,
                    tokens,
                    sources,
                    reader: None,
                },
                shares: tb.shares(),
                tokens_by: tb,
                mode: Some(RecoveryMode::Unit),
                merged_records,
                hidden_entries: b.tl.hidden().len(),
            },
            new_merges: b.new_merges.clone(),
            adopt,
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

    fn piece_mode(&self, tl_tokens: &[usize], mergeable: &[bool]) -> Outcome {
        let cfg = self.ctx.cfg;
        let counter = self.ctx.counter;
        let c = self.cosines();
        let threshold = f64::from(cfg.rho) * self.a_merge as f64;
        let hide = (self.hide && self.a < self.a_merge).then(|| f64::from(cfg.rho) * self.a as f64);
        let mut built = match self.build(tl_tokens, mergeable, threshold, hide) {
            Ok(b) => b,
            Err(n) => return Outcome::Need(n),
        };
        // Rank every piece of every past unit.
        let qtext = match self.ctx.query.regime {
            Regime::Agentic => self.ctx.query.retrieval_text(),
            Regime::Conversational => self.ctx.query.text.clone(),
        };
        let terms = query_terms(&qtext);
        let past_of: HashMap<u64, usize> = self
            .past
            .iter()
            .enumerate()
            .map(|(i, p)| (p.u.id, i))
            .collect();
        let st = self.ctx.st;
        let all_past = self.past.len() == st.units.len();
        let in_past = |k: &PieceKey| {
            all_past
                || st
                    .seq_unit
                    .get(&k.0)
                    .is_some_and(|u| past_of.contains_key(u))
        };
        let scored: Vec<(PieceKey, f32)> = st
            .bm25
            .score(&terms)
            .into_iter()
            .filter(|(k, s)| *s > 0.0 && in_past(k))
            .collect();
        let lookup_piece = |k: PieceKey| -> Option<(usize, String, usize)> {
            let ui = *past_of.get(st.seq_unit.get(&k.0)?)?;
            let u = self.past[ui].u;
            let ev = u.events.iter().find(|e| e.seq == k.0)?;
            let p = ev.pieces.get(k.1 as usize)?;
            Some((
                ui,
                p.shown(),
                ev.piece_tokens.get(k.1 as usize).copied().unwrap_or(0),
            ))
        };
        let look = |k: PieceKey| st.piece_vecs.get(&k).map(Vec::as_slice);
        let header_cost = counter.count(PIECES_HEADER) + self.sep;
        let r0 = (self.a as i64 - built.tl.tokens() as i64 - header_cost as i64 - self.sep as i64)
            .max(0) as usize;
        // BM25 ranks only the best pieces: the top `want` by score (and every
        // piece tied with the last of them), widened until R0 is filled.
        let mut want = 256usize;
        let (chosen, piece_info) = loop {
            let items: Vec<(PieceKey, f32)> = if cfg.ranking == crate::Ranking::Bm25 {
                top_with_ties(&scored, want)
            } else {
                let scores: HashMap<PieceKey, f32> = scored.iter().copied().collect();
                self.past
                    .iter()
                    .flat_map(|p| p.u.pieces().map(|(k, _, _)| k))
                    .map(|k| (k, scores.get(&k).copied().unwrap_or(0.0)))
                    .collect()
            };
            let complete = items.len() >= scored.len() || cfg.ranking != crate::Ranking::Bm25;
            let ranked = match rank_pieces(&items, cfg.ranking, &look, self.ctx.piece_qvec) {
                Ok(r) => r,
                Err(missing) => {
                    let embed = missing
                        .into_iter()
                        .filter_map(|k| lookup_piece(k).map(|(_, t, _)| (EmbedTarget::Piece(k), t)))
                        .collect();
                    return Outcome::Need(Need { embed, merge: None });
                }
            };
            // Take pieces in rank order while their total fits R0.
            let mut chosen: Vec<(PieceKey, f32)> = Vec::new();
            let mut info: HashMap<PieceKey, (usize, String, usize)> = HashMap::new();
            let mut total = 0usize;
            let mut full = false;
            for (k, s) in &ranked {
                let Some(i) = lookup_piece(*k) else { continue };
                if total + i.2 + self.sep > r0 {
                    full = true;
                    break;
                }
                total += i.2 + self.sep;
                info.insert(*k, i);
                chosen.push((*k, *s));
            }
            if full || complete {
                break (chosen, info);
            }
            want *= 4;
        };
        let mut chosen = chosen;
        loop {
            let (text, tb, entries) = self.assemble_pieces(&built, &chosen, &piece_info);
            let full = self.with_window(&text);
            let tokens = counter.count(&full);
            if tokens <= self.allowance {
                return self.finish_pieces(&built, &chosen, &c, full, tokens, tb, &entries);
            }
            if chosen.is_empty() {
                if !built.tl.hide_oldest() {
                    let full = self.window.clone();
                    let tokens = counter.count(&full);
                    let tb = TokenBreakdown {
                        window: self.window_tokens,
                        ..Default::default()
                    };
                    return self.finish_pieces(&built, &[], &c, full, tokens, tb, &[]);
                }
                continue;
            }
            // Render again with fewer pieces: drop the lowest-ranked ones whose
            // tokens cover the excess.
            let mut excess = tokens - self.allowance;
            while let Some((k, _)) = chosen.pop() {
                let t = piece_info.get(&k).map_or(1, |i| i.2 + self.sep).max(1);
                if t >= excess {
                    break;
                }
                excess -= t;
            }
        }
    }

    fn assemble_pieces(
        &self,
        b: &Built<'_>,
        chosen: &[(PieceKey, f32)],
        info: &HashMap<PieceKey, (usize, String, usize)>,
    ) -> (String, TokenBreakdown, Vec<Entry>) {
        let mut tb = TokenBreakdown {
            window: self.window_tokens,
            ..Default::default()
        };
        let entries: Vec<Entry> = b.tl.entries().collect();
        let mut parts: Vec<String> = Vec::new();
        for e in &entries {
            parts.push(self.entry_text(e, b));
            tb.record += e.tokens;
        }
        if !chosen.is_empty() {
            let mut by_unit: BTreeMap<usize, Vec<PieceKey>> = BTreeMap::new();
            for (k, _) in chosen {
                if let Some((ui, _, _)) = info.get(k) {
                    by_unit.entry(*ui).or_default().push(*k);
                }
            }
            let mut block = vec![PIECES_HEADER.to_string()];
            for (ui, mut keys) in by_unit {
                keys.sort_unstable();
                let all: Vec<(PieceKey, String)> = self.past[ui]
                    .u
                    .pieces()
                    .map(|(k, p, _)| (k, p.shown()))
                    .collect();
                let idx: Vec<usize> = keys
                    .iter()
                    .filter_map(|k| all.iter().position(|(a, _)| a == k))
                    .collect();
                let texts: Vec<String> = all.into_iter().map(|(_, t)| t).collect();
                block.push(excerpt_text("", &texts, &idx));
            }
            let block = join(&block);
            tb.pieces = self.ctx.counter.count(&block);
            parts.push(block);
        }
        (join(&parts), tb, entries)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_pieces(
        &self,
        b: &Built<'_>,
        chosen: &[(PieceKey, f32)],
        c: &[f32],
        text: String,
        tokens: usize,
        tb: TokenBreakdown,
        entries: &[Entry],
    ) -> Outcome {
        let st = self.ctx.st;
        let mut sources: Vec<SourceHit> = Vec::new();
        let mut shown_events: Vec<(u64, f32)> = Vec::new();
        for (k, s) in chosen {
            if !shown_events.iter().any(|(e, _)| *e == k.0) {
                shown_events.push((k.0, *s));
            }
        }
        let chosen_set: HashSet<PieceKey> = chosen.iter().map(|(k, _)| *k).collect();
        for (seq, s) in &shown_events {
            let Some(u) = st.seq_unit.get(seq).and_then(|u| st.units.get(u)) else {
                continue;
            };
            let Some(ev) = u.events.iter().find(|e| e.seq == *seq) else {
                continue;
            };
            let all = (0..ev.pieces.len() as u32).all(|i| chosen_set.contains(&(*seq, i)));
            sources.push(SourceHit {
                source_id: ev.event.source_id().to_string(),
                score: *s,
                resolution: if all {
                    Resolution::Raw
                } else {
                    Resolution::Excerpt
                },
            });
        }
        self.push_window_sources(&mut sources);
        let shown: HashSet<&str> = sources.iter().map(|s| s.source_id.as_str()).collect();
        let mut rec: Vec<usize> = entries.iter().flat_map(|e| e.first..=e.last).collect();
        rec.sort_by(|a, b| c[*b].total_cmp(&c[*a]).then(a.cmp(b)));
        let mut extra = Vec::new();
        for i in rec {
            for hit in event_hits(self.past[i].u, c[i], Resolution::Record) {
                if !shown.contains(hit.source_id.as_str()) {
                    extra.push(hit);
                }
            }
        }
        sources.extend(extra);
        let merged_records = entries.iter().filter(|e| e.is_merged()).count();
        let adopt = self.adoptions(b, entries);
        Outcome::Done(Box::new(Done {
            rendered: Rendered {
                recall: Recall {
                    text,
                    tokens,
                    sources,
                    reader: None,
                },
                shares: tb.shares(),
                tokens_by: tb,
                mode: Some(RecoveryMode::Piece),
                merged_records,
                hidden_entries: b.tl.hidden().len(),
            },
            new_merges: b.new_merges.clone(),
            adopt,
            cache_hits: b.cache_hits,
        }))
    }
}

/// The `n` best positive items by score, plus every item tied with the
/// last of them.
fn top_with_ties(items: &[(PieceKey, f32)], n: usize) -> Vec<(PieceKey, f32)> {
    if items.len() <= n {
        return items.to_vec();
    }
    let mut v = items.to_vec();
    let (_, nth, _) = v.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1));
    let cut = nth.1;
    items.iter().copied().filter(|(_, s)| *s >= cut).collect()
}

/// Which past units have a record standing alone in the visible timeline.
fn standalone(tl: &Timeline<'_>, n: usize) -> Vec<bool> {
    let mut out = vec![false; n];
    for e in tl.entries() {
        if !e.is_merged() {
            if let Some(x) = out.get_mut(e.first) {
                *x = true;
            }
        }
    }
    out
}

fn tau(alone: &[bool], i: usize) -> i64 {
    i64::from(alone.get(i).copied().unwrap_or(false))
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
