//! Choosing the pages to expand: ReadAgent's *look-up* step. One LLM call
//! sees every gist with its page number (1-based, time order) and the
//! question, and names the pages to read in full; [`parse_pages`] reads the
//! numbers in any format a small model writes them (`3, 7`, `Page 3 and page
//! 7`, `[3][7]`, `p3`, `3rd`, `three`, ranges `3-5` / `3 to 5`). When the reply
//! names no valid page, or the call fails, the rule takes over: the pages with
//! the best BM25 score over gist + page text ([`crate::text::bm25_scores`]),
//! which is also the whole selection when no LLM is configured.

use submem_core::ChatRequest;

/// The page-selection request: `gist_lines` are already numbered.
pub fn select_request(
    gist_lines: &str,
    question: &str,
    max_expand: usize,
    max_new_tokens: usize,
) -> ChatRequest {
    ChatRequest::instructed(
        "You decide which pages of a long text to read again in full to answer a question.",
        format!(
            "The text is split into numbered pages. The gist of each page:\n\n{gist_lines}\n\n\
             Question: {question}\n\n\
             Which pages (at most {max_expand}) should be read in full to answer the question? \
             Reply with the page numbers only, separated by commas."
        ),
    )
    .with_max_tokens(max_new_tokens)
}

const NUMBER_WORDS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
];
const ORDINAL_WORDS: &[&str] = &[
    "zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    Num(usize),
    RangeMark,
    Other,
}

fn word_number(word: &str) -> Option<usize> {
    let w = word.to_lowercase();
    if let Some(i) = NUMBER_WORDS.iter().position(|n| *n == w) {
        return Some(i);
    }
    if let Some(i) = ORDINAL_WORDS.iter().position(|n| *n == w) {
        return Some(i);
    }
    // `p3`, `page3`, `pg3`, `3rd`, `7th`, `#3` (the `#` is not alphanumeric).
    let digits = w
        .trim_start_matches("page")
        .trim_start_matches("pg")
        .trim_start_matches('p');
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| digits.strip_suffix(s))
        .unwrap_or(digits);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits.parse().ok();
    }
    None
}

fn tokenize(reply: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Tok>| {
        if !word.is_empty() {
            out.push(match word_number(word) {
                Some(n) => Tok::Num(n),
                None if word.eq_ignore_ascii_case("to") || word.eq_ignore_ascii_case("through") => {
                    Tok::RangeMark
                }
                None => Tok::Other,
            });
            word.clear();
        }
    };
    for c in reply.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            if matches!(c, '-' | '–' | '—') {
                out.push(Tok::RangeMark);
            }
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Page indices (0-based) named in `reply`, which numbers pages from 1, in
/// the order named, without repeats, at most `max`; numbers outside
/// `1..=pages` are ignored. A range `a-b` counts when `a < b` and it names at
/// most `max` pages.
pub fn parse_pages(reply: &str, pages: usize, max: usize) -> Vec<usize> {
    let toks = tokenize(reply);
    let mut named: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if let Tok::Num(a) = toks[i] {
            if let (Some(Tok::RangeMark), Some(Tok::Num(b))) = (toks.get(i + 1), toks.get(i + 2)) {
                let b = *b;
                if a < b && b - a < max {
                    named.extend(a..=b);
                    i += 3;
                    continue;
                }
            }
            named.push(a);
        }
        i += 1;
    }
    let mut out = Vec::new();
    for n in named {
        if (1..=pages).contains(&n) && !out.contains(&(n - 1)) {
            out.push(n - 1);
            if out.len() == max {
                break;
            }
        }
    }
    out
}

/// The rule selection: the `max` best pages by `scores` (only pages with a
/// positive score; ties go to the newer page).
pub fn rule_select(scores: &[f32], max: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
    order.truncate(max);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_any_format() {
        assert_eq!(parse_pages("3, 7", 10, 5), vec![2, 6]);
        assert_eq!(parse_pages("Page 3 and page 7.", 10, 5), vec![2, 6]);
        assert_eq!(parse_pages("[3][7][3]", 10, 5), vec![2, 6]);
        assert_eq!(parse_pages("p3, #7", 10, 5), vec![2, 6]);
        assert_eq!(parse_pages("the third and seventh", 10, 5), vec![2, 6]);
        assert_eq!(parse_pages("pages three to five", 10, 5), vec![2, 3, 4]);
        assert_eq!(parse_pages("Pages 2-4", 10, 5), vec![1, 2, 3]);
        assert_eq!(parse_pages("<Page 1>, <Page 2>", 10, 5), vec![0, 1]);
    }

    #[test]
    fn out_of_range_and_unusable_replies_name_nothing() {
        assert_eq!(parse_pages("0, 11, 2023", 10, 5), Vec::<usize>::new());
        assert!(parse_pages("I cannot tell.", 10, 5).is_empty());
        assert!(parse_pages("", 10, 5).is_empty());
        // A huge range is not expanded; its ends still count.
        assert_eq!(parse_pages("1-9", 10, 3), vec![0, 8]);
        assert_eq!(parse_pages("1, 2, 3, 4", 10, 2), vec![0, 1]);
    }

    #[test]
    fn rule_selection_takes_the_best_positive_scores() {
        assert_eq!(rule_select(&[0.0, 2.0, 1.0, 2.0], 2), vec![3, 1]);
        assert!(rule_select(&[0.0, 0.0], 3).is_empty());
    }
}
