//! The built-in prompts: the reader's framing (its system message, memory
//! head and question lines) with the room it leaves memory, and the judge
//! rubrics (Mem0's; LongMemEval's per question type) with how their replies
//! are read. [`crate::reader`] asks models with them; the templates of
//! [`super`] render the same built-ins by default.

use submem_core::{ChatMessage, TokenCounter};

use super::ReaderTemplate;
use crate::dataset::{DatasetKind, Question, QuestionKind};

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
