#![allow(dead_code)]
//! Deterministic synthetic history for the benches: conversational turns of
//! 20–30 words drawn from a Zipf-like 5,000-word vocabulary, and short
//! questions over the same vocabulary.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use submem_core::{Event, Turn};

fn word(rng: &mut StdRng) -> String {
    // Squaring a uniform draw gives a heavy head like real word frequencies.
    let r: f64 = rng.random();
    format!("w{}", (r * r * 5000.0) as usize)
}

/// `n` turns (`t0`, `t1`, …), seeded.
pub fn turns(n: usize, seed: u64) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let len = rng.random_range(20..=30);
            let text = (0..len)
                .map(|_| word(&mut rng))
                .collect::<Vec<_>>()
                .join(" ");
            Event::Turn(Turn {
                session_id: format!("session_{}", i / 20),
                session_date: None,
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text,
                source_id: format!("t{i}"),
            })
        })
        .collect()
}

/// `n` questions of 6–10 words, seeded.
pub fn questions(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.random_range(6..=10);
            (0..len)
                .map(|_| word(&mut rng))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A turn no synthetic word can match, to check a planted fact is found.
pub fn planted(id: &str) -> Event {
    Event::Turn(Turn {
        session_id: "planted".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: "My violin teacher zanzibarite lives in Oslo".into(),
        source_id: id.into(),
    })
}
