//! The shared history: conversational turns and agent steps, grouped per
//! namespace. Every substrate ingests the same [`Event`]s, which is what makes
//! their costs and recalls comparable.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::{Error, Result};

/// A tenant of memory: one user, agent or run. Substrates never let a read in
/// one namespace see events written to another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Namespace(String);

impl Namespace {
    /// Creates a namespace; it must be non-empty, at most 256 bytes, and free of
    /// control characters and path separators (it may name a directory).
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() || name.len() > 256 {
            return Err(Error::InvalidInput(format!(
                "namespace must be 1..=256 bytes, got {}",
                name.len()
            )));
        }
        if name
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\')
            || name == "."
            || name == ".."
        {
            return Err(Error::InvalidInput(format!(
                "namespace {name:?} contains a control character or path separator"
            )));
        }
        Ok(Namespace(name))
    }

    /// The namespace's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One utterance of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Session the turn belongs to (LoCoMo `session_3`, LongMemEval session id).
    pub session_id: String,
    /// Date and time of the session as written by the dataset, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_date: Option<String>,
    /// Who spoke.
    pub speaker: String,
    /// What was said.
    pub text: String,
    /// Stable id of the turn, e.g. LoCoMo's `D1:3`; used for Recall@k and forgetting.
    pub source_id: String,
}

/// One action of an agent and what the environment answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based step number within the episode.
    pub step: u32,
    /// The action or command the agent issued.
    pub action: String,
    /// The environment's output.
    pub observation: String,
    /// Stable id of the step, e.g. `run7:12`.
    pub source_id: String,
}

/// One event of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A conversational turn.
    Turn(Turn),
    /// An agent step.
    Step(Step),
}

impl Event {
    /// The event's stable source id.
    pub fn source_id(&self) -> &str {
        match self {
            Event::Turn(t) => &t.source_id,
            Event::Step(s) => &s.source_id,
        }
    }

    /// The text a substrate stores and shows for this event.
    ///
    /// Turns render as `[date] speaker: text` (the date only when known) so that
    /// temporal questions can be answered from the rendered memory; steps render
    /// as `[step n] > action` followed by the observation.
    pub fn render(&self) -> String {
        match self {
            Event::Turn(t) => match &t.session_date {
                Some(d) => format!("[{d}] {}: {}", t.speaker, t.text),
                None => format!("{}: {}", t.speaker, t.text),
            },
            Event::Step(s) => format!("[step {}] > {}\n{}", s.step, s.action, s.observation),
        }
    }

    /// The searchable content of the event: [`Event::render`] without its
    /// framing (no session date, no step number). A turn keeps its speaker
    /// (`Speaker: text`), since questions name people; a step is its action
    /// and observation on two lines.
    pub fn content(&self) -> String {
        match self {
            Event::Turn(t) => format!("{}: {}", t.speaker, t.text),
            Event::Step(s) => format!("{}\n{}", s.action, s.observation),
        }
    }

    /// Checks the event for problems a substrate cannot recover from.
    pub fn validate(&self) -> Result<()> {
        if self.source_id().is_empty() {
            return Err(Error::InvalidInput("event has an empty source_id".into()));
        }
        Ok(())
    }
}

/// A time-ordered history of one namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Whose history it is.
    pub namespace: Namespace,
    /// The events, oldest first.
    pub events: Vec<Event>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_rejects_bad_names() {
        assert!(Namespace::new("").is_err());
        assert!(Namespace::new("a/b").is_err());
        assert!(Namespace::new("..").is_err());
        assert!(Namespace::new("x\u{0}").is_err());
        assert!(Namespace::new("user-42").is_ok());
    }

    #[test]
    fn events_round_trip_through_json() {
        let e = Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: Some("8 May 2023".into()),
            speaker: "Caroline".into(),
            text: "I went to a support group.".into(),
            source_id: "D1:3".into(),
        });
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains("\"kind\":\"turn\""));
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert_eq!(
            back.render(),
            "[8 May 2023] Caroline: I went to a support group."
        );
    }

    #[test]
    fn step_renders_action_then_observation() {
        let e = Event::Step(Step {
            step: 3,
            action: "go to desk 1".into(),
            observation: "You see a key.".into(),
            source_id: "r:3".into(),
        });
        assert_eq!(e.render(), "[step 3] > go to desk 1\nYou see a key.");
    }
}
