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

use submem_core::{ChatMessage, ChatRequest, Completion, Llm};

use crate::dataset::{DatasetKind, Question};
use crate::prompt::JudgeTemplate;
use crate::{BenchError, Result};

pub use crate::prompt::builtin::{
    fixed_prompt_tokens, judge_prompt, parse_verdict, reader_messages, rubric_for, ReaderSettings,
    Rubric, CHAT_FRAMING_TOKENS, MEMORY_INTRO, READER_SYSTEM,
};

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
    use crate::dataset::QuestionKind;
    use submem_core::test_utils::{ScriptedLlm, WhitespaceCounter};
    use submem_core::Regime;
    use submem_core::TokenCounter;

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
