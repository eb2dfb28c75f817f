//! Answer metrics P1 (exact match), P2 (token F1), P3 (BLEU-1) and P12 (SubEM),
//! all on the SQuAD-style normalised answer of Appendix D.1 of *Harness the
//! Memory*: lower-case, remove punctuation, remove the articles a/an/the,
//! collapse white space.

use std::collections::HashMap;

/// Normalises an answer: lower-case, punctuation removed, articles (`a`, `an`,
/// `the`) removed, white space collapsed to single spaces.
pub fn normalize_answer(s: &str) -> String {
    let lowered = s.to_lowercase();
    let no_punct: String = lowered
        .chars()
        .map(|c| {
            if c.is_ascii_punctuation() || is_unicode_punct(c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_unicode_punct(c: char) -> bool {
    matches!(c, '‘' | '’' | '“' | '”' | '–' | '—' | '…' | '«' | '»')
}

fn tokens(s: &str) -> Vec<String> {
    normalize_answer(s)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn counts(tokens: &[String]) -> HashMap<&str, usize> {
    let mut m = HashMap::new();
    for t in tokens {
        *m.entry(t.as_str()).or_insert(0) += 1;
    }
    m
}

/// Multiset overlap of two token lists.
fn overlap(a: &[String], b: &[String]) -> usize {
    let cb = counts(b);
    counts(a)
        .iter()
        .map(|(w, n)| (*n).min(cb.get(w).copied().unwrap_or(0)))
        .sum()
}

/// P1: 1.0 when the normalised prediction equals the normalised gold answer.
pub fn exact_match(prediction: &str, gold: &str) -> f64 {
    f64::from(u8::from(
        normalize_answer(prediction) == normalize_answer(gold),
    ))
}

/// P2: token F1 with multiset overlap; an empty prediction (or gold) scores 0
/// unless both are empty.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    if p.is_empty() || g.is_empty() {
        return f64::from(u8::from(p.is_empty() && g.is_empty()));
    }
    let common = overlap(&p, &g);
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// P3: BLEU-1, clipped unigram precision times the brevity penalty
/// `min(1, exp(1 − |gold|/|prediction|))`; an empty prediction scores 0.
pub fn bleu1(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    if p.is_empty() {
        return 0.0;
    }
    let precision = overlap(&p, &g) as f64 / p.len() as f64;
    let bp = (1.0 - g.len() as f64 / p.len() as f64).exp().min(1.0);
    bp * precision
}

/// P12: 1.0 when the normalised gold answer is a contiguous substring of the
/// normalised prediction (on word boundaries). An empty gold answer never
/// matches.
pub fn sub_em(prediction: &str, gold: &str) -> f64 {
    let g = normalize_answer(gold);
    if g.is_empty() {
        return 0.0;
    }
    let p = format!(" {} ", normalize_answer(prediction));
    f64::from(u8::from(p.contains(&format!(" {g} "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn normalisation_strips_articles_punctuation_and_case() {
        assert_eq!(
            normalize_answer("The  Cat, sat on a MAT!"),
            "cat sat on mat"
        );
        assert_eq!(normalize_answer("An apple."), "apple");
        assert_eq!(normalize_answer("  "), "");
        assert_eq!(normalize_answer("7 May 2023"), "7 may 2023");
    }

    #[test]
    fn exact_match_after_normalisation() {
        assert_eq!(exact_match("The Eiffel Tower.", "eiffel tower"), 1.0);
        assert_eq!(exact_match("Eiffel", "eiffel tower"), 0.0);
    }

    #[test]
    fn f1_hand_computed() {
        // pred tokens: [paris, france] gold: [paris] -> P=1/2 R=1 F1=2/3
        assert!(close(token_f1("Paris, France", "Paris"), 2.0 / 3.0));
        // multiset: pred [a? no] "red red blue" vs "red blue blue": overlap red1 + blue1 = 2; P=R=2/3
        assert!(close(token_f1("red red blue", "red blue blue"), 2.0 / 3.0));
        assert_eq!(token_f1("", "x"), 0.0);
        assert_eq!(token_f1("green", "red"), 0.0);
    }

    #[test]
    fn bleu1_hand_computed() {
        // pred [paris] gold [paris, france]: precision 1, BP = exp(1 - 2/1) = e^-1
        assert!(close(bleu1("Paris", "Paris France"), (-1.0f64).exp()));
        // pred longer than gold: BP = 1, precision = 1/3
        assert!(close(bleu1("paris is nice", "paris"), 1.0 / 3.0));
        // clipping: pred [red red red] gold [red] -> 1/3
        assert!(close(bleu1("red red red", "red"), 1.0 / 3.0));
        assert_eq!(bleu1("", "x"), 0.0);
    }

    #[test]
    fn sub_em_contiguous_on_word_boundaries() {
        assert_eq!(sub_em("It was on 7 May 2023, I think.", "7 May 2023"), 1.0);
        assert_eq!(sub_em("May 2023", "7 May 2023"), 0.0);
        assert_eq!(sub_em("catalog", "cat"), 0.0);
        assert_eq!(sub_em("anything", ""), 0.0);
    }
}
