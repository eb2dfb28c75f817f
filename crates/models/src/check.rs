//! `submem models fetch` and `submem models check` as library calls: fetch
//! the local models into the cache, then load them and report what they can
//! do on this machine.

use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use submem_core::{ChatMessage, ChatRequest, Embedder, Llm};

use crate::config::Config;
use crate::error::{ModelsError, Result};
use crate::llm::LocalLlm;
use crate::locate::ModelLocator;

/// Resolves both local models, fetching them if missing (even when the
/// configuration turns automatic fetching off); returns the embedder
/// directory and the GGUF path.
pub fn fetch_models(cfg: &Config) -> Result<Vec<PathBuf>> {
    let mut models = cfg.models.clone();
    models.fetch = true;
    let locator = ModelLocator::new(&models);
    Ok(vec![locator.embedder_dir()?, locator.llm_gguf()?])
}

/// What [`check_models`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelsCheck {
    /// Embedder name.
    pub embedder: String,
    /// Its vector length.
    pub embedder_dimension: usize,
    /// Seconds to load it (0 when already loaded in this process).
    pub embedder_load_secs: f64,
    /// Short sentences per second at batch 32.
    pub embedder_sentences_per_sec: f64,
    /// LLM name.
    pub llm: String,
    /// Seconds the LLM took to load.
    pub llm_load_secs: f64,
    /// A short greedy answer, as a smoke test.
    pub sample: String,
    /// Prompt tokens per second.
    pub prefill_tok_s: f64,
    /// Generated tokens per second.
    pub decode_tok_s: f64,
}

impl fmt::Display for ModelsCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "embedder  {} ({} dims)",
            self.embedder, self.embedder_dimension
        )?;
        writeln!(f, "  load      {:.2} s", self.embedder_load_secs)?;
        writeln!(
            f,
            "  speed     {:.0} sentences/s at batch 32",
            self.embedder_sentences_per_sec
        )?;
        writeln!(f, "llm       {}", self.llm)?;
        writeln!(f, "  load      {:.2} s", self.llm_load_secs)?;
        writeln!(f, "  prefill   {:.0} tok/s", self.prefill_tok_s)?;
        writeln!(f, "  decode    {:.0} tok/s", self.decode_tok_s)?;
        write!(f, "  sample    {:?}", self.sample)
    }
}

/// A fixed, varied set of short sentences (for speed checks and benches).
pub fn sample_sentences(n: usize) -> Vec<String> {
    const SUBJECTS: [&str; 8] = [
        "The user",
        "My sister",
        "The agent",
        "Our team",
        "The doctor",
        "A neighbour",
        "The report",
        "Grandma",
    ];
    const VERBS: [&str; 8] = [
        "moved to",
        "asked about",
        "booked a table at",
        "wrote down",
        "forgot",
        "visited",
        "recommended",
        "complained about",
    ];
    const OBJECTS: [&str; 8] = [
        "a flat in Lisbon",
        "the quarterly budget",
        "an Italian restaurant",
        "the Wi-Fi password",
        "her dentist appointment",
        "the museum on Sunday",
        "a book on Rust",
        "the noisy fridge",
    ];
    (0..n)
        .map(|i| {
            format!(
                "{} {} {} (note {i}).",
                SUBJECTS[i % 8],
                VERBS[(i / 8) % 8],
                OBJECTS[(i / 64 + i) % 8]
            )
        })
        .collect()
}

/// Loads the local models (fetching them if allowed) and measures them.
pub async fn check_models(cfg: &Config) -> Result<ModelsCheck> {
    let cfg2 = cfg.clone();
    let t0 = Instant::now();
    let embedder = tokio::task::spawn_blocking(move || cfg2.local_embedder())
        .await
        .map_err(|e| task_err("embedder", e))??;
    let embedder_load_secs = t0.elapsed().as_secs_f64();
    let texts = sample_sentences(64);
    // Warm up once, then time two batches of 32.
    embedder.embed(&texts[..8]).await?;
    let t1 = Instant::now();
    let vectors = embedder.embed(&texts).await?;
    let embedder_sentences_per_sec = texts.len() as f64 / t1.elapsed().as_secs_f64().max(1e-9);
    if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != embedder.dimension()) {
        return Err(ModelsError::InvalidRequest(
            "embedder returned vectors of the wrong shape".into(),
        ));
    }

    let cfg3 = cfg.clone();
    let llm = tokio::task::spawn_blocking(move || cfg3.local_llm())
        .await
        .map_err(|e| task_err("llm", e))??;
    let req = ChatRequest::new(vec![ChatMessage::user(
        "In one short sentence: why do agents need memory?",
    )])
    .with_max_tokens(32);
    let sample = llm.complete(&req).await?.text;
    let prompt = LocalLlm::chat_prompt(&[ChatMessage::user(texts[..24].join(" "))]);
    let llm2 = llm.clone();
    let speed = tokio::task::spawn_blocking(move || llm2.speed_blocking(&prompt, 32))
        .await
        .map_err(|e| task_err("llm", e))??;
    Ok(ModelsCheck {
        embedder: embedder.name().to_string(),
        embedder_dimension: embedder.dimension(),
        embedder_load_secs,
        embedder_sentences_per_sec,
        llm: llm.name().to_string(),
        llm_load_secs: llm.load_secs(),
        sample,
        prefill_tok_s: speed.prefill_tok_s(),
        decode_tok_s: speed.decode_tok_s(),
    })
}

fn task_err(model: &str, e: tokio::task::JoinError) -> ModelsError {
    ModelsError::Task {
        model: model.to_string(),
        reason: e.to_string(),
    }
}
