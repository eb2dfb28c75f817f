//! Answer recall: whether the memory a reader would get holds the gold
//! answer, an answer-level figure that needs neither a reader nor a judge.
//!
//! Evidence coverage asks whether the gold *turns* are shown verbatim; it
//! cannot credit an LLM-written record or an excerpt that states the answer
//! without quoting the turn whole. Answer recall asks the question a reader
//! depends on: is the answer in the text at all? Both sides are normalised as
//! SQuAD normalises answers ([`normalize_answer`]: lower case, punctuation and
//! the articles a/an/the removed, white space collapsed) and matched on word
//! boundaries. A list answer (`"pottery, camping, painting"`) counts only when
//! every element appears; a comma inside a date (`"May 7, 2023"`) does not
//! split it. An answer that offers an alternative in brackets, as
//! LongMemEval's do (`"25 minutes and 50 seconds (or 25:50)"`), counts when
//! either form appears.
//!
//! The figure is an upper bound on what a perfect reader could answer from the
//! memory, and it misses answers the reader must derive (relative dates,
//! counts, yes/no): read it beside coverage, not instead of the reader.

use super::text::normalize_answer;
use submem::kit::text::MONTH_NAMES;

/// The normalised elements of a gold answer: the whole answer, or each item
/// of a list separated by `", "` or `;`. Empty elements are dropped.
pub fn answer_elements(gold: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    // ", " separates list items; a comma between digits ("1,200") does not.
    for raw in gold.split(';').flat_map(|s| s.split(", ")) {
        let piece = raw.trim();
        // "May 7, 2023": a year after a comma belongs to the date before it.
        if is_year(piece) {
            if let Some(last) = parts.last_mut() {
                if ends_with_day_or_month(last) {
                    last.push(' ');
                    last.push_str(piece);
                    continue;
                }
            }
        }
        parts.push(piece.to_string());
    }
    parts
        .iter()
        .map(|p| {
            let p = p.trim();
            let p = p
                .strip_prefix("and ")
                .or_else(|| p.strip_prefix("or "))
                .unwrap_or(p);
            normalize_answer(p)
        })
        .filter(|p| !p.is_empty())
        .collect()
}

fn is_year(s: &str) -> bool {
    s.len() == 4 && s.chars().all(|c| c.is_ascii_digit())
}

fn ends_with_day_or_month(s: &str) -> bool {
    let Some(last) = s.split_whitespace().last() else {
        return false;
    };
    let last = last.trim_end_matches(|c: char| !c.is_alphanumeric());
    let lower = last.to_lowercase();
    (!last.is_empty() && last.len() <= 2 && last.chars().all(|c| c.is_ascii_digit()))
        || MONTH_NAMES.contains(&lower.as_str())
}

/// The forms a gold answer accepts: `"X (or Y)"` accepts X and Y; any other
/// answer is its own only form.
pub fn answer_alternatives(gold: &str) -> Vec<&str> {
    let trimmed = gold.trim();
    if let Some(open) = trimmed.rfind("(or ") {
        if let Some(inner) = trimmed[open..]
            .strip_prefix("(or ")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let head = trimmed[..open].trim();
            return [head, inner.trim()]
                .into_iter()
                .filter(|f| !f.is_empty())
                .collect();
        }
    }
    vec![trimmed]
}

/// Whether every element of `gold` (of one of its
/// [`answer_alternatives`]) appears in `memory` (both normalised, on word
/// boundaries): `Some(1.0)` or `Some(0.0)`; `None` when the gold answer has
/// no words to look for.
///
/// ```
/// use submem_bench::metrics::answer_recall;
/// let memory = "[D1:3] Caroline: I went to the LGBTQ support group on 7 May 2023!";
/// assert_eq!(answer_recall(memory, "7 May 2023"), Some(1.0));
/// assert_eq!(answer_recall(memory, "LGBTQ support group, painting"), Some(0.0));
/// assert_eq!(answer_recall(memory, "..."), None);
/// ```
pub fn answer_recall(memory: &str, gold: &str) -> Option<f64> {
    let forms: Vec<Vec<String>> = answer_alternatives(gold)
        .into_iter()
        .map(answer_elements)
        .filter(|elements| !elements.is_empty())
        .collect();
    if forms.is_empty() {
        return None;
    }
    let haystack = format!(" {} ", normalize_answer(memory));
    let found = forms.iter().any(|elements| {
        elements
            .iter()
            .all(|e| haystack.contains(&format!(" {e} ")))
    });
    Some(f64::from(u8::from(found)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_answers_split_into_elements() {
        assert_eq!(
            answer_elements("Pottery, camping, and painting"),
            vec!["pottery", "camping", "painting"]
        );
        assert_eq!(answer_elements("sushi; ramen"), vec!["sushi", "ramen"]);
        assert_eq!(answer_elements("The Eiffel Tower"), vec!["eiffel tower"]);
        assert!(answer_elements(" , ; ").is_empty());
    }

    #[test]
    fn a_comma_inside_a_date_does_not_split_it() {
        assert_eq!(answer_elements("May 7, 2023"), vec!["may 7 2023"]);
        assert_eq!(
            answer_elements("7 May, 2023, and 8 June, 2023"),
            vec!["7 may 2023", "8 june 2023"]
        );
        // A bare year in a list of years stays an element of its own.
        assert_eq!(answer_elements("2021, 2022"), vec!["2021", "2022"]);
    }

    #[test]
    fn a_bracketed_alternative_is_accepted_too() {
        let gold = "25 minutes and 50 seconds (or 25:50)";
        assert_eq!(
            answer_alternatives(gold),
            vec!["25 minutes and 50 seconds", "25:50"]
        );
        assert_eq!(answer_recall("my best was 25:50!", gold), Some(1.0));
        assert_eq!(
            answer_recall("It took 25 minutes and 50 seconds.", gold),
            Some(1.0)
        );
        assert_eq!(answer_recall("about 26 minutes", gold), Some(0.0));
        // Brackets that offer no alternative are part of the answer.
        assert_eq!(
            answer_alternatives("Paris (France)"),
            vec!["Paris (France)"]
        );
    }

    #[test]
    fn every_element_must_appear_on_word_boundaries() {
        let memory = "Melanie: I love pottery. We went camping last week!";
        assert_eq!(answer_recall(memory, "pottery, camping"), Some(1.0));
        assert_eq!(
            answer_recall(memory, "pottery, camping, painting"),
            Some(0.0)
        );
        assert_eq!(answer_recall(memory, "camp"), Some(0.0));
        assert_eq!(answer_recall(memory, "The pottery."), Some(1.0));
        assert_eq!(answer_recall("", "pottery"), Some(0.0));
        assert_eq!(answer_recall(memory, ""), None);
    }

    #[test]
    fn numbers_and_case_are_normalised() {
        assert_eq!(
            answer_recall("It cost $1,200 in total.", "$1,200"),
            Some(1.0)
        );
        assert_eq!(answer_elements("1,200"), vec!["1 200"]);
        assert_eq!(answer_recall("SHE MOVED TO SWEDEN", "Sweden"), Some(1.0));
    }
}
