//! Piece recovery (Section 3.4): every piece ranked against the question,
//! shown after the timeline grouped by unit with omission marks.

use super::*;
use crate::pieces::{run_text, Piece};
use rustc_hash::FxHashMap;
use submem_core::EvidenceTrace;
use submem_kit::fit::{excerpt_runs, OMISSION};

impl Renderer<'_, '_> {
    pub(super) fn piece_mode(&self, tl_tokens: &[usize], mergeable: &[bool]) -> Outcome {
        let cfg = self.ctx.cfg;
        let counter = self.ctx.counter;
        let c = self.cosines();
        // ρ and ranking of piece recovery (the config's settings over the
        // variant's defaults).
        let (rho, piece_ranking) = (cfg.piece_recovery_rho(), cfg.piece_recovery_ranking());
        let threshold = f64::from(rho) * self.a_merge as f64;
        // The timeline's share is ρ·A. Merges alone cannot always reach it (a
        // merged record may be up to 150 words, longer than ρ·A at small
        // budgets): `build` then hides the oldest records for this call, so
        // the pieces, which hold the verbatim evidence, keep at least (1 − ρ)·A.
        let hide = Some(f64::from(rho) * self.a as f64);
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
        let past_of = self.past_index();
        let st = self.ctx.st;
        let all_past = self.past.len() == st.units.len();
        let in_past = |k: &PieceKey| {
            all_past
                || st
                    .seq_unit
                    .get(&k.0)
                    .is_some_and(|u| past_of.contains_key(u))
        };
        // Dense ranking reads no BM25 score: skip scoring every piece.
        let dense = piece_ranking == crate::Ranking::Dense;
        let scored: Vec<(PieceKey, f32)> = if dense {
            Vec::new()
        } else {
            st.bm25
                .score(&terms)
                .into_iter()
                .filter(|(k, s)| *s > 0.0 && in_past(k))
                .collect()
        };
        // A past piece's unit (its index in `past`), the piece and its tokens.
        let lookup_piece = |k: PieceKey| -> Option<(usize, &Piece, usize)> {
            let ui = *past_of.get(st.seq_unit.get(&k.0)?)?;
            let ev = self.past[ui].u.events.iter().find(|e| e.seq == k.0)?;
            let piece = ev.pieces.get(k.1 as usize)?;
            Some((
                ui,
                piece,
                ev.piece_tokens.get(k.1 as usize).copied().unwrap_or(0),
            ))
        };
        let look = |k: PieceKey| st.piece_vecs.get(&k);
        let header_cost = counter.count(PIECES_HEADER) + self.sep;
        let r0 = (self.a as i64 - built.tl.tokens() as i64 - header_cost as i64 - self.sep as i64)
            .max(0) as usize;
        // BM25 ranks only the best pieces: the top `want` by score (and every
        // piece tied with the last of them), widened until R0 is filled. A
        // trace needs the whole ranking.
        let mut want = if self.ctx.trace.is_some() {
            usize::MAX
        } else {
            256usize
        };
        // Dense ranking over pieces that all have vectors: one pass over the
        // vector rows instead of a lookup per piece, and only the best `want`
        // of them ordered.
        let past_pieces = || {
            self.past
                .iter()
                .map(|p| p.u.pieces().count())
                .sum::<usize>()
        };
        let dense_rows = dense
            .then(|| st.piece_vecs.cosines(self.ctx.piece_qvec, |k| in_past(k)))
            .filter(|rows| rows.len() == past_pieces());
        let (chosen, piece_info, ranking) = loop {
            let (ranked, complete) = if let Some(rows) = &dense_rows {
                (Ok(best_first(rows, want)), want >= rows.len())
            } else {
                let items: Vec<(PieceKey, f32)> = if piece_ranking == crate::Ranking::Bm25 {
                    top_with_ties(&scored, want)
                } else if dense {
                    self.past
                        .iter()
                        .flat_map(|p| p.u.pieces().map(|(k, _, _)| (k, 0.0)))
                        .collect()
                } else {
                    let scores: HashMap<PieceKey, f32> = scored.iter().copied().collect();
                    self.past
                        .iter()
                        .flat_map(|p| p.u.pieces().map(|(k, _, _)| k))
                        .map(|k| (k, scores.get(&k).copied().unwrap_or(0.0)))
                        .collect()
                };
                let complete = items.len() >= scored.len() || piece_ranking != crate::Ranking::Bm25;
                (
                    rank_pieces(&items, piece_ranking, &look, self.ctx.piece_qvec),
                    complete,
                )
            };
            let ranked = match ranked {
                Ok(r) => r,
                Err(missing) => {
                    let embed = missing
                        .into_iter()
                        .filter_map(|k| {
                            lookup_piece(k)
                                .map(|(_, piece, _)| (EmbedTarget::Piece(k), piece.shown()))
                        })
                        .collect();
                    return Outcome::Need(Need { embed, merge: None });
                }
            };
            // Take pieces in rank order while their total fits R0.
            let mut chosen: Vec<(PieceKey, f32)> = Vec::new();
            let mut info: FxHashMap<PieceKey, (usize, usize)> = FxHashMap::default();
            let mut total = 0usize;
            let mut full = false;
            for (k, s) in &ranked {
                let Some((ui, _, tokens)) = lookup_piece(*k) else {
                    continue;
                };
                if total + tokens + self.sep > r0 {
                    full = true;
                    break;
                }
                total += tokens + self.sep;
                info.insert(*k, (ui, tokens));
                chosen.push((*k, *s));
            }
            if full || complete {
                break (chosen, info, ranked);
            }
            want = want.saturating_mul(4);
        };
        let trace = self.ctx.trace.map(|ids| {
            let room_all = (self.a as i64 - header_cost as i64 - self.sep as i64).max(0) as usize;
            self.trace_pieces(ids, &ranking, r0, room_all)
        });
        let mut chosen = chosen;
        // A retry drops a few pieces: only the unit blocks they change are
        // counted again.
        let mut counts = SegmentCounts::new(counter);
        loop {
            let (text, mut cuts, tb, entries) = self.assemble_pieces(&built, &chosen, &piece_info);
            let full = self.with_window(&text);
            cuts.push(text.len() + 1);
            let tokens = counts.count(&full, &cuts);
            if tokens <= self.allowance {
                // The pieces' share is what the render holds beyond the
                // timeline and the window: one count of the whole text, not a
                // second count of the (8k-token) block.
                let mut tb = tb;
                if !chosen.is_empty() {
                    tb.pieces = tokens.saturating_sub(tb.record + tb.window);
                }
                let mut out = self.finish_pieces(&built, &chosen, &c, full, tokens, tb, &entries);
                if let Outcome::Done(done) = &mut out {
                    done.rendered.trace = trace;
                }
                return out;
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
                let t = piece_info.get(&k).map_or(1, |i| i.1 + self.sep).max(1);
                if t >= excess {
                    break;
                }
                excess -= t;
            }
        }
    }

    /// The timeline's entries, then the chosen pieces grouped by unit, one
    /// line apart; with the byte offsets where each entry, the pieces block
    /// and each unit's lines start (where a recount may cut the text).
    fn assemble_pieces(
        &self,
        b: &Built<'_>,
        chosen: &[(PieceKey, f32)],
        info: &FxHashMap<PieceKey, (usize, usize)>,
    ) -> (String, Vec<usize>, TokenBreakdown, Vec<Entry>) {
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
        let (mut text, mut cuts) = join_with_cuts(&parts);
        if !chosen.is_empty() {
            let mut by_unit: BTreeMap<usize, Vec<PieceKey>> = BTreeMap::new();
            for (k, _) in chosen {
                if let Some((ui, _)) = info.get(k) {
                    by_unit.entry(*ui).or_default().push(*k);
                }
            }
            if !parts.is_empty() {
                text.push('\n');
            }
            cuts.push(text.len());
            text.push_str(PIECES_HEADER);
            let mut last_is_mark = false;
            for (ui, mut keys) in by_unit {
                keys.sort_unstable();
                let block = self.unit_runs(ui, &keys, "");
                let mut first_line = true;
                for line in block.split('\n') {
                    // Adjacent groups would show two omission marks in a
                    // row: keep one.
                    if line == OMISSION && last_is_mark {
                        continue;
                    }
                    text.push('\n');
                    if first_line {
                        cuts.push(text.len());
                        first_line = false;
                    }
                    text.push_str(line);
                    last_is_mark = line == OMISSION;
                }
            }
        }
        (text, cuts, tb, entries)
    }

    /// The trace of `ids` against the full piece `ranking`: each event's best
    /// rank and the room its last piece needed, taking pieces in rank order
    /// at the cost piece selection charges (tokens plus a separator).
    fn trace_pieces(
        &self,
        ids: &[String],
        ranking: &[(PieceKey, f32)],
        room: usize,
        room_all: usize,
    ) -> ReadTrace {
        let st = self.ctx.st;
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        // Event seq and piece count of each wanted source among past units.
        let mut events: HashMap<&str, (u64, usize)> = HashMap::new();
        for p in &self.past {
            for e in &p.u.events {
                let id = e.event.source_id();
                if wanted.contains(id) {
                    events.insert(id, (e.seq, e.pieces.len()));
                }
            }
        }
        let seqs: HashSet<u64> = events.values().map(|(s, _)| *s).collect();
        // Per wanted event: best rank, pieces ranked, cumulative cost at its
        // last ranked piece.
        let mut seen: HashMap<u64, (usize, usize, usize)> = HashMap::new();
        let mut cumulative = 0usize;
        for (rank, (k, _)) in ranking.iter().enumerate() {
            let cost = st
                .seq_unit
                .get(&k.0)
                .and_then(|u| st.units.get(u))
                .and_then(|u| u.events.iter().find(|e| e.seq == k.0))
                .and_then(|e| e.piece_tokens.get(k.1 as usize))
                .copied()
                .unwrap_or(0);
            cumulative += cost + self.sep;
            if seqs.contains(&k.0) {
                let entry = seen.entry(k.0).or_insert((rank, 0, 0));
                entry.1 += 1;
                entry.2 = cumulative;
            }
        }
        let events = ids
            .iter()
            .map(|id| {
                let found = events.get(id.as_str()).and_then(|(seq, n)| {
                    seen.get(seq)
                        .map(|(rank, ranked, at)| (*rank, *ranked == *n, *at))
                });
                EvidenceTrace {
                    source_id: id.clone(),
                    rank: found.map(|f| f.0),
                    room_needed: found.and_then(|(_, all, at)| all.then_some(at)),
                }
            })
            .collect();
        ReadTrace {
            room,
            allowance: room_all,
            events,
            top_k: None,
        }
    }

    /// `head` then the chosen pieces (`keys`) of past unit `ui` as one block:
    /// consecutive pieces of one event are shown as the event's raw text they
    /// span ([`run_text`]), so a turn whose pieces are all chosen reads
    /// exactly as written; marks stand for what is skipped.
    pub(super) fn unit_runs(&self, ui: usize, keys: &[PieceKey], head: &str) -> String {
        let u = self.past[ui].u;
        let all: Vec<PieceKey> = u.pieces().map(|(k, _, _)| k).collect();
        let mut idx: Vec<usize> = keys
            .iter()
            .filter_map(|k| all.iter().position(|a| a == k))
            .collect();
        idx.sort_unstable();
        let mut runs: Vec<(usize, usize, String)> = Vec::new();
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while self.ctx.cfg.join_pieces
                && j + 1 < idx.len()
                && idx[j + 1] == idx[j] + 1
                && all[idx[j + 1]].0 == all[idx[i]].0
            {
                j += 1;
            }
            let (seq, first) = all[idx[i]];
            let last = all[idx[j]].1;
            let text = u
                .events
                .iter()
                .find(|e| e.seq == seq)
                .map(|e| run_text(&e.text, &e.pieces, first as usize, last as usize))
                .unwrap_or_default();
            runs.push((idx[i], idx[j], text));
            i = j + 1;
        }
        let borrowed: Vec<(usize, usize, &str)> =
            runs.iter().map(|(a, b, t)| (*a, *b, t.as_str())).collect();
        excerpt_runs(head, all.len(), &borrowed)
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
        let recall = Recall::new(text, tokens, sources);
        self.done_timeline(b, entries, recall, tb, RecoveryMode::Piece)
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
