//! Unit recovery (Section 3.3, Algorithm 1): seeds, the score g over links
//! and time neighbours, excerpts, fit-or-degrade with in-place replacement.

use super::*;

impl Renderer<'_, '_> {
    pub(super) fn cosines(&self) -> Vec<f32> {
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
        let index = self.past_index();
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
        let look = |k: PieceKey| st.piece_vecs.get(&k);
        let ranked = match rank_pieces(
            &items,
            self.ctx.cfg.unit_recovery_ranking(),
            &look,
            self.ctx.piece_qvec,
        ) {
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
        let keys: Vec<PieceKey> = chosen.iter().map(|&c| pieces[c].0).collect();
        let text = self.unit_runs(i, &keys, &record_line(&self.past[i].record));
        let tokens = self.ctx.counter.count(&text);
        let events_shown = chosen.iter().map(|&c| pieces[c].0 .0).collect();
        Some(Excerpt {
            text,
            tokens,
            events_shown,
        })
    }

    pub(super) fn unit_mode(&self, tl_tokens: &[usize], mergeable: &[bool]) -> Outcome {
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
        let threshold = merge_threshold(self.a_merge, cfg.unit_recovery_rho(), d);
        // Hide the oldest entries for this call when the newest unit crowds
        // the window (agents), or when merging alone cannot reach the
        // threshold (a merged record can exceed a tiny allowance).
        let hide = Some(merge_threshold(self.a, cfg.unit_recovery_rho(), d));
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
        // A retry changes a few parts: only those are counted again.
        let mut counts = SegmentCounts::new(self.ctx.counter);
        loop {
            let (text, mut cuts, tb, shown) = self.assemble_units(&built, &cands, &res, &excerpts);
            let full = self.with_window(&text);
            cuts.push(text.len() + 1);
            let tokens = counts.count(&full, &cuts);
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

    /// M: the timeline with recovered units in place. Returns the text, where
    /// each of its parts starts, the token breakdown and the entries shown.
    fn assemble_units(
        &self,
        b: &Built<'_>,
        cands: &[(usize, f32)],
        res: &[Resolution],
        excerpts: &[Option<Excerpt>],
    ) -> (String, Vec<usize>, TokenBreakdown, Vec<Entry>) {
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
        let (text, cuts) = join_with_cuts(&parts);
        (text, cuts, tb, entries)
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
        let recall = Recall::new(text, tokens, sources);
        self.done_timeline(b, &entries, recall, tb, RecoveryMode::Unit)
    }
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
