//! Write phase of M9: question–answer pairs synthesised from the history.
//!
//! Harness the Memory, M9: "an auxiliary LLM synthesizes question-answer
//! pairs from the incoming content". One LLM call per chunk (events cut at
//! event boundaries, at most `chunk_tokens`) asks for a JSON object
//! `{"qa": [{"q": …, "a": …}]}`; the reply is read with FlexA-Mem's lenient
//! JSON reader ([`submem_kit::json_repair`]) and, failing that, as
//! `Q: … / A: …` lines. Pairs with an empty side, an answer longer than
//! [`MAX_ANSWER_WORDS`] words, or an answer none of whose words occurs in the
//! chunk (small models invent facts) are dropped. An LLM pair is attributed to
//! every event of its chunk, so forgetting any of them drops it.
//!
//! **Rule fallback** (no LLM, a failed call, or no usable pair): one cloze
//! pair per event — the event's text with one salient word blanked (a proper
//! noun or number when there is one, else the longest non-stop word), asking
//! for the missing word. It teaches the adapter the text itself rather than
//! questions about it; it is the deviation that keeps M9 working without a
//! memory LLM.

use serde::{Deserialize, Serialize};
use submem_core::{ChatRequest, Event, Llm};
use submem_kit::json_repair::{parse_lenient_object, value_text};
use submem_kit::text::words;

/// Longest answer kept, in words.
pub const MAX_ANSWER_WORDS: usize = 30;

/// Words of context kept on each side of a cloze blank.
pub const CLOZE_CONTEXT_WORDS: usize = 24;

/// Where a pair came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QaOrigin {
    /// Synthesised by the memory LLM.
    Llm,
    /// The cloze rule.
    Rule,
}

/// One training pair and the events it was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QaPair {
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Source ids of the events it was made from.
    pub sources: Vec<String>,
    /// Who wrote it.
    pub origin: QaOrigin,
}

const QA_SYSTEM: &str =
    "You write quiz questions about a conversation so that someone can memorise its facts. \
Reply with JSON only.";

/// The synthesis request for a chunk's rendered text.
pub fn qa_request(chunk_text: &str, pairs: usize, max_tokens: usize) -> ChatRequest {
    let user = format!(
        "Conversation:\n{chunk_text}\n\nWrite {pairs} question-answer pairs about concrete facts in this conversation \
(who, what, when, where). Each answer is a few words taken from the conversation. \
Reply as JSON: {{\"qa\": [{{\"q\": \"question\", \"a\": \"answer\"}}]}}"
    );
    ChatRequest::instructed(QA_SYSTEM, user)
        .with_max_tokens(max_tokens)
        .with_json(true)
}

fn pair_from(v: &serde_json::Value) -> Option<(String, String)> {
    let o = v.as_object()?;
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| o.get(*k))
            .map(value_text)
            .map(|s| s.trim().to_string())
    };
    Some((get(&["q", "question", "Q"])?, get(&["a", "answer", "A"])?))
}

/// Question–answer pairs in an LLM reply (unvalidated).
pub fn parse_pairs(reply: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(obj) = parse_lenient_object(reply) {
        let list = ["qa", "pairs", "questions", "items"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(|v| v.as_array()));
        match list {
            Some(items) => out.extend(items.iter().filter_map(pair_from)),
            None => out.extend(pair_from(&serde_json::Value::Object(obj))),
        }
    }
    if out.is_empty() {
        let mut question: Option<String> = None;
        for line in reply.lines().map(str::trim) {
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("q:") || lower.starts_with("question:") {
                question = line.split_once(':').map(|(_, r)| r.trim().to_string());
            } else if lower.starts_with("a:") || lower.starts_with("answer:") {
                if let (Some(q), Some((_, a))) = (question.take(), line.split_once(':')) {
                    out.push((q, a.trim().to_string()));
                }
            }
        }
    }
    out
}

/// Keeps pairs with both sides, a short answer and an answer grounded in
/// `chunk_text` (at least one of its words occurs there).
pub fn validate_pairs(pairs: Vec<(String, String)>, chunk_text: &str) -> Vec<(String, String)> {
    let vocab: std::collections::HashSet<String> = words(chunk_text).collect();
    pairs
        .into_iter()
        .filter(|(q, a)| {
            !q.is_empty()
                && !a.is_empty()
                && a.split_whitespace().count() <= MAX_ANSWER_WORDS
                && words(a).any(|w| vocab.contains(&w))
        })
        .collect()
}

const STOP: &[&str] = &[
    "about", "after", "again", "also", "because", "been", "before", "being", "could", "does",
    "doing", "from", "have", "having", "into", "just", "like", "more", "much", "really", "should",
    "some", "such", "than", "that", "their", "them", "then", "there", "these", "they", "this",
    "those", "very", "want", "what", "when", "where", "which", "while", "will", "with", "would",
    "your", "yeah", "thanks", "thank", "that's", "it's", "i'm",
];

fn clean(w: &str) -> &str {
    w.trim_matches(|c: char| !c.is_alphanumeric())
}

/// Index of the word to blank in `tokens` (whitespace words), if any.
fn salient_word(tokens: &[&str]) -> Option<usize> {
    let proper = tokens.iter().enumerate().skip(1).find(|(i, w)| {
        let w = clean(w);
        let prev_ends = tokens[*i - 1].ends_with(['.', '!', '?']);
        !prev_ends
            && w.len() > 1
            && w.chars().next().is_some_and(char::is_uppercase)
            && !STOP.contains(&w.to_lowercase().as_str())
    });
    if let Some((i, _)) = proper {
        return Some(i);
    }
    if let Some((i, _)) = tokens
        .iter()
        .enumerate()
        .find(|(_, w)| clean(w).chars().any(|c| c.is_ascii_digit()))
    {
        return Some(i);
    }
    tokens
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            let c = clean(w);
            c.chars().count() >= 4 && !STOP.contains(&c.to_lowercase().as_str())
        })
        .max_by_key(|(i, w)| (clean(w).chars().count(), std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
}

/// The cloze pair of one event, if it has a word worth blanking.
pub fn cloze_pair(event: &Event) -> Option<QaPair> {
    let (lead, body) = match event {
        Event::Turn(t) => (
            match &t.session_date {
                Some(d) => format!("On {d}, {} said", t.speaker),
                None => format!("{} said", t.speaker),
            },
            t.text.clone(),
        ),
        Event::Step(s) => (
            format!(
                "At step {}, after \"{}\", the environment said",
                s.step, s.action
            ),
            s.observation.clone(),
        ),
    };
    let tokens: Vec<&str> = body.split_whitespace().collect();
    let i = salient_word(&tokens)?;
    let answer = clean(tokens[i]).to_string();
    if answer.is_empty() {
        return None;
    }
    let from = i.saturating_sub(CLOZE_CONTEXT_WORDS);
    let to = (i + 1 + CLOZE_CONTEXT_WORDS).min(tokens.len());
    let mut shown: Vec<String> = tokens[from..to].iter().map(|w| w.to_string()).collect();
    shown[i - from] = tokens[i].replace(&answer, "____");
    Some(QaPair {
        question: format!("{lead}: \"{}\". Which word is missing?", shown.join(" ")),
        answer,
        sources: vec![event.source_id().to_string()],
        origin: QaOrigin::Rule,
    })
}

/// Pairs for one chunk: LLM pairs when `llm` gives usable ones, else cloze
/// pairs. Returns the pairs and whether the rule fallback was used.
pub async fn chunk_pairs(
    llm: Option<&dyn Llm>,
    events: &[Event],
    pairs: usize,
    max_tokens: usize,
) -> (Vec<QaPair>, bool) {
    let text = events
        .iter()
        .map(Event::render)
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(llm) = llm {
        match llm.complete(&qa_request(&text, pairs, max_tokens)).await {
            Ok(c) => {
                let valid = validate_pairs(parse_pairs(&c.text), &text);
                if !valid.is_empty() {
                    let sources: Vec<String> =
                        events.iter().map(|e| e.source_id().to_string()).collect();
                    let out = valid
                        .into_iter()
                        .take(pairs)
                        .map(|(question, answer)| QaPair {
                            question,
                            answer,
                            sources: sources.clone(),
                            origin: QaOrigin::Llm,
                        })
                        .collect();
                    return (out, false);
                }
                tracing::debug!("M9: no usable QA pair in the reply; cloze fallback");
            }
            Err(e) => tracing::warn!(error = %e, "M9: QA synthesis failed; cloze fallback"),
        }
    }
    (events.iter().filter_map(cloze_pair).collect(), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::Turn;

    fn turn(text: &str) -> Event {
        Event::Turn(Turn {
            session_id: "s".into(),
            session_date: Some("8 May 2023".into()),
            speaker: "Ana".into(),
            text: text.into(),
            source_id: "D1:1".into(),
        })
    }

    #[test]
    fn parses_sloppy_json_and_lines() {
        let r = "Sure! ```json\n{qa: [{'q': 'Where does Ana live?', 'a': 'Oslo'}, {\"question\": \"Pet?\", \"answer\": \"a cat\"},]}\n```";
        assert_eq!(
            parse_pairs(r),
            vec![
                ("Where does Ana live?".to_string(), "Oslo".to_string()),
                ("Pet?".to_string(), "a cat".to_string())
            ]
        );
        let lines = "Q: Who teaches violin?\nA: Berg\nnoise";
        assert_eq!(
            parse_pairs(lines),
            vec![("Who teaches violin?".into(), "Berg".into())]
        );
        assert!(parse_pairs("no pairs here").is_empty());
    }

    #[test]
    fn drops_ungrounded_and_empty_pairs() {
        let pairs = vec![
            ("Where?".to_string(), "Oslo".to_string()),
            ("Who?".to_string(), "Napoleon".to_string()),
            ("".to_string(), "Oslo".to_string()),
        ];
        assert_eq!(
            validate_pairs(pairs, "Ana: I moved to Oslo."),
            vec![("Where?".into(), "Oslo".into())]
        );
    }

    #[test]
    fn cloze_blanks_a_proper_noun_first() {
        let p = cloze_pair(&turn(
            "My violin teacher is called Berg and she lives far away.",
        ))
        .unwrap();
        assert_eq!(p.answer, "Berg");
        assert!(p.question.contains("called ____ and"), "{}", p.question);
        assert!(p.question.starts_with("On 8 May 2023, Ana said"));
        assert_eq!(p.sources, vec!["D1:1"]);
        let p = cloze_pair(&turn("we walked by the river yesterday")).unwrap();
        assert_eq!(p.answer, "yesterday");
        assert!(cloze_pair(&turn("ok")).is_none());
    }

    #[tokio::test]
    async fn llm_pairs_or_fallback() {
        use submem_core::test_utils::{FailingLlm, ScriptedLlm};
        let events = vec![turn("I moved to Oslo last spring.")];
        let llm = ScriptedLlm::new(vec![
            r#"{"qa":[{"q":"Where did Ana move?","a":"Oslo"}]}"#.into()
        ]);
        let (p, fallback) = chunk_pairs(Some(&llm), &events, 4, 128).await;
        assert!(!fallback);
        assert_eq!((p[0].answer.as_str(), p[0].origin), ("Oslo", QaOrigin::Llm));
        let (p, fallback) = chunk_pairs(Some(&FailingLlm), &events, 4, 128).await;
        assert!(fallback);
        assert_eq!(p[0].answer, "Oslo");
        let (p, fallback) = chunk_pairs(None, &events, 4, 128).await;
        assert!(fallback && p[0].origin == QaOrigin::Rule);
    }
}
