//! Rendering ranked units under a token budget, shown in time order: the shared
//! read path of the flat substrates (M1, M2) and full context (M10), and a
//! building block for others.

use submem_core::{Recall, Resolution, SourceHit, TokenCounter};

/// One unit a substrate wants to show.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedUnit {
    /// Position in the history (smaller is older); rendering sorts by it.
    pub position: u64,
    /// Source id of the event shown.
    pub source_id: String,
    /// Text to show.
    pub text: String,
    /// Relevance score (higher is better).
    pub score: f32,
}

/// What to do with a unit that does not fit the remaining room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackPolicy {
    /// Skip it and try the next (smaller) one: best for relevance-ranked hits.
    SkipUnfit,
    /// Stop there: keeps a contiguous run, as full context does when it drops
    /// the oldest units first.
    StopAtFirstUnfit,
}

/// Separator between rendered units.
pub const UNIT_SEPARATOR: &str = "\n";

/// Greedy filling of an allowance by token counts: units are offered in
/// rank order and admitted while they fit, with a separator counted before
/// each but the first. The kit's packers and the families' fill this way.
///
/// ```
/// use submem_kit::render::Fill;
/// let mut fill = Fill::new(10, 1);
/// assert!(fill.admit(6));
/// assert!(!fill.admit(4), "4 + the separator is 11");
/// assert!(fill.admit(3));
/// assert_eq!(fill.used(), 10);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Fill {
    allowance: usize,
    separator: usize,
    used: usize,
    any: bool,
}

impl Fill {
    /// An empty fill of `allowance` tokens whose units are joined by a
    /// separator of `separator` tokens.
    pub fn new(allowance: usize, separator: usize) -> Self {
        Fill {
            allowance,
            separator,
            used: 0,
            any: false,
        }
    }

    /// Admits a unit of `tokens` when it fits after what is admitted (and
    /// its separator); whether it did.
    pub fn admit(&mut self, tokens: usize) -> bool {
        let cost = tokens + if self.any { self.separator } else { 0 };
        let fits = self.used + cost <= self.allowance;
        if fits {
            self.used += cost;
            self.any = true;
        }
        fits
    }

    /// Tokens admitted so far, separators included.
    pub fn used(&self) -> usize {
        self.used
    }
}

/// Packs `ranked` (most relevant first) into at most `allowance` tokens and
/// renders the chosen units in time order, one per line.
///
/// Units are counted on their own and the joined text is counted again, so the
/// returned [`Recall::tokens`] is exact for the counter; if joining ever makes
/// the text longer than the allowance, the least relevant unit is dropped
/// until it fits.
pub fn render_in_time_order(
    ranked: &[RankedUnit],
    counter: &dyn TokenCounter,
    allowance: usize,
    policy: PackPolicy,
) -> Recall {
    let separator_cost = counter.count(UNIT_SEPARATOR);
    let mut fill = Fill::new(allowance, separator_cost);
    let mut chosen: Vec<&RankedUnit> = Vec::new();
    for unit in ranked {
        if fill.admit(counter.count(&unit.text)) {
            chosen.push(unit);
        } else if policy == PackPolicy::StopAtFirstUnfit {
            break;
        }
    }
    loop {
        let mut in_time: Vec<&RankedUnit> = chosen.clone();
        in_time.sort_by_key(|u| u.position);
        let text = in_time
            .iter()
            .map(|u| u.text.as_str())
            .collect::<Vec<_>>()
            .join(UNIT_SEPARATOR);
        let tokens = counter.count(&text);
        if tokens <= allowance || chosen.is_empty() {
            let sources = chosen
                .iter()
                .map(|u| SourceHit {
                    source_id: u.source_id.clone(),
                    score: u.score,
                    resolution: Resolution::Raw,
                })
                .collect();
            return Recall::new(text, tokens, sources);
        }
        chosen.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        fn truncate(&self, text: &str, max: usize) -> String {
            text.split_whitespace()
                .take(max)
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    fn unit(position: u64, words: usize, score: f32) -> RankedUnit {
        RankedUnit {
            position,
            source_id: format!("u{position}"),
            text: vec!["w"; words].join(" "),
            score,
        }
    }

    #[test]
    fn renders_chosen_units_in_time_order() {
        let ranked = vec![unit(5, 3, 0.9), unit(1, 3, 0.8), unit(3, 3, 0.7)];
        let r = render_in_time_order(&ranked, &Words, 6, PackPolicy::SkipUnfit);
        assert_eq!(r.tokens, 6);
        assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["u5", "u1"]);
        assert_eq!(r.text, "w w w\nw w w");
    }

    #[test]
    fn skip_unfit_takes_smaller_later_units() {
        let ranked = vec![unit(1, 8, 0.9), unit(2, 2, 0.8)];
        let r = render_in_time_order(&ranked, &Words, 5, PackPolicy::SkipUnfit);
        assert_eq!(r.source_ids().collect::<Vec<_>>(), vec!["u2"]);
        let r = render_in_time_order(&ranked, &Words, 5, PackPolicy::StopAtFirstUnfit);
        assert!(r.sources.is_empty());
        assert_eq!(r.tokens, 0);
    }

    #[test]
    fn zero_allowance_renders_nothing() {
        let r = render_in_time_order(&[unit(1, 1, 1.0)], &Words, 0, PackPolicy::SkipUnfit);
        assert_eq!(r.text, "");
        assert_eq!(r.tokens, 0);
    }
}
