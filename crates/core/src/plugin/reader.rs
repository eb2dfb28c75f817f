//! The reader's prompt, as a build input: the few substrates that serve
//! their own reader (M9 trains an adapter on the prompt it will be asked
//! with, M11 prefills KV caches that a reader request must continue) have to
//! frame memory exactly as the caller's reader does. The caller says how
//! through [`BuildContext::with_reader`](super::BuildContext::with_reader);
//! [`ReaderPrompt::default`] is the one `submem bench` reads with.

use serde::{Deserialize, Serialize};

use crate::ChatMessage;

/// The default reader's system message.
pub const READER_SYSTEM: &str =
    "You answer questions from a memory of earlier conversations or agent steps. \
Use only the memory. Reply with a short answer of a few words, without explanation. \
If the memory does not contain the answer, reply: I don't know.";

/// What the default reader's user message starts with, right before the
/// memory block.
pub const MEMORY_INTRO: &str = "Memory:\n";

/// How a reader frames memory and a question as chat messages: an optional
/// system message, then one user message of `memory_intro`, the memory,
/// `question_intro`, the question and `answer_cue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderPrompt {
    /// The system message; `None` sends none (the model's default).
    pub system: Option<String>,
    /// Text before the memory block.
    pub memory_intro: String,
    /// Text between the memory block and the question.
    pub question_intro: String,
    /// Text after the question, where the answer starts.
    pub answer_cue: String,
}

impl Default for ReaderPrompt {
    fn default() -> Self {
        ReaderPrompt {
            system: Some(READER_SYSTEM.to_string()),
            memory_intro: MEMORY_INTRO.to_string(),
            question_intro: "\n\nQuestion: ".to_string(),
            answer_cue: "\nAnswer:".to_string(),
        }
    }
}

impl ReaderPrompt {
    /// The messages asking `question` over `memory`.
    ///
    /// ```
    /// use submem_core::plugin::ReaderPrompt;
    /// let m = ReaderPrompt::default().messages("Alice lives in Oslo.", "Where does Alice live?");
    /// assert_eq!(m[1].content, "Memory:\nAlice lives in Oslo.\n\nQuestion: Where does Alice live?\nAnswer:");
    /// ```
    pub fn messages(&self, memory: &str, question: &str) -> Vec<ChatMessage> {
        let mut out = self.head(memory);
        if let Some(user) = out.last_mut() {
            user.content.push_str(&self.question_intro);
            user.content.push_str(question);
            user.content.push_str(&self.answer_cue);
        }
        out
    }

    /// The messages up to and including `memory`: the prefix a request for
    /// any question over this memory starts with.
    pub fn head(&self, memory: &str) -> Vec<ChatMessage> {
        head_messages(self.system.as_deref(), &self.memory_intro, memory)
    }
}

/// The system message, if any, then a user message of `memory_intro` and
/// `memory`: the head of every reader request, and what M11 prefills.
pub fn head_messages(system: Option<&str>, memory_intro: &str, memory: &str) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(2);
    if let Some(s) = system {
        out.push(ChatMessage::system(s));
    }
    out.push(ChatMessage::user(format!("{memory_intro}{memory}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_a_prefix_of_every_question() {
        let p = ReaderPrompt::default();
        let head = p.head("notes");
        let full = p.messages("notes", "Why?");
        assert_eq!(head.len(), full.len());
        assert_eq!(head[0], full[0]);
        assert!(full[1].content.starts_with(&head[1].content));
        let bare = ReaderPrompt {
            system: None,
            ..ReaderPrompt::default()
        };
        assert_eq!(bare.messages("m", "q").len(), 1);
    }
}
