//! Measures M9 training on the real SmolLM2 weights: seconds per 100 QA
//! pairs per epoch, tokens per second, and peak memory (VmHWM; run it under
//! `/usr/bin/time -v` for the same figure from outside).
//!
//! ```text
//! cargo run --release -p submem-lora --example train_speed -- [pairs] [epochs] [batch]
//! ```
//!
//! The pairs are cloze pairs ([`submem_lora::qa::cloze_pair`]) of generated
//! conversational turns, asked in M9's default prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use submem_core::{Event, Turn};
use submem_lora::qa::cloze_pair;
use submem_lora::train::train;
use submem_lora::{resolve_local_gguf, Adapter, Example, LoraConfig, LoraModel};

const PEOPLE: [&str; 5] = ["Caroline", "Melanie", "Jon", "Gina", "Andrew"];
const LINES: [&str; 10] = [
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    "We took the kids camping near the lake in Oregon last weekend.",
    "My new painting shows a sunrise over the hills behind our house.",
    "I'm thinking about studying counseling at the university in September.",
    "The pottery class on Tuesday was fun, I made a blue bowl.",
    "Our dog Max chewed my running shoes again this morning.",
    "I signed up for the charity race in Boston next month.",
    "Grandma gave me her old necklace from Sweden when I visited.",
    "We are saving money to open a small dance studio downtown.",
    "The concert by Matt Patterson was amazing, we sang all night.",
];

fn vm_hwm_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = args.first().copied().unwrap_or(100);
    let epochs = args.get(1).copied().unwrap_or(1);
    let batch = args.get(2).copied().unwrap_or(4);
    let t = Instant::now();
    let model = LoraModel::shared(&resolve_local_gguf().unwrap(), 2048).unwrap();
    println!(
        "load: {:.1} s (f32 base, {} parameters)",
        t.elapsed().as_secs_f64(),
        model.base().parameter_count()
    );
    let cfg = LoraConfig::default()
        .with_epochs(epochs)
        .with_batch_size(batch);
    let examples: Vec<Example> = (0..n)
        .map(|i| {
            let e = Event::Turn(Turn {
                session_id: "s".into(),
                session_date: Some(format!("{} May 2023", 1 + i % 28)),
                speaker: PEOPLE[i % PEOPLE.len()].into(),
                text: LINES[(i / PEOPLE.len()) % LINES.len()].into(),
                source_id: format!("D{i}"),
            });
            let p = cloze_pair(&e).unwrap();
            Example::new(
                model.codec(),
                &cfg.prompt,
                &p.question,
                &p.answer,
                cfg.max_seq_tokens,
            )
            .unwrap()
            .unwrap()
        })
        .collect();
    let tokens: usize = examples.iter().map(|e| e.ids.len()).sum();
    let scored: usize = examples.iter().map(Example::answer_tokens).sum();
    let adapter = Adapter::new(model.base().config(), cfg.rank, cfg.alpha, 1).unwrap();
    let report = train(model.base(), &adapter, &examples, &cfg.train()).unwrap();
    let per_epoch = report.seconds / epochs.max(1) as f64;
    println!(
        "pairs {n}, epochs {epochs}, batch {batch}: {:.1} s total, {:.1} s per 100 pairs per epoch, \
{:.0} tokens/s; {:.1} tokens per sequence ({:.1} scored); loss {:.3} -> {:.3}; adapter {} bytes",
        report.seconds,
        per_epoch * 100.0 / n as f64,
        report.tokens as f64 / report.seconds,
        tokens as f64 / n as f64,
        scored as f64 / n as f64,
        report.first_epoch_loss,
        report.last_epoch_loss,
        adapter.parameter_bytes()
    );
    if let Some(mb) = vm_hwm_mb() {
        println!("peak RSS (VmHWM): {mb:.0} MiB");
    }
}
