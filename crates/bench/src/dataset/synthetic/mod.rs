//! A seeded, deterministic generator of histories with planted facts, later
//! updates that supersede them, and distractors, for both regimes and any size
//! (100 to 1,000,000 units per conversation). It feeds the default
//! `submem bench` run, scaling runs and tests.
//!
//! - **Conversational**: two speakers chat in sessions of `session_size`
//!   turns (one session per day, dates written like LoCoMo's). A *fact* is
//!   `"<speaker>: By the way, my <attribute> is <value>."`; an *update* later
//!   says it changed; a *distractor* is the other speaker stating a different
//!   value for the same attribute; *noise* turns mention the attribute without
//!   stating anyone's (`"My cousin keeps asking everyone about their
//!   <attribute>."`). The question asks for the speaker's (current) value,
//!   either naming the attribute or, for a share of them, as a *paraphrase*
//!   with none of its content words (`"What vehicle does Ana drive?"` for
//!   `car`); its evidence is every statement of the fact, oldest first. The
//!   paraphrases, noise and updates are what separate lexical from dense
//!   retrieval and top-k from budget-filling reads: with literal questions
//!   alone every retriever finds every fact.
//! - **Agentic**: an agent works through steps (`go to drawer 3`, `run ls`...);
//!   a fact is a command printing a service's access token, an update rotates
//!   it, a distractor prints another service's token; the probe asks for the
//!   latest token of the service.
//!
//! Only the planted events are stored (a few per question); every other event
//! is generated on demand from `hash(seed, conversation, index)`, so a
//! million-unit history is streamed batch by batch and never held in memory.
//! Randomness is ChaCha8 (`rand_chacha`), stable across platforms and
//! releases.

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use submem_core::{Event, Regime, Step, Turn};

mod vocab;
use vocab::{
    ATTRIBUTES, CLOSERS, ITEMS, MONTHS, NAMES, NOISE, OBJECTS, OPENERS, PARAPHRASES, RECEPTACLES,
    SERVICES, VERBS, WHEN, WORDS,
};

use super::{
    Conversation, Dataset, DatasetKind, HistorySource, LoadWarnings, Question, QuestionKind,
};
use crate::{BenchError, Result};

/// Settings of the generator.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SyntheticSpec {
    /// Number of conversations (episodes).
    pub conversations: usize,
    /// Events per conversation (100..=1,000,000 is the supported range).
    pub units: usize,
    /// Questions (planted facts) per conversation.
    pub questions: usize,
    /// Events per write batch (a session).
    pub session_size: usize,
    /// Share of facts that are updated later (0..=1).
    pub update_share: f64,
    /// Share of facts with a distractor (0..=1).
    pub distractor_share: f64,
    /// Conversational: share of questions asked as a paraphrase that shares
    /// no content word with the fact (0..=1).
    #[serde(default)]
    pub paraphrase_share: f64,
    /// Conversational: noise turns per fact that mention its attribute
    /// without stating anyone's value.
    #[serde(default)]
    pub noise_per_fact: usize,
    /// Conversational or agentic histories.
    pub regime: Regime,
    /// Seed; the same spec always yields the same dataset.
    pub seed: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec::DEFAULT
    }
}

impl SyntheticSpec {
    /// The defaults: 2 conversations of 300 events in sessions of 25, 12
    /// questions each, 40% of facts updated, half the questions paraphrased.
    pub const DEFAULT: SyntheticSpec = SyntheticSpec {
        conversations: 2,
        units: 300,
        questions: 12,
        session_size: 25,
        update_share: 0.4,
        distractor_share: 0.5,
        paraphrase_share: 0.5,
        noise_per_fact: 2,
        regime: Regime::Conversational,
        seed: 42,
    };

    /// The set of `submem bench`'s default run (and of `submem.bench()` in
    /// Python): 2 conversations of 240 events in sessions of 30, 12 questions
    /// each; the rest as [`SyntheticSpec::default`].
    pub const DEFAULT_RUN: SyntheticSpec = SyntheticSpec {
        units: 240,
        session_size: 30,
        ..SyntheticSpec::DEFAULT
    };

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BenchError::InvalidOption(format!("synthetic dataset: {m}")));
        if self.conversations == 0 {
            return bad("conversations must be at least 1".into());
        }
        if !(10..=10_000_000).contains(&self.units) {
            return bad(format!(
                "units must be in 10..=10000000, got {}",
                self.units
            ));
        }
        if self.session_size == 0 {
            return bad("session_size must be at least 1".into());
        }
        let planted = self.questions * (4 + self.noise_per_fact);
        if planted > self.units {
            return bad(format!(
                "{} questions need up to {planted} planted units, more than {} units",
                self.questions, self.units
            ));
        }
        if !(0.0..=1.0).contains(&self.update_share)
            || !(0.0..=1.0).contains(&self.distractor_share)
            || !(0.0..=1.0).contains(&self.paraphrase_share)
        {
            return bad(
                "update_share, distractor_share and paraphrase_share must be in 0..=1".into(),
            );
        }
        Ok(())
    }

    /// Generates the dataset (planted facts and questions only; events are
    /// produced lazily when written).
    pub fn dataset(&self) -> Result<Dataset> {
        self.validate()?;
        let conversations = (0..self.conversations)
            .map(|i| {
                let g = Arc::new(SyntheticConversation::new(self.clone(), i));
                Conversation {
                    id: g.id.clone(),
                    questions: g.questions.clone(),
                    evidence_text: g.evidence_text.clone(),
                    history: HistorySource::Synthetic(g),
                }
            })
            .collect();
        Ok(Dataset {
            kind: DatasetKind::Synthetic,
            name: match self.regime {
                Regime::Conversational => "synthetic".into(),
                Regime::Agentic => "synthetic-agentic".into(),
            },
            conversations,
            warnings: LoadWarnings::default(),
        })
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn pick<'a>(rng: &mut ChaCha8Rng, xs: &[&'a str]) -> &'a str {
    xs.choose(rng).copied().unwrap_or("")
}

/// `"<day> <Month>, <year>"` for `day` days after 1 January 2023.
fn date_of(mut day: u64) -> String {
    let mut year = 2023u64;
    loop {
        let len = if is_leap(year) { 366 } else { 365 };
        if day < len {
            break;
        }
        day -= len;
        year += 1;
    }
    for (m, (name, len)) in MONTHS.iter().enumerate() {
        let len = u64::from(*len) + u64::from(m == 1 && is_leap(year));
        if day < len {
            return format!("{} {name}, {year}", day + 1);
        }
        day -= len;
    }
    format!("31 December, {year}")
}

fn is_leap(y: u64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// One generated conversation: its planted events and questions; every other
/// event is produced on demand.
#[derive(Debug)]
pub struct SyntheticConversation {
    spec: SyntheticSpec,
    index: usize,
    /// The conversation id (`synth-<n>`).
    pub id: String,
    speakers: [String; 2],
    planted: HashMap<usize, PlantedEvent>,
    /// The questions.
    pub questions: Vec<Question>,
    /// Text of the evidence events.
    pub evidence_text: HashMap<String, String>,
}

#[derive(Debug, Clone)]
struct PlantedEvent {
    speaker: usize,
    action: String,
    text: String,
}

impl SyntheticConversation {
    fn new(spec: SyntheticSpec, index: usize) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(splitmix(spec.seed ^ splitmix(index as u64 + 1)));
        let id = format!("synth-{index}");
        let a = rng.random_range(0..NAMES.len());
        let b = (a + 1 + rng.random_range(0..NAMES.len() - 1)) % NAMES.len();
        let speakers = [NAMES[a].to_string(), NAMES[b].to_string()];
        let mut me = SyntheticConversation {
            spec,
            index,
            id,
            speakers,
            planted: HashMap::new(),
            questions: Vec::new(),
            evidence_text: HashMap::new(),
        };
        me.plant(&mut rng);
        me
    }

    /// Number of events.
    pub fn units(&self) -> usize {
        self.spec.units
    }

    fn source_id(&self, i: usize) -> String {
        let s = self.spec.session_size;
        match self.spec.regime {
            Regime::Conversational => format!("D{}:{}", i / s + 1, i % s + 1),
            Regime::Agentic => format!("{}:{}", self.id, i + 1),
        }
    }

    fn plant(&mut self, rng: &mut ChaCha8Rng) {
        let n = self.spec.units;
        let agentic = self.spec.regime == Regime::Agentic;
        // Distinct positions; the last event is kept free for agentic "newest".
        let mut used: BTreeSet<usize> = BTreeSet::new();
        used.insert(n - 1);
        let mut free = |rng: &mut ChaCha8Rng, lo: usize| -> Option<usize> {
            if lo >= n - 1 {
                return None;
            }
            for _ in 0..64 {
                let p = rng.random_range(lo..n - 1);
                if used.insert(p) {
                    return Some(p);
                }
            }
            (lo..n - 1).find(|p| used.insert(*p))
        };
        let slots: &[&str] = if agentic { SERVICES } else { ATTRIBUTES };
        for q in 0..self.spec.questions {
            let subject = q % 2;
            let slot = slots[(q / 2) % slots.len()];
            let round = q / (2 * slots.len());
            let slot_name = if round == 0 {
                slot.to_string()
            } else {
                format!("{slot} #{}", round + 1)
            };
            let updated = rng.random_bool(self.spec.update_share);
            let distracted = rng.random_bool(self.spec.distractor_share);
            let Some(first) = free(rng, 0) else { break };
            let mut positions = vec![first];
            if updated {
                match free(rng, first + 1) {
                    Some(p) if p > first => positions.push(p),
                    _ => {}
                }
            }
            let mut evidence = Vec::new();
            let mut answer = String::new();
            for (k, &p) in positions.iter().enumerate() {
                let value = self.value(rng, agentic);
                let ev = if agentic {
                    if k == 0 {
                        PlantedEvent {
                            speaker: 0,
                            action: format!("run ./login.sh --service {slot_name}"),
                            text: format!(
                                "Logged in to {slot_name}. access token for {slot_name}: {value}"
                            ),
                        }
                    } else {
                        PlantedEvent {
                            speaker: 0,
                            action: format!("run ./rotate-token.sh {slot_name}"),
                            text: format!(
                                "Token rotated. new access token for {slot_name}: {value}"
                            ),
                        }
                    }
                } else if k == 0 {
                    PlantedEvent {
                        speaker: subject,
                        action: String::new(),
                        text: format!("By the way, my {slot_name} is {value}."),
                    }
                } else {
                    PlantedEvent {
                        speaker: subject,
                        action: String::new(),
                        text: format!("Quick update: my {slot_name} changed, it is now {value}."),
                    }
                };
                let sid = self.source_id(p);
                self.evidence_text
                    .insert(sid.clone(), planted_content(&ev, agentic));
                evidence.push(sid);
                self.planted.insert(p, ev);
                answer = value;
            }
            if distracted {
                if let Some(p) = free(rng, 0) {
                    let value = self.value(rng, agentic);
                    let ev = if agentic {
                        let other = SERVICES[(q / 2 + 7) % SERVICES.len()];
                        PlantedEvent {
                            speaker: 0,
                            action: format!("run ./login.sh --service {other}-staging"),
                            text: format!("Logged in to {other}-staging. access token for {other}-staging: {value}"),
                        }
                    } else {
                        PlantedEvent {
                            speaker: 1 - subject,
                            action: String::new(),
                            text: format!("Funny, my {slot_name} is {value}."),
                        }
                    };
                    self.planted.insert(p, ev);
                }
            }
            if !agentic {
                for _ in 0..self.spec.noise_per_fact {
                    let Some(p) = free(rng, 0) else { break };
                    let template = pick(rng, NOISE);
                    self.planted.insert(
                        p,
                        PlantedEvent {
                            speaker: rng.random_range(0..2),
                            action: String::new(),
                            text: template.replace("{attr}", &slot_name),
                        },
                    );
                }
            }
            // Paraphrases exist for the first round of attributes only (a
            // numbered "#2" attribute has no unambiguous paraphrase).
            let paraphrase = (!agentic && round == 0)
                .then(|| ATTRIBUTES.iter().position(|a| *a == slot))
                .flatten()
                .and_then(|i| PARAPHRASES.get(i))
                .filter(|_| rng.random_bool(self.spec.paraphrase_share))
                .map(|t| t.replace("{name}", &self.speakers[subject]));
            let updated_fact = updated && positions.len() > 1;
            let (text, kind, category) = match (agentic, updated_fact) {
                (false, false) => match paraphrase {
                    Some(p) => (p, QuestionKind::Standard, "paraphrased-fact"),
                    None => (
                        format!("What is {}'s {slot_name}?", self.speakers[subject]),
                        QuestionKind::Standard,
                        "single-fact",
                    ),
                },
                (false, true) => match paraphrase {
                    Some(p) => (
                        format!("{p} (The latest, please.)"),
                        QuestionKind::KnowledgeUpdate,
                        "paraphrased-update",
                    ),
                    None => (
                        format!("What is {}'s current {slot_name}?", self.speakers[subject]),
                        QuestionKind::KnowledgeUpdate,
                        "updated-fact",
                    ),
                },
                (true, false) => (
                    format!("What access token was printed for {slot_name}?"),
                    QuestionKind::Standard,
                    "single-fact",
                ),
                (true, true) => (
                    format!("What is the latest access token for {slot_name}?"),
                    QuestionKind::KnowledgeUpdate,
                    "updated-fact",
                ),
            };
            self.questions.push(Question {
                id: format!("q{q}"),
                text,
                answer: Some(answer),
                evidence,
                category: category.into(),
                kind,
                regime: self.spec.regime,
                newest: None,
                date: None,
            });
        }
        if agentic {
            let newest = self.event(n - 1).render();
            for q in &mut self.questions {
                q.newest = Some(newest.clone());
            }
        }
    }

    fn value(&self, rng: &mut ChaCha8Rng, agentic: bool) -> String {
        if agentic {
            format!(
                "{}-{:04}",
                pick(rng, &["XK", "QT", "ZP", "MV", "RB"]),
                rng.random_range(0..10_000)
            )
        } else {
            format!("{} {}", pick(rng, WORDS), rng.random_range(10..1000))
        }
    }

    /// The event at position `i` (0-based).
    pub fn event(&self, i: usize) -> Event {
        let sid = self.source_id(i);
        let s = self.spec.session_size;
        if let Some(p) = self.planted.get(&i) {
            return self.make(i, sid, p.speaker, p.action.clone(), p.text.clone());
        }
        let mut rng = ChaCha8Rng::seed_from_u64(
            splitmix(self.spec.seed ^ splitmix(self.index as u64 + 1))
                ^ splitmix(i as u64 + 0xABCD),
        );
        match self.spec.regime {
            Regime::Conversational => {
                let text = format!(
                    "{} I {} {} {}.{}",
                    pick(&mut rng, OPENERS),
                    pick(&mut rng, VERBS),
                    pick(&mut rng, OBJECTS),
                    pick(&mut rng, WHEN),
                    pick(&mut rng, CLOSERS)
                )
                .trim()
                .to_string();
                self.make(i, sid, (i % s) % 2, String::new(), text)
            }
            Regime::Agentic => {
                let r = pick(&mut rng, RECEPTACLES);
                let n = rng.random_range(1..10);
                let (action, obs) = match rng.random_range(0..3) {
                    0 => (
                        format!("go to {r} {n}"),
                        format!(
                            "On the {r} {n}, you see a {} {}, and a {} {}.",
                            pick(&mut rng, ITEMS),
                            rng.random_range(1..5),
                            pick(&mut rng, ITEMS),
                            rng.random_range(1..5)
                        ),
                    ),
                    1 => (
                        format!("open {r} {n}"),
                        format!("You open the {r} {n}. The {r} {n} is empty."),
                    ),
                    _ => (
                        format!("run ls /srv/{}", pick(&mut rng, WORDS)),
                        format!(
                            "{}.log {}.cfg",
                            pick(&mut rng, WORDS),
                            pick(&mut rng, WORDS)
                        ),
                    ),
                };
                self.make(i, sid, 0, action, obs)
            }
        }
    }

    fn make(&self, i: usize, sid: String, speaker: usize, action: String, text: String) -> Event {
        let s = self.spec.session_size;
        match self.spec.regime {
            Regime::Conversational => Event::Turn(Turn {
                session_id: format!("session_{}", i / s + 1),
                session_date: Some(date_of((i / s) as u64)),
                speaker: self.speakers[speaker % 2].clone(),
                text,
                source_id: sid,
            }),
            Regime::Agentic => Event::Step(Step {
                step: i as u32 + 1,
                action,
                observation: text,
                source_id: sid,
            }),
        }
    }

    /// The write batches (sessions), generated one at a time.
    pub fn batches(&self) -> impl Iterator<Item = Vec<Event>> + Send + '_ {
        let s = self.spec.session_size;
        (0..self.spec.units.div_ceil(s)).map(move |b| {
            (b * s..((b + 1) * s).min(self.spec.units))
                .map(|i| self.event(i))
                .collect()
        })
    }
}

fn planted_content(ev: &PlantedEvent, agentic: bool) -> String {
    if agentic {
        format!("{}\n{}", ev.action, ev.text)
    } else {
        ev.text.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_sized() {
        let spec = SyntheticSpec {
            units: 200,
            questions: 10,
            ..SyntheticSpec::default()
        };
        let a = spec.dataset().unwrap();
        let b = spec.dataset().unwrap();
        assert_eq!(a.conversations.len(), 2);
        for (x, y) in a.conversations.iter().zip(&b.conversations) {
            assert_eq!(x.questions, y.questions);
            let ex: Vec<Event> = x.history.batches().flatten().collect();
            let ey: Vec<Event> = y.history.batches().flatten().collect();
            assert_eq!(ex, ey);
            assert_eq!(ex.len(), 200);
            assert_eq!(x.history.batches().count(), 8);
        }
        // different seeds differ
        let c = SyntheticSpec { seed: 7, ..spec }.dataset().unwrap();
        assert_ne!(c.conversations[0].questions, a.conversations[0].questions);
    }

    #[test]
    fn planted_facts_answer_their_questions_and_updates_come_later() {
        let spec = SyntheticSpec {
            units: 400,
            questions: 16,
            update_share: 0.5,
            ..SyntheticSpec::default()
        };
        let d = spec.dataset().unwrap();
        let conv = &d.conversations[0];
        let events: Vec<Event> = conv.history.batches().flatten().collect();
        let pos = |id: &str| events.iter().position(|e| e.source_id() == id).unwrap();
        let mut updates = 0;
        for q in &conv.questions {
            let answer = q.answer.as_deref().unwrap();
            let last = q.evidence.last().unwrap();
            let Event::Turn(t) = &events[pos(last)] else {
                panic!("turn expected")
            };
            assert!(t.text.contains(answer), "{} / {}", t.text, answer);
            assert!(
                q.text.contains(&t.speaker),
                "{} asked about {}",
                q.text,
                t.speaker
            );
            if q.kind == QuestionKind::KnowledgeUpdate {
                updates += 1;
                assert_eq!(q.evidence.len(), 2);
                assert!(pos(&q.evidence[0]) < pos(&q.evidence[1]));
                assert!(!events[pos(&q.evidence[0])].content().contains(answer));
            }
            for e in &q.evidence {
                assert!(conv.evidence_text.contains_key(e));
            }
        }
        assert!(updates > 0);
    }

    #[test]
    fn paraphrases_share_no_content_word_and_noise_mentions_attributes() {
        let spec = SyntheticSpec {
            units: 400,
            questions: 16,
            paraphrase_share: 1.0,
            noise_per_fact: 3,
            ..SyntheticSpec::default()
        };
        let d = spec.dataset().unwrap();
        let conv = &d.conversations[0];
        let events: Vec<Event> = conv.history.batches().flatten().collect();
        let words = |s: &str| -> Vec<String> {
            s.split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() > 3)
                .map(str::to_lowercase)
                .collect()
        };
        let mut paraphrased = 0;
        for q in &conv.questions {
            if !q.category.starts_with("paraphrased") {
                continue;
            }
            paraphrased += 1;
            let fact = &conv.evidence_text[&q.evidence[0]];
            let fact_words = words(fact);
            let shared: Vec<String> = words(&q.text)
                .into_iter()
                .filter(|w| fact_words.contains(w))
                .collect();
            assert!(
                shared.is_empty(),
                "{:?} shares {shared:?} with {fact:?}",
                q.text
            );
        }
        // 16 questions over 16 attributes: all first-round, all paraphrased.
        assert_eq!(paraphrased, 16);
        let noisy = events
            .iter()
            .filter(|e| {
                ATTRIBUTES.iter().any(|a| {
                    NOISE
                        .iter()
                        .any(|t| e.content().ends_with(&t.replace("{attr}", a)))
                })
            })
            .count();
        // Planted positions never collide, so every noise turn is there.
        assert_eq!(noisy, 16 * 3, "noise turns mention attributes");
        assert_eq!(PARAPHRASES.len(), ATTRIBUTES.len());
    }

    #[test]
    fn agentic_regime_has_steps_and_newest() {
        let spec = SyntheticSpec {
            units: 150,
            questions: 6,
            regime: Regime::Agentic,
            ..SyntheticSpec::default()
        };
        let d = spec.dataset().unwrap();
        let c = &d.conversations[0];
        let events: Vec<Event> = c.history.batches().flatten().collect();
        assert!(matches!(events[0], Event::Step(_)));
        let q = &c.questions[0];
        assert_eq!(q.regime, Regime::Agentic);
        assert_eq!(q.newest.as_deref(), Some(events[149].render().as_str()));
        let ev = events
            .iter()
            .find(|e| e.source_id() == q.evidence.last().unwrap().as_str())
            .unwrap();
        assert!(ev.content().contains(q.answer.as_deref().unwrap()));
    }

    #[test]
    fn million_units_stream_without_materialising() {
        let spec = SyntheticSpec {
            conversations: 1,
            units: 1_000_000,
            questions: 50,
            session_size: 1000,
            ..SyntheticSpec::default()
        };
        let d = spec.dataset().unwrap();
        let c = &d.conversations[0];
        assert_eq!(c.history.len(), 1_000_000);
        // peek at a late batch only
        let HistorySource::Synthetic(g) = &c.history else {
            panic!("synthetic expected")
        };
        let e = g.event(999_999);
        assert_eq!(e.source_id(), "D1000:1000");
        assert_eq!(c.questions.len(), 50);
    }

    #[test]
    fn dates_and_validation() {
        assert_eq!(date_of(0), "1 January, 2023");
        assert_eq!(date_of(31 + 28), "1 March, 2023");
        assert_eq!(date_of(365 + 31 + 28), "29 February, 2024");
        assert!(SyntheticSpec {
            units: 5,
            ..SyntheticSpec::default()
        }
        .validate()
        .is_err());
        assert!(SyntheticSpec {
            questions: 100,
            units: 100,
            ..SyntheticSpec::default()
        }
        .validate()
        .is_err());
    }
}
