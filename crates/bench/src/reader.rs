//! The shared reader prompt every substrate's recall goes into, and the LLM
//! judge rubrics (P4).
//!
//! **Reader.** One template for all substrates: by default a system message,
//! then the memory block, the question (with its date when the dataset gives
//! one, and the newest observation for agentic probes) and `Answer:`; a run
//! may read with its own template instead ([`ReaderSettings::prompt`], see
//! [`crate::prompt`]). The fixed part `|P|` is counted with the budget
//! counter on the template in use with an empty memory block, plus
//! [`CHAT_FRAMING_TOKENS`] for the chat markers and the answer's room
//! ([`ReaderSettings::max_answer_tokens`]), so that
//! [`submem_core::Query::allowance`] is exactly the room the memory may take.
//!
//! **Judge.** LoCoMo, the synthetic set and agent probes use the binary
//! CORRECT/WRONG rubric of Mem0 (generous on paraphrase and on date formats);
//! LongMemEval uses its authors' per-type rubric (standard, temporal with
//! off-by-one tolerance, knowledge-update accepting the latest value,
//! abstention asking whether the model declined). The synthetic set's
//! updated facts use the knowledge-update rubric too. A run's own judge
//! template ([`crate::prompt::JudgeTemplate`]) replaces them all.

use std::sync::Arc;

use submem_core::{ChatMessage, ChatRequest, Completion, Llm, TokenCounter};

use crate::dataset::{DatasetKind, Question, QuestionKind};
use crate::prompt::{JudgeTemplate, ReaderTemplate};
use crate::{BenchError, Result};

/// Tokens allowed for chat-template markers around the two messages.
pub const CHAT_FRAMING_TOKENS: usize = 12;

/// The reader's system message (the default
/// [`ReaderPrompt`](submem_core::plugin::ReaderPrompt)'s, so that the
/// substrates serving their own reader, M9 and M11, frame memory the same way).
pub use submem_core::plugin::READER_SYSTEM;

/// What the reader's user message starts with, right before the memory
/// block (M11 prefills its episode caches under this head).
pub use submem_core::plugin::MEMORY_INTRO;

/// Reader settings.
#[derive(Debug, Clone)]
pub struct ReaderSettings {
    /// Most tokens of an answer.
    pub max_answer_tokens: usize,
    /// The reader's prompt template (the built-in one unless a run names
    /// its own): the prompt asked, and the fixed part `|P|` counted.
    pub prompt: ReaderTemplate,
}

impl Default for ReaderSettings {
    fn default() -> Self {
        ReaderSettings {
            max_answer_tokens: 32,
            prompt: ReaderTemplate::builtin(),
        }
    }
}

/// The built-in reader's messages for `question` with `memory` (what
/// [`ReaderTemplate::builtin`] renders).
pub fn reader_messages(question: &Question, memory: &str) -> Vec<ChatMessage> {
    let mut user = String::with_capacity(memory.len() + 256);
    user.push_str(MEMORY_INTRO);
    user.push_str(memory);
    user.push_str("\n\n");
    if let Some(newest) = &question.newest {
        user.push_str("Current observation:\n");
        user.push_str(newest);
        user.push_str("\n\n");
    }
    if let Some(date) = &question.date {
        user.push_str("Today is ");
        user.push_str(date);
        user.push_str(".\n");
    }
    user.push_str("Question: ");
    user.push_str(&question.text);
    user.push_str("\nAnswer:");
    vec![ChatMessage::system(READER_SYSTEM), ChatMessage::user(user)]
}

/// `|P|`: the reader prompt of `settings` without memory, framing, and
/// room for the answer.
pub fn fixed_prompt_tokens(
    question: &Question,
    counter: &dyn TokenCounter,
    settings: &ReaderSettings,
) -> usize {
    settings
        .prompt
        .messages(question, "")
        .iter()
        .map(|m| counter.count(&m.content))
        .sum::<usize>()
        + CHAT_FRAMING_TOKENS
        + settings.max_answer_tokens
}

/// Cleans a reader reply into a short answer: first non-empty line, trimmed,
/// without a leading `Answer:`.
pub fn clean_answer(reply: &str) -> String {
    let line = reply
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = line.strip_prefix("Answer:").unwrap_or(line);
    line.trim().to_string()
}

/// `llm`'s completion of `req`, its failure named by `role` and question.
async fn complete(
    llm: &Arc<dyn Llm>,
    role: &str,
    question: &Question,
    req: &ChatRequest,
) -> Result<Completion> {
    llm.complete(req).await.map_err(|e| BenchError::Service {
        what: format!("{role} {} on question {}", llm.name(), question.id),
        source: e,
    })
}

/// Asks `reader` the question with the prompt of `settings`; returns
/// (answer, tokens used).
pub async fn answer(
    reader: &Arc<dyn Llm>,
    question: &Question,
    memory: &str,
    settings: &ReaderSettings,
) -> Result<(String, u64)> {
    let req = ChatRequest::new(settings.prompt.messages(question, memory))
        .with_max_tokens(settings.max_answer_tokens);
    let c = complete(reader, "reader", question, &req).await?;
    Ok((
        clean_answer(&c.text),
        c.usage.input_tokens + c.usage.output_tokens,
    ))
}

const MEM0_RUBRIC: &str = "Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given the following data:
    (1) a question (posed by one user to another user),
    (2) a 'gold' (ground truth) answer,
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like \"last Tuesday\" or \"next month\"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., \"May 7th\" vs \"7 May\"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold}
Generated answer: {answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.";

const LME_STANDARD: &str = "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no.";
const LME_TEMPORAL_EXTRA: &str = " In addition, do not penalize off-by-one errors for the number of days. If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct.";
const LME_UPDATE_EXTRA: &str = " If the response contains some previous information along with an updated answer, the response should be considered as correct as long as the updated answer is the required answer.";
const LME_ABSTENTION: &str = "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the model correctly identifies the question as unanswerable. The model could say that the information is incomplete, or some other information is given but the asked information is not.";

/// Which rubric a judge prompt uses, and how its reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rubric {
    /// Mem0's binary CORRECT/WRONG rubric.
    Mem0,
    /// LongMemEval standard.
    LmeStandard,
    /// LongMemEval temporal reasoning (off-by-one tolerant).
    LmeTemporal,
    /// LongMemEval knowledge update (latest value).
    LmeKnowledgeUpdate,
    /// LongMemEval abstention (did the model decline?).
    LmeAbstention,
}

/// The rubric for a question of `dataset`.
pub fn rubric_for(dataset: DatasetKind, kind: QuestionKind) -> Rubric {
    match (dataset, kind) {
        (DatasetKind::LongMemEval, QuestionKind::Temporal) => Rubric::LmeTemporal,
        (DatasetKind::LongMemEval, QuestionKind::Abstention) | (_, QuestionKind::Abstention) => {
            Rubric::LmeAbstention
        }
        (_, QuestionKind::KnowledgeUpdate) => Rubric::LmeKnowledgeUpdate,
        (DatasetKind::LongMemEval, _) => Rubric::LmeStandard,
        _ => Rubric::Mem0,
    }
}

/// The judge prompt.
pub fn judge_prompt(rubric: Rubric, question: &str, gold: &str, answer: &str) -> String {
    match rubric {
        Rubric::Mem0 => MEM0_RUBRIC
            .replace("{question}", question)
            .replace("{gold}", gold)
            .replace("{answer}", answer),
        Rubric::LmeAbstention => format!(
            "{LME_ABSTENTION}\n\nQuestion: {question}\n\nExplanation: {gold}\n\nModel Response: {answer}\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only."
        ),
        other => {
            let extra = match other {
                Rubric::LmeTemporal => LME_TEMPORAL_EXTRA,
                Rubric::LmeKnowledgeUpdate => LME_UPDATE_EXTRA,
                _ => "",
            };
            format!(
                "{LME_STANDARD}{extra}\n\nQuestion: {question}\n\nCorrect Answer: {gold}\n\nModel Response: {answer}\n\nIs the model response correct? Answer yes or no only."
            )
        }
    }
}

/// Reads a judge reply: `Some(true)` for CORRECT / yes, `Some(false)` for
/// WRONG / INCORRECT / no, `None` when neither can be found.
pub fn parse_verdict(rubric: Rubric, reply: &str) -> Option<bool> {
    let up = reply.to_uppercase();
    if rubric == Rubric::Mem0 {
        // The rubric asks to finish with the label: the last label wins.
        let wrong = up.rfind("WRONG").max(up.rfind("INCORRECT"));
        let correct = up
            .match_indices("CORRECT")
            .map(|(i, _)| i)
            .filter(|&i| !(i >= 2 && &up.as_bytes()[i - 2..i] == b"IN"))
            .last();
        return match (correct, wrong) {
            (Some(c), Some(w)) => Some(c > w),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        };
    }
    first_word_yes_no(reply).or_else(|| {
        let has_yes = up.contains("YES");
        let has_no = up.split(|c: char| !c.is_alphanumeric()).any(|w| w == "NO");
        match (has_yes, has_no) {
            (true, false) => Some(true),
            (false, true) => Some(false),
            _ => None,
        }
    })
}

/// `Some(true)` when `reply`'s first word is yes, `Some(false)` when it is no.
pub(crate) fn first_word_yes_no(reply: &str) -> Option<bool> {
    let first = reply
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    if first.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if first.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// Asks `judge` for a verdict on `answer` with `template` (the built-in
/// rubric of the dataset and question type, or the run's own template);
/// returns the verdict and the raw reply.
pub async fn judge(
    judge: &Arc<dyn Llm>,
    template: &JudgeTemplate,
    dataset: DatasetKind,
    question: &Question,
    gold: &str,
    answer: &str,
) -> Result<Verdict> {
    let rubric = rubric_for(dataset, question.kind);
    let req = ChatRequest::new(vec![ChatMessage::user(template.prompt(
        rubric,
        &question.text,
        gold,
        answer,
    ))])
    .with_max_tokens(96);
    let c = complete(judge, "judge", question, &req).await?;
    Ok(Verdict {
        correct: template.verdict(rubric, &c.text),
        tokens: c.usage.input_tokens + c.usage.output_tokens,
        reply: c.text,
    })
}

/// The judge's reading of one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// CORRECT / WRONG; `None` when the reply was unreadable.
    pub correct: Option<bool>,
    /// The judge's raw reply.
    pub reply: String,
    /// Tokens the judge call used (prompt + reply), as the judge counted them.
    pub tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::{ScriptedLlm, WhitespaceCounter};
    use submem_core::Regime;

    #[test]
    fn a_plain_question_is_framed_as_the_default_reader_prompt() {
        // M9 trains on, and M11 prefills under, the build context's reader
        // prompt: it must be the prompt this reader asks with.
        let memory = "Ana drives a red Fiat.";
        let mut plain = q();
        plain.date = None;
        plain.newest = None;
        assert_eq!(
            reader_messages(&plain, memory),
            submem_core::plugin::ReaderPrompt::default().messages(memory, &plain.text)
        );
    }

    fn q() -> Question {
        Question {
            id: "q1".into(),
            text: "What is Ana's car?".into(),
            answer: Some("red Fiat".into()),
            evidence: vec![],
            category: "x".into(),
            kind: QuestionKind::Standard,
            regime: Regime::Conversational,
            newest: None,
            date: Some("1 May 2023".into()),
        }
    }

    #[test]
    fn fixed_prompt_counts_everything_but_memory() {
        let s = ReaderSettings::default();
        let p = fixed_prompt_tokens(&q(), &WhitespaceCounter, &s);
        let with_memory: usize = reader_messages(&q(), "one two three")
            .iter()
            .map(|m| WhitespaceCounter.count(&m.content))
            .sum();
        assert_eq!(
            with_memory + CHAT_FRAMING_TOKENS + s.max_answer_tokens,
            p + 3
        );
        assert!(reader_messages(&q(), "M")
            .last()
            .unwrap()
            .content
            .contains("Today is 1 May 2023."));
    }

    #[test]
    fn verdict_parsing() {
        assert_eq!(parse_verdict(Rubric::Mem0, "Same car. CORRECT"), Some(true));
        assert_eq!(
            parse_verdict(Rubric::Mem0, "It is incorrect. WRONG"),
            Some(false)
        );
        assert_eq!(parse_verdict(Rubric::Mem0, "INCORRECT"), Some(false));
        assert_eq!(
            parse_verdict(Rubric::Mem0, "{\"label\": \"CORRECT\"}"),
            Some(true)
        );
        assert_eq!(parse_verdict(Rubric::Mem0, "hmm"), None);
        assert_eq!(parse_verdict(Rubric::LmeStandard, "Yes."), Some(true));
        assert_eq!(parse_verdict(Rubric::LmeTemporal, "no"), Some(false));
        assert_eq!(
            parse_verdict(Rubric::LmeAbstention, "The answer is yes"),
            Some(true)
        );
    }

    #[test]
    fn rubric_dispatch() {
        assert_eq!(
            rubric_for(DatasetKind::Locomo, QuestionKind::Temporal),
            Rubric::Mem0
        );
        assert_eq!(
            rubric_for(DatasetKind::LongMemEval, QuestionKind::Temporal),
            Rubric::LmeTemporal
        );
        assert_eq!(
            rubric_for(DatasetKind::Synthetic, QuestionKind::KnowledgeUpdate),
            Rubric::LmeKnowledgeUpdate
        );
        assert_eq!(
            rubric_for(DatasetKind::LongMemEval, QuestionKind::Abstention),
            Rubric::LmeAbstention
        );
        assert!(judge_prompt(Rubric::LmeTemporal, "q", "g", "a").contains("off-by-one"));
        assert!(judge_prompt(Rubric::Mem0, "Q?", "G", "A").contains("Gold answer: G"));
    }

    #[tokio::test]
    async fn answer_and_judge_through_an_llm() {
        let reader: Arc<dyn Llm> = Arc::new(ScriptedLlm::new(vec![
            "\nAnswer: a red Fiat\nbecause".into(),
        ]));
        let (a, _) = answer(
            &reader,
            &q(),
            "Ana: my car is a red Fiat",
            &ReaderSettings::default(),
        )
        .await
        .unwrap();
        assert_eq!(a, "a red Fiat");
        let j: Arc<dyn Llm> = Arc::new(ScriptedLlm::new(vec!["Matches. CORRECT".into()]));
        assert_eq!(
            judge(
                &j,
                &JudgeTemplate::builtin(),
                DatasetKind::Locomo,
                &q(),
                "red Fiat",
                &a
            )
            .await
            .unwrap()
            .correct,
            Some(true)
        );
    }
}
