//! Fit-or-degrade (*FlexA-Mem* Section 3.3, Eq. 4, Algorithm 1 lines 6–17)
//! as a renderer of its own. [`fit_or_degrade`] is the rule on costs:
//! candidates, most relevant first, each get the highest resolution whose
//! cost fits the room left by the candidates before them; nothing later can
//! take room from an earlier candidate. [`FitOrDegrade::render`] applies it
//! to any ranked list of units with raw text, a record and scored pieces (M1
//! hits, A-Mem notes…), without a timeline: there a record costs its own
//! length and a candidate whose record does not fit is left out. FlexA-Mem's
//! own renderer uses the rule and the excerpt helpers ([`excerpt_runs`],
//! [`pick_pieces`], [`OMISSION`]) with its timeline.

use submem_core::{Resolution, SourceHit, TokenCounter};

/// Mark shown where text of a unit is omitted.
pub const OMISSION: &str = "[…]";

/// What showing one candidate costs at each resolution above its record
/// (tokens; may be negative when the raw text is shorter than the record it
/// replaces). `excerpt` is `None` when the unit has no matching piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// Cost of the excerpt.
    pub excerpt: Option<i64>,
    /// Cost of the raw text.
    pub raw: i64,
}

/// Gives each candidate (most relevant first) the highest resolution whose
/// cost fits the room left, record ≺ excerpt ≺ raw; the record costs nothing
/// and always fits. Returns the resolutions and the room left.
pub fn fit_or_degrade(costs: &[Costs], room: i64) -> (Vec<Resolution>, i64) {
    let mut r = room;
    let mut out = Vec::with_capacity(costs.len());
    for c in costs {
        if c.raw <= r {
            r -= c.raw;
            out.push(Resolution::Raw);
        } else if let Some(e) = c.excerpt.filter(|e| *e <= r) {
            r -= e;
            out.push(Resolution::Excerpt);
        } else {
            out.push(Resolution::Record);
        }
    }
    (out, r)
}

/// Builds an excerpt: `head` (the record line), then the chosen pieces in
/// their original order, with [`OMISSION`] marks where pieces are skipped.
/// `chosen` must be sorted ascending indices into `pieces`.
pub fn excerpt_text(head: &str, pieces: &[String], chosen: &[usize]) -> String {
    let runs: Vec<(usize, usize, &str)> = chosen
        .iter()
        .filter_map(|&i| pieces.get(i).map(|p| (i, i, p.as_str())))
        .collect();
    excerpt_runs(head, pieces.len(), &runs)
}

/// Like [`excerpt_text`], for runs of consecutive pieces already joined:
/// `(first, last, text)` with ascending, non-overlapping index ranges into a
/// list of `n_pieces` pieces. Marks stand where pieces are skipped.
pub fn excerpt_runs(head: &str, n_pieces: usize, runs: &[(usize, usize, &str)]) -> String {
    let mut out = String::from(head);
    let mut prev: Option<usize> = None;
    for &(first, last, text) in runs {
        let gap = match prev {
            None => first > 0,
            Some(p) => first > p + 1,
        };
        if gap {
            push_line(&mut out, OMISSION);
        }
        push_line(&mut out, text);
        prev = Some(last);
    }
    if let Some(p) = prev {
        if p + 1 < n_pieces {
            push_line(&mut out, OMISSION);
        }
    }
    out
}

fn push_line(out: &mut String, line: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(line);
}

/// Picks pieces for an excerpt: in `ranked` order (indices, best first),
/// greedily while their total stays within `budget` tokens. Returns the
/// chosen indices sorted in original order.
pub fn pick_pieces(ranked: &[usize], piece_tokens: &[usize], budget: usize) -> Vec<usize> {
    let mut total = 0usize;
    let mut chosen = Vec::new();
    for &i in ranked {
        let t = piece_tokens.get(i).copied().unwrap_or(usize::MAX);
        if total.saturating_add(t) <= budget {
            total += t;
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// A piece of a candidate with its match score against the query (higher is
/// better; 0 means no match and the piece is never excerpted).
#[derive(Debug, Clone, PartialEq)]
pub struct FitPiece {
    /// The verbatim text shown.
    pub text: String,
    /// Match score.
    pub score: f32,
}

/// One ranked unit for [`FitOrDegrade::render`].
#[derive(Debug, Clone, PartialEq)]
pub struct FitCandidate {
    /// Time position (smaller is older); the render is in time order.
    pub position: u64,
    /// Relevance (reported in the sources).
    pub score: f32,
    /// Source ids of the unit's events.
    pub source_ids: Vec<String>,
    /// Its record (a note, a gist, a summary).
    pub record: String,
    /// Its raw text.
    pub raw: String,
    /// Its pieces in original order.
    pub pieces: Vec<FitPiece>,
}

/// The result of [`FitOrDegrade::render`].
#[derive(Debug, Clone, PartialEq)]
pub struct FitRender {
    /// The rendered memory.
    pub text: String,
    /// Its tokens.
    pub tokens: usize,
    /// Per candidate (input order): the resolution shown, `None` if left out.
    pub resolutions: Vec<Option<Resolution>>,
    /// The source ids shown, most relevant first.
    pub sources: Vec<SourceHit>,
}

/// The fit-or-degrade renderer with excerpt size E.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitOrDegrade {
    /// E: most tokens of pieces in one excerpt.
    pub excerpt_tokens: usize,
}

impl Default for FitOrDegrade {
    fn default() -> Self {
        FitOrDegrade {
            excerpt_tokens: 160,
        }
    }
}

impl FitOrDegrade {
    /// The excerpt of `c`: its record followed by its best pieces (score
    /// order, ties to the earlier piece) within E tokens; `None` when no
    /// piece matches.
    pub fn excerpt(&self, c: &FitCandidate, counter: &dyn TokenCounter) -> Option<String> {
        let mut ranked: Vec<usize> = (0..c.pieces.len())
            .filter(|&i| c.pieces[i].score > 0.0)
            .collect();
        if ranked.is_empty() {
            return None;
        }
        ranked.sort_by(|&a, &b| {
            c.pieces[b]
                .score
                .total_cmp(&c.pieces[a].score)
                .then(a.cmp(&b))
        });
        let tokens: Vec<usize> = c.pieces.iter().map(|p| counter.count(&p.text)).collect();
        let chosen = pick_pieces(&ranked, &tokens, self.excerpt_tokens);
        if chosen.is_empty() {
            return None;
        }
        let texts: Vec<String> = c.pieces.iter().map(|p| p.text.clone()).collect();
        Some(excerpt_text(&c.record, &texts, &chosen))
    }

    /// Renders `candidates` (most relevant first) within `allowance` tokens:
    /// each gets raw text, an excerpt or its record, the highest that fits
    /// the room left, or is left out when not even its record fits; shown in
    /// time order; while the joined text is too long, the least relevant
    /// shown candidate is dropped.
    pub fn render(
        &self,
        candidates: &[FitCandidate],
        counter: &dyn TokenCounter,
        allowance: usize,
    ) -> FitRender {
        let sep = counter.count("\n") as i64;
        let mut room = allowance as i64;
        let mut texts: Vec<Option<(Resolution, String)>> = Vec::with_capacity(candidates.len());
        for (n, c) in candidates.iter().enumerate() {
            let extra = if n == 0 { 0 } else { sep };
            let mut options: Vec<(Resolution, String)> = vec![(Resolution::Raw, c.raw.clone())];
            if let Some(e) = self.excerpt(c, counter) {
                options.push((Resolution::Excerpt, e));
            }
            options.push((Resolution::Record, c.record.clone()));
            let mut pick = None;
            for (res, text) in options {
                let cost = counter.count(&text) as i64 + extra;
                if cost <= room {
                    room -= cost;
                    pick = Some((res, text));
                    break;
                }
            }
            texts.push(pick);
        }
        loop {
            let mut shown: Vec<usize> = (0..candidates.len())
                .filter(|&i| texts[i].is_some())
                .collect();
            shown.sort_by_key(|&i| (candidates[i].position, i));
            let text = shown
                .iter()
                .filter_map(|&i| texts[i].as_ref().map(|(_, t)| t.as_str()))
                .collect::<Vec<_>>()
                .join("\n");
            let tokens = counter.count(&text);
            if tokens <= allowance || shown.is_empty() {
                let resolutions: Vec<Option<Resolution>> =
                    texts.iter().map(|t| t.as_ref().map(|(r, _)| *r)).collect();
                let sources = candidates
                    .iter()
                    .zip(&resolutions)
                    .filter_map(|(c, r)| r.map(|r| (c, r)))
                    .flat_map(|(c, r)| {
                        c.source_ids.iter().map(move |id| SourceHit {
                            source_id: id.clone(),
                            score: c.score,
                            resolution: r,
                        })
                    })
                    .collect();
                return FitRender {
                    text,
                    tokens,
                    resolutions,
                    sources,
                };
            }
            // Drop the least relevant candidate still shown.
            if let Some(last) = (0..texts.len()).rev().find(|&i| texts[i].is_some()) {
                texts[last] = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;

    #[test]
    fn the_rule_on_costs() {
        let costs = [
            Costs {
                excerpt: Some(3),
                raw: 8,
            },
            Costs {
                excerpt: Some(2),
                raw: 4,
            },
            Costs {
                excerpt: None,
                raw: 5,
            },
        ];
        let (v, left) = fit_or_degrade(&costs, 10);
        assert_eq!(
            v,
            vec![Resolution::Raw, Resolution::Excerpt, Resolution::Record]
        );
        assert_eq!(left, 0);
        let (v, _) = fit_or_degrade(&costs, 5);
        assert_eq!(
            v,
            vec![Resolution::Excerpt, Resolution::Excerpt, Resolution::Record]
        );
        // A negative cost (raw shorter than its record) always fits and gives room back.
        let (v, left) = fit_or_degrade(
            &[Costs {
                excerpt: None,
                raw: -2,
            }],
            0,
        );
        assert_eq!((v[0], left), (Resolution::Raw, 2));
    }

    #[test]
    fn excerpt_marks_omissions() {
        let p: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(excerpt_text("R", &p, &[1, 2]), "R\n[…]\nb\nc\n[…]");
        assert_eq!(excerpt_text("R", &p, &[0, 3]), "R\na\n[…]\nd");
        assert_eq!(pick_pieces(&[2, 0, 1], &[5, 5, 5], 10), vec![0, 2]);
    }

    fn cand(pos: u64, raw_words: usize, score: f32) -> FitCandidate {
        FitCandidate {
            position: pos,
            score,
            source_ids: vec![format!("s{pos}")],
            record: format!("record {pos}"),
            raw: vec!["raw"; raw_words].join(" "),
            pieces: vec![
                FitPiece {
                    text: "match here".into(),
                    score: 1.0,
                },
                FitPiece {
                    text: vec!["x"; raw_words.saturating_sub(2)].join(" "),
                    score: 0.0,
                },
            ],
        }
    }

    #[test]
    fn standalone_render_degrades_then_drops() {
        let f = FitOrDegrade { excerpt_tokens: 10 };
        let c = WhitespaceCounter;
        let cands = [cand(2, 10, 0.9), cand(1, 10, 0.8), cand(3, 10, 0.7)];
        let r = f.render(&cands, &c, 17);
        assert_eq!(
            r.resolutions,
            vec![
                Some(Resolution::Raw),
                Some(Resolution::Excerpt),
                Some(Resolution::Record)
            ]
        );
        assert!(r.tokens <= 17);
        // Time order: candidate at position 1 (excerpt) first.
        assert!(r.text.starts_with("record 1\n[…]") || r.text.starts_with("record 1\nmatch"));
        let r = f.render(&cands, &c, 3);
        assert_eq!(r.resolutions, vec![Some(Resolution::Record), None, None]);
        assert_eq!(r.sources.len(), 1);
        let r = f.render(&cands, &c, 0);
        assert!(r.text.is_empty() && r.sources.is_empty());
    }
}
