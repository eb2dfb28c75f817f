//! Shared fixtures for the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use submem_core::{Event, Step, Turn};

const WORDS: &[&str] = &[
    "drawer", "kitchen", "apple", "window", "river", "garden", "laptop", "ticket", "violin",
    "museum", "coffee", "train", "bridge", "pillow", "letter", "candle", "forest", "mirror",
    "basket", "engine", "planet", "silver", "doctor", "market", "winter", "summer", "pencil",
    "camera", "guitar", "island",
];

/// Deterministic pseudo-random numbers.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn sentence(rng: &mut Lcg, n: usize) -> String {
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// An agent trajectory of `n` steps with observations of about `obs_words` words.
pub fn trajectory(tag: &str, n: usize, obs_words: usize, seed: u64) -> Vec<Event> {
    let mut rng = Lcg(seed);
    (1..=n)
        .map(|i| {
            let lines = 1 + rng.below(4) as usize;
            let obs = (0..lines)
                .map(|_| sentence(&mut rng, obs_words / lines + 1))
                .collect::<Vec<_>>()
                .join("\n");
            Event::Step(Step {
                step: i as u32,
                action: format!("open {} {}", WORDS[rng.below(30) as usize], i),
                observation: obs,
                source_id: format!("{tag}:{i}"),
            })
        })
        .collect()
}

/// A conversation of `sessions` sessions of `turns` turns of about `words` words.
pub fn conversation(
    tag: &str,
    sessions: usize,
    turns: usize,
    words: usize,
    seed: u64,
) -> Vec<Event> {
    let mut rng = Lcg(seed);
    let mut out = Vec::new();
    for s in 1..=sessions {
        for t in 0..turns {
            let n = words / 2 + rng.below(words as u64) as usize;
            out.push(Event::Turn(Turn {
                session_id: format!("session_{s}"),
                session_date: Some(format!("{s} May 2023")),
                speaker: if t % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text: sentence(&mut rng, n),
                source_id: format!("{tag}:D{s}:{t}"),
            }));
        }
    }
    out
}
