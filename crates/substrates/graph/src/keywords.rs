//! The read step's keyword extraction (LightRAG's dual-level keywords):
//! *low-level* keywords name specific entities, *high-level* keywords name
//! themes. With an LLM one call returns them as JSON, read with FlexA-Mem's
//! lenient JSON reader (small models write sloppy JSON); without one, or
//! when the answer yields no keyword, rules derive them from the query.

use submem_core::{ChatMessage, ChatRequest};
use submem_kit::json_repair::{parse_lenient_object, string_list};
use submem_kit::text::content_words;

use crate::extract::rule_mentions;

/// The query's two keyword levels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keywords {
    /// Specific entities, names, dates.
    pub low: Vec<String>,
    /// Themes and concepts.
    pub high: Vec<String>,
}

impl Keywords {
    /// True when neither level has a keyword.
    pub fn is_empty(&self) -> bool {
        self.low.is_empty() && self.high.is_empty()
    }
}

const KEYWORD_PROMPT: &str = "Give the keywords of the question as JSON with two lists: \
\"high_level_keywords\" for its themes and \"low_level_keywords\" for the specific names, things and dates.
Example question: When did Mia adopt her puppy in Denver?
Example answer: {\"high_level_keywords\": [\"pet adoption\", \"time\"], \"low_level_keywords\": [\"Mia\", \"puppy\", \"Denver\"]}

Question: ";

/// The keyword request for `question`.
pub fn keyword_request(question: &str, max_tokens: usize) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(format!(
        "{KEYWORD_PROMPT}{question}\nAnswer:"
    ))])
    .with_max_tokens(max_tokens)
    .with_json(true)
}

/// Reads the model's answer; keys are matched loosely (`high…`, `low…`).
/// Keywords copied from the prompt's example are dropped unless the question
/// has them.
pub fn parse_keywords(answer: &str, question: &str) -> Keywords {
    let Some(obj) = parse_lenient_object(answer) else {
        return Keywords::default();
    };
    let q = question.to_lowercase();
    let example = ["pet adoption", "time", "mia", "puppy", "denver"];
    let mut kw = Keywords::default();
    for (key, value) in &obj {
        let k = key.to_lowercase();
        let list: Vec<String> = string_list(Some(value))
            .into_iter()
            .filter(|w| {
                let l = w.to_lowercase();
                !example.contains(&l.as_str()) || q.contains(&l)
            })
            .collect();
        if k.starts_with("high") {
            kw.high.extend(list);
        } else if k.starts_with("low") {
            kw.low.extend(list);
        }
    }
    kw
}

/// Rule keywords: capitalised spans and numbers are low-level (all content
/// words when there are none); the content words together are the one
/// high-level keyword.
pub fn rule_keywords(question: &str) -> Keywords {
    let words: Vec<String> = content_words(question)
        .into_iter()
        .filter(|w| {
            !matches!(
                w.as_str(),
                "what" | "when" | "where" | "who" | "why" | "how" | "which" | "did" | "does" | "do"
            )
        })
        .collect();
    let mut low: Vec<String> = rule_mentions(question)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    if low.is_empty() {
        low = words.clone();
    }
    let high = if words.is_empty() {
        Vec::new()
    } else {
        vec![words.join(" ")]
    };
    Keywords { low, high }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sloppy_json_and_drops_example_echoes() {
        let kw = parse_keywords(
            "```json\n{'high_level_keywords': ['music lessons', 'time'], low_level_keywords: [\"Ana\", 'violin', 'Mia']",
            "When did Ana start violin?",
        );
        assert_eq!(kw.high, vec!["music lessons"]);
        assert_eq!(kw.low, vec!["Ana", "violin"]);
        assert!(parse_keywords("no json here", "q").is_empty());
    }

    #[test]
    fn rules_use_names_then_content_words() {
        let kw = rule_keywords("What did Caroline do in May 2023?");
        assert_eq!(kw.low, vec!["Caroline", "May 2023"]);
        assert_eq!(kw.high, vec!["caroline may 2023"]);
        let kw = rule_keywords("what is the violin teacher called?");
        assert_eq!(kw.low, vec!["violin", "teacher", "called"]);
    }
}
