//! The timeline of records (Section 3.2): records of past units in time
//! order, merged oldest first, up to `merge_group` at a time, while
//! `‖T‖ > max(ρA, A − D)` ([`merge_needed`]).
//!
//! Merge order is a deterministic function of the unit list, so a merged
//! record written at one call is found again (by the units it covers) at the
//! next. A merge step takes the oldest run of at least two consecutive
//! entries of equal level and merges up to `merge_group` of them into one
//! entry a level higher: four records become one merged record, and when the
//! oldest merged records form a run they are merged again. The paper only
//! merges records; merging merged records is our extension, needed so that a
//! history of thousands of units still fits a small allowance (documented
//! deviation). When no equal-level run is left, the oldest mergeable pair (or
//! longer run) of any levels is merged. Units without a note (the open unit,
//! units awaiting their record) are never merged.
//!
//! The prefix of merged entries is kept on a stack and the untouched records
//! after it as a cursor into the unit list, so a step costs O(log n) and not
//! O(n) even over 10,000 units.

/// The exact merge condition of Algorithm 1: merge while
/// `‖T‖ > max(ρ·A, A − D)`.
pub fn merge_needed(timeline_tokens: usize, allowance: usize, rho: f32, d: usize) -> bool {
    timeline_tokens as f64 > merge_threshold(allowance, rho, d)
}

/// `max(ρ·A, A − D)`.
pub fn merge_threshold(allowance: usize, rho: f32, d: usize) -> f64 {
    let a = allowance as f64;
    (f64::from(rho) * a).max(a - d as f64)
}

/// One entry of the timeline: a record or a merged record covering the past
/// units `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// First unit covered (index into the past units).
    pub first: usize,
    /// Last unit covered.
    pub last: usize,
    /// 0 for a unit's own record, `n` for a merge of level `n − 1` entries.
    pub level: u8,
    /// Tokens of its line.
    pub tokens: usize,
    /// Whether it may be merged.
    pub mergeable: bool,
}

impl Entry {
    /// Whether it is a merged record.
    pub fn is_merged(&self) -> bool {
        self.level > 0
    }
}

/// A planned merge: which entries (by position in [`Timeline::entries`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergePlan {
    /// Position of the first entry merged.
    pub start: usize,
    /// Number of entries merged.
    pub len: usize,
    /// The entries merged, in order.
    pub children: Vec<Entry>,
    /// Level of the result.
    pub level: u8,
}

impl MergePlan {
    /// First unit covered.
    pub fn first(&self) -> usize {
        self.children.first().map_or(0, |e| e.first)
    }
    /// Last unit covered.
    pub fn last(&self) -> usize {
        self.children.last().map_or(0, |e| e.last)
    }
}

/// The timeline during one render.
#[derive(Debug, Clone)]
pub struct Timeline<'a> {
    record_tokens: &'a [usize],
    mergeable: &'a [bool],
    group: usize,
    sep: usize,
    stack: Vec<Entry>,
    cursor: usize,
    hidden: Vec<Entry>,
    content: usize,
}

impl<'a> Timeline<'a> {
    /// A timeline of one record per unit.
    pub fn new(
        record_tokens: &'a [usize],
        mergeable: &'a [bool],
        group: usize,
        sep: usize,
    ) -> Self {
        Timeline {
            record_tokens,
            mergeable,
            group: group.max(2),
            sep,
            stack: Vec::new(),
            cursor: 0,
            hidden: Vec::new(),
            content: record_tokens.iter().sum(),
        }
    }

    fn single(&self, i: usize) -> Entry {
        Entry {
            first: i,
            last: i,
            level: 0,
            tokens: self.record_tokens.get(i).copied().unwrap_or(0),
            mergeable: self.mergeable.get(i).copied().unwrap_or(false),
        }
    }

    /// Number of visible entries.
    pub fn len(&self) -> usize {
        self.stack.len() + self.record_tokens.len().saturating_sub(self.cursor)
    }

    /// Whether nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `‖T‖`: tokens of the visible entries joined by line breaks.
    pub fn tokens(&self) -> usize {
        self.content + self.sep * self.len().saturating_sub(1)
    }

    /// Visible entries in time order.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.stack
            .iter()
            .copied()
            .chain((self.cursor..self.record_tokens.len()).map(|i| self.single(i)))
    }

    /// Entries hidden for this call.
    pub fn hidden(&self) -> &[Entry] {
        &self.hidden
    }

    /// The next merge step, if any entries can still be merged.
    pub fn next_merge(&mut self) -> Option<MergePlan> {
        // 1. The oldest run of equal-level mergeable entries on the stack.
        if let Some(p) = self.equal_run_on_stack() {
            return Some(p);
        }
        // 2. Records after the stack: move unmergeable ones onto the stack,
        //    then take up to `group` consecutive mergeable records.
        while self.cursor < self.record_tokens.len() && !self.single(self.cursor).mergeable {
            let e = self.single(self.cursor);
            self.stack.push(e);
            self.cursor += 1;
            if let Some(p) = self.equal_run_on_stack() {
                return Some(p);
            }
        }
        let mut n = 0;
        while self.cursor + n < self.record_tokens.len()
            && n < self.group
            && self.single(self.cursor + n).mergeable
        {
            n += 1;
        }
        if n >= 2 {
            let children: Vec<Entry> = (self.cursor..self.cursor + n)
                .map(|i| self.single(i))
                .collect();
            return Some(MergePlan {
                start: self.stack.len(),
                len: n,
                children,
                level: 1,
            });
        }
        // 3. Fallback: the oldest run of mergeable entries of any levels.
        let all: Vec<Entry> = self.entries().collect();
        let mut i = 0;
        while i + 1 < all.len() {
            if all[i].mergeable && all[i + 1].mergeable {
                let mut len = 2;
                while i + len < all.len() && len < self.group && all[i + len].mergeable {
                    len += 1;
                }
                let children = all[i..i + len].to_vec();
                let level = children
                    .iter()
                    .map(|e| e.level)
                    .max()
                    .unwrap_or(0)
                    .saturating_add(1);
                // Materialise everything on the stack so positions line up.
                self.stack = all;
                self.cursor = self.record_tokens.len();
                return Some(MergePlan {
                    start: i,
                    len,
                    children,
                    level,
                });
            }
            i += 1;
        }
        None
    }

    fn equal_run_on_stack(&self) -> Option<MergePlan> {
        let s = &self.stack;
        let mut i = 0;
        while i + 1 < s.len() {
            if s[i].mergeable && s[i + 1].mergeable && s[i].level == s[i + 1].level {
                let mut len = 2;
                while i + len < s.len()
                    && len < self.group
                    && s[i + len].mergeable
                    && s[i + len].level == s[i].level
                {
                    len += 1;
                }
                return Some(MergePlan {
                    start: i,
                    len,
                    children: s[i..i + len].to_vec(),
                    level: s[i].level.saturating_add(1),
                });
            }
            i += 1;
        }
        None
    }

    /// Applies `plan`, whose merged line has `tokens` tokens.
    pub fn apply(&mut self, plan: &MergePlan, tokens: usize) {
        let merged = Entry {
            first: plan.first(),
            last: plan.last(),
            level: plan.level,
            tokens,
            mergeable: true,
        };
        let removed: usize = plan.children.iter().map(|e| e.tokens).sum();
        self.content = self.content - removed + tokens;
        if plan.start == self.stack.len() {
            // Records after the stack.
            self.cursor += plan.len;
            self.stack.push(merged);
        } else {
            self.stack
                .splice(plan.start..plan.start + plan.len, std::iter::once(merged));
        }
    }

    /// Hides the oldest visible entry for this call; false when none is left.
    pub fn hide_oldest(&mut self) -> bool {
        let e = if !self.stack.is_empty() {
            self.stack.remove(0)
        } else if self.cursor < self.record_tokens.len() {
            let e = self.single(self.cursor);
            self.cursor += 1;
            e
        } else {
            return false;
        };
        self.content -= e.tokens;
        self.hidden.push(e);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_condition_by_hand() {
        // A = 1000, ρ = 0.5, D = 300: threshold max(500, 700) = 700.
        assert!(merge_needed(701, 1000, 0.5, 300));
        assert!(!merge_needed(700, 1000, 0.5, 300));
        // D = 800: threshold max(500, 200) = 500.
        assert!(merge_needed(501, 1000, 0.5, 800));
        assert!(!merge_needed(500, 1000, 0.5, 800));
        // No candidates (D = 0): the timeline may take the whole allowance.
        assert!(!merge_needed(1000, 1000, 0.5, 0));
        assert!(merge_needed(1001, 1000, 0.5, 0));
        // D larger than A: ρA rules.
        assert!(merge_needed(251, 1000, 0.25, 5000));
        assert_eq!(merge_threshold(0, 0.5, 10), 0.0);
    }

    fn apply_all(
        t: &mut Timeline<'_>,
        steps: usize,
        merged_tokens: usize,
    ) -> Vec<(usize, usize, u8)> {
        let mut out = Vec::new();
        for _ in 0..steps {
            let Some(p) = t.next_merge() else { break };
            out.push((p.first(), p.last(), p.level));
            t.apply(&p, merged_tokens);
        }
        out
    }

    #[test]
    fn merges_oldest_first_in_groups_then_levels() {
        let toks = vec![10; 10];
        let ok = vec![true; 10];
        let mut t = Timeline::new(&toks, &ok, 4, 0);
        assert_eq!(t.tokens(), 100);
        let steps = apply_all(&mut t, 3, 12);
        assert_eq!(steps, vec![(0, 3, 1), (4, 7, 1), (0, 7, 2)]);
        assert_eq!(t.len(), 3);
        assert_eq!(t.tokens(), 12 + 10 + 10);
        // Then the two last records, then the fallback across levels.
        let steps = apply_all(&mut t, 5, 12);
        assert_eq!(steps, vec![(8, 9, 1), (0, 9, 3)]);
        assert!(t.next_merge().is_none());
    }

    #[test]
    fn unmergeable_units_break_runs() {
        let toks = vec![5; 5];
        let ok = vec![true, true, false, true, true];
        let mut t = Timeline::new(&toks, &ok, 4, 1);
        assert_eq!(t.tokens(), 25 + 4);
        let steps = apply_all(&mut t, 10, 3);
        assert_eq!(steps, vec![(0, 1, 1), (3, 4, 1)]);
        let levels: Vec<u8> = t.entries().map(|e| e.level).collect();
        assert_eq!(levels, vec![1, 0, 1]);
        assert!(t.hide_oldest());
        assert_eq!(t.len(), 2);
        assert_eq!(t.hidden().len(), 1);
    }

    #[test]
    fn grouping_is_stable_as_the_history_grows() {
        let toks = vec![10; 40];
        let ok = vec![true; 40];
        let mut a = Timeline::new(&toks[..21], &ok[..21], 4, 0);
        let mut b = Timeline::new(&toks, &ok, 4, 0);
        let sa = apply_all(&mut a, 6, 12);
        let sb = apply_all(&mut b, 6, 12);
        assert_eq!(sa, sb);
    }
}
