//! The per-namespace event journal both substrates keep: every live event in
//! write order, cut into episodes. Strategies and skills are *derived* from it,
//! so forgetting an event can re-derive what it fed without the event.
//!
//! ## The episode rule
//! A history is cut into episodes (finished trajectories) as follows:
//! - **Steps** belong to the episode named by their source id up to the last
//!   `:` (the harness writes `<episode>:<step>`, e.g. `react_put_0:12`); a
//!   step with another prefix starts a new episode and **finishes** the open
//!   one.
//! - **Turns** belong to their session (`session_id`): a conversation is read
//!   as a sequence of episodes, one per session. This is our choice: the paper
//!   applies M7/M8 to trajectories only; treating a session as an episode lets
//!   both substrates serve conversational queries instead of refusing them.
//! - An observation containing a success or failure marker
//!   ([`crate::EpisodeConfig`]) is the environment's signal: the episode
//!   finishes there, labelled by the environment.
//! - `manage()` finishes every still-open episode: the harness calls it after
//!   writing a whole history, which is where the data's last episode ends.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};

use submem_core::{Event, Result, TokenCounter};
use submem_kit::batch::check_new_sources;

use crate::EpisodeConfig;

/// How an episode ended, as far as the environment told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// A success marker was observed.
    Success,
    /// A failure marker was observed.
    Failure,
}

/// One live event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Write order within the namespace.
    pub position: u64,
    /// Episode serial.
    pub episode: u64,
    /// The event.
    pub event: Event,
    /// Budget tokens of its rendering.
    pub tokens: u32,
}

/// One episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// Serial within the namespace.
    pub id: u64,
    /// The key the rule groups by (step prefix or `session:<id>`).
    pub key: String,
    /// Still receiving events.
    pub open: bool,
    /// The environment's signal, if any.
    pub signal: Option<Signal>,
}

/// The journal of one namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Journal {
    entries: Vec<Entry>,
    episodes: BTreeMap<u64, Episode>,
    next_position: u64,
    next_episode: u64,
    #[serde(skip)]
    ids: HashSet<String>,
}

/// The key of the episode an event belongs to (see the module docs).
pub fn episode_key(event: &Event) -> String {
    match event {
        Event::Step(s) => match s.source_id.rsplit_once(':') {
            Some((prefix, _)) => format!("trajectory:{prefix}"),
            None => "trajectory".to_string(),
        },
        Event::Turn(t) => format!("session:{}", t.session_id),
    }
}

impl Journal {
    /// Rebuilds the id index after deserialising; rejects duplicates.
    pub fn reindex(&mut self) -> std::result::Result<(), String> {
        self.ids.clear();
        for e in &self.entries {
            if !self.ids.insert(e.event.source_id().to_string()) {
                return Err(format!("source id {} appears twice", e.event.source_id()));
            }
            if !self.episodes.contains_key(&e.episode) {
                return Err(format!("event of unknown episode {}", e.episode));
            }
        }
        Ok(())
    }

    /// Refuses a batch with empty, repeated or already stored source ids.
    pub fn validate(&self, events: &[Event]) -> Result<()> {
        check_new_sources(events, |id| self.ids.contains(id))
    }

    /// Appends a validated batch; returns the episodes it finished, oldest
    /// first.
    pub fn append(
        &mut self,
        events: &[Event],
        counter: &dyn TokenCounter,
        config: &EpisodeConfig,
    ) -> Vec<u64> {
        let mut finished = Vec::new();
        for event in events {
            let key = episode_key(event);
            let current = self
                .open_episode()
                .filter(|ep| ep.key == key)
                .map(|ep| ep.id);
            let id = match current {
                Some(id) => id,
                None => {
                    if let Some(open) = self.open_episode_mut() {
                        open.open = false;
                        finished.push(open.id);
                    }
                    let id = self.next_episode;
                    self.next_episode += 1;
                    self.episodes.insert(
                        id,
                        Episode {
                            id,
                            key,
                            open: true,
                            signal: None,
                        },
                    );
                    id
                }
            };
            let tokens = u32::try_from(counter.count(&event.render())).unwrap_or(u32::MAX);
            self.entries.push(Entry {
                position: self.next_position,
                episode: id,
                event: event.clone(),
                tokens,
            });
            self.next_position += 1;
            self.ids.insert(event.source_id().to_string());
            if let Event::Step(s) = event {
                let signal = if config
                    .success_markers
                    .iter()
                    .any(|m| !m.is_empty() && s.observation.contains(m.as_str()))
                {
                    Some(Signal::Success)
                } else if config
                    .failure_markers
                    .iter()
                    .any(|m| !m.is_empty() && s.observation.contains(m.as_str()))
                {
                    Some(Signal::Failure)
                } else {
                    None
                };
                if let (Some(signal), Some(ep)) = (signal, self.episodes.get_mut(&id)) {
                    ep.signal = Some(signal);
                    ep.open = false;
                    finished.push(id);
                }
            }
        }
        finished
    }

    fn open_episode(&self) -> Option<&Episode> {
        self.episodes.values().rev().find(|e| e.open)
    }

    fn open_episode_mut(&mut self) -> Option<&mut Episode> {
        self.episodes.values_mut().rev().find(|e| e.open)
    }

    /// Finishes the open episode, if any; returns it.
    pub fn close_open(&mut self) -> Option<u64> {
        let ep = self.open_episode_mut()?;
        ep.open = false;
        Some(ep.id)
    }

    /// The episode with serial `id`.
    pub fn episode(&self, id: u64) -> Option<&Episode> {
        self.episodes.get(&id)
    }

    /// Live events of episode `id`, in write order.
    pub fn episode_entries(&self, id: u64) -> Vec<&Entry> {
        self.entries.iter().filter(|e| e.episode == id).collect()
    }

    /// The entry of `source_id`, if live.
    pub fn entry(&self, source_id: &str) -> Option<&Entry> {
        if !self.ids.contains(source_id) {
            return None;
        }
        self.entries
            .iter()
            .find(|e| e.event.source_id() == source_id)
    }

    /// Every live entry, in write order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Number of live events.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no event is live.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Budget tokens of every live event.
    pub fn tokens(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.tokens)).sum()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| {
                (std::mem::size_of::<Entry>()
                    + e.event.source_id().len() * 2
                    + e.event.content().len()) as u64
            })
            .sum::<u64>()
            + (self.episodes.len() * (std::mem::size_of::<Episode>() + 32)) as u64
    }

    /// Removes the listed events; returns how many were live and the
    /// episodes they touched. Episodes left without events are removed.
    pub fn forget(&mut self, source_ids: &[String]) -> (usize, BTreeSet<u64>) {
        let wanted: HashSet<&str> = source_ids.iter().map(String::as_str).collect();
        let mut touched = BTreeSet::new();
        let before = self.entries.len();
        self.entries.retain(|e| {
            let hit = wanted.contains(e.event.source_id());
            if hit {
                touched.insert(e.episode);
            }
            !hit
        });
        for id in source_ids {
            self.ids.remove(id);
        }
        let live: HashSet<u64> = self.entries.iter().map(|e| e.episode).collect();
        self.episodes.retain(|id, _| live.contains(id));
        (before - self.entries.len(), touched)
    }
}

/// The task of an episode: the text after `Your task is to:` in its first
/// observations (ALFWorld), else a label from its key.
pub fn episode_task(entries: &[&Entry]) -> String {
    for e in entries.iter().take(3) {
        if let Event::Step(s) = &e.event {
            if let Some((_, rest)) = s.observation.split_once("Your task is to:") {
                let task = rest.lines().next().unwrap_or("").trim();
                if !task.is_empty() {
                    return task.to_string();
                }
            }
        }
    }
    match entries.first().map(|e| &e.event) {
        Some(Event::Turn(t)) => match &t.session_date {
            Some(d) => format!("conversation session {} ({d})", t.session_id),
            None => format!("conversation session {}", t.session_id),
        },
        Some(Event::Step(s)) => match s.source_id.rsplit_once(':') {
            Some((prefix, _)) => format!("episode {prefix}"),
            None => "an agent episode".to_string(),
        },
        None => String::new(),
    }
}

/// The trajectory as prompt text, at most about `max_tokens` tokens: the head
/// and the tail are kept and the middle is replaced by `[…]` when it is
/// longer (the end tells how an episode went; the start sets the scene).
pub fn trajectory_text(
    entries: &[&Entry],
    counter: &dyn TokenCounter,
    max_tokens: usize,
) -> String {
    let full = entries
        .iter()
        .map(|e| e.event.render())
        .collect::<Vec<_>>()
        .join("\n");
    if counter.count(&full) <= max_tokens {
        return full;
    }
    let half = max_tokens / 2;
    let head = counter.truncate(&full, half);
    let mut tail_lines: Vec<&str> = Vec::new();
    let mut used = 0usize;
    for line in full.lines().rev() {
        let cost = counter.count(line) + 1;
        if used + cost > half {
            break;
        }
        used += cost;
        tail_lines.push(line);
    }
    tail_lines.reverse();
    format!("{head}\n[…]\n{}", tail_lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Step, Turn};

    fn step(ep: &str, n: u32, obs: &str) -> Event {
        Event::Step(Step {
            step: n,
            action: format!("act {n}"),
            observation: obs.into(),
            source_id: format!("{ep}:{n}"),
        })
    }

    #[test]
    fn episodes_end_on_a_new_prefix_a_marker_or_close() {
        let mut j = Journal::default();
        let c = EpisodeConfig::default();
        let done = j.append(
            &[
                step("e1", 1, "Your task is to: put a mug on the desk."),
                step("e1", 2, "ok"),
            ],
            &WhitespaceCounter,
            &c,
        );
        assert!(done.is_empty());
        let done = j.append(
            &[step("e2", 1, "x"), step("e2", 2, "You won!")],
            &WhitespaceCounter,
            &c,
        );
        assert_eq!(done, vec![0, 1]);
        assert_eq!(j.episode(1).and_then(|e| e.signal), Some(Signal::Success));
        assert_eq!(
            episode_task(&j.episode_entries(0)),
            "put a mug on the desk."
        );
        j.append(&[step("e3", 1, "x")], &WhitespaceCounter, &c);
        assert_eq!(j.close_open(), Some(2));
        assert_eq!(j.close_open(), None);
        let (n, touched) = j.forget(&["e3:1".into(), "nope".into()]);
        assert_eq!((n, touched.into_iter().collect::<Vec<_>>()), (1, vec![2]));
        assert!(j.episode(2).is_none());
        assert!(j.validate(&[step("e1", 1, "again")]).is_err());
    }

    #[test]
    fn sessions_are_episodes() {
        let turn = |s: &str, i: u32| {
            Event::Turn(Turn {
                session_id: s.into(),
                session_date: None,
                speaker: "A".into(),
                text: "hi".into(),
                source_id: format!("{s}:{i}"),
            })
        };
        let mut j = Journal::default();
        let done = j.append(
            &[turn("s1", 1), turn("s1", 2), turn("s2", 3)],
            &WhitespaceCounter,
            &EpisodeConfig::default(),
        );
        assert_eq!(done, vec![0]);
        assert_eq!(j.episode_entries(0).len(), 2);
    }

    #[test]
    fn long_trajectories_keep_head_and_tail() {
        let mut j = Journal::default();
        let events: Vec<Event> = (1..=50).map(|n| step("e", n, "a b c d e f g h")).collect();
        j.append(&events, &WhitespaceCounter, &EpisodeConfig::default());
        let text = trajectory_text(&j.episode_entries(0), &WhitespaceCounter, 100);
        assert!(text.contains("[step 1]") && text.contains("[step 50]") && text.contains("[…]"));
        assert!(WhitespaceCounter.count(&text) <= 101);
    }
}
