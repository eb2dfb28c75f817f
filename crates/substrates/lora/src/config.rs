//! Settings of M9. Every numeric default is a starting point (the paper gives
//! only r = 8 and answer-only loss); each has a `with_*` setter.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::ReaderPrompt;
use submem_core::ChatMessage;
use submem_models::LocalLlm;

use crate::error::{LoraError, Result};

/// The note M9 puts in its recall: there is no retrieved text, the answer
/// comes from the adapted model. The default [`PromptFormat`]s show it as the
/// memory block, so the adapter trains on the prompt it will be asked with.
pub const ADAPTER_NOTE: &str =
    "(M9 adapter memory: no retrieved text; answer from what the adapter learned.)";

type MessagesFn = dyn Fn(&str) -> Vec<ChatMessage> + Send + Sync;

/// How a question becomes chat messages, in training and at read time.
#[derive(Clone)]
pub struct PromptFormat {
    /// A name for logs.
    pub name: String,
    /// The messages for a question (without the answer).
    pub messages: Arc<MessagesFn>,
}

submem_kit::debug_fields!(PromptFormat { name });

fn plain_messages(question: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::system(
            "You answer questions about earlier conversations. Reply with a short answer of a few words.",
        ),
        ChatMessage::user(format!("Memory:\n{ADAPTER_NOTE}\n\nQuestion: {question}\nAnswer:")),
    ]
}

impl Default for PromptFormat {
    fn default() -> Self {
        PromptFormat::new("m9-plain", plain_messages)
    }
}

impl PromptFormat {
    /// A format named `name` that asks with `messages`.
    pub fn new(
        name: impl Into<String>,
        messages: impl Fn(&str) -> Vec<ChatMessage> + Send + Sync + 'static,
    ) -> Self {
        PromptFormat {
            name: name.into(),
            messages: Arc::new(messages),
        }
    }

    /// The caller's reader prompt with [`ADAPTER_NOTE`] as the memory block:
    /// the adapter trains on exactly the prompt its reader will ask with.
    pub fn from_reader(reader: &ReaderPrompt) -> Self {
        let reader = reader.clone();
        PromptFormat::new("reader-prompt", move |question: &str| {
            reader.messages(ADAPTER_NOTE, question)
        })
    }

    /// The ChatML prompt text for `question`, ending with the assistant header.
    pub fn prompt(&self, question: &str) -> String {
        LocalLlm::chat_prompt(&(self.messages)(question))
    }
}

/// Optimiser and schedule, as [`crate::train::train`] takes them; a
/// [`LoraConfig`] holds them as its own fields ([`LoraConfig::train`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// Passes over the QA pairs.
    pub epochs: usize,
    /// Sequences per optimiser step.
    pub batch_size: usize,
    /// AdamW learning rate (LoRA tolerates larger rates than full tuning).
    pub learning_rate: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Longest training sequence in model tokens (prompt + answer).
    pub max_seq_tokens: usize,
    /// Seed of the shuffling and of A's initialisation.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 3,
            batch_size: 4,
            learning_rate: 1e-3,
            weight_decay: 0.0,
            max_seq_tokens: 256,
            seed: 7,
        }
    }
}

/// Settings of [`crate::LoraMemory`], and of the `m9` plugin: every field but
/// the prompt is a setting (`m9:rank=4`), listed by `submem substrates` with
/// the first sentence of its doc.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LoraConfig {
    /// LoRA rank r. The paper uses 8.
    pub rank: usize,
    /// LoRA α; updates are scaled by α / r.
    pub alpha: f64,
    /// Passes over the synthesised question-answer pairs.
    pub epochs: usize,
    /// Sequences per optimiser step. Its setting is `batch`.
    #[serde(rename = "batch")]
    pub batch_size: usize,
    /// AdamW learning rate. LoRA tolerates larger rates than full tuning.
    /// Its setting is `lr`.
    #[serde(rename = "lr")]
    pub learning_rate: f64,
    /// AdamW weight decay (at least 0).
    pub weight_decay: f64,
    /// Longest training sequence in model tokens (at least 8). A sequence is
    /// the prompt and the answer.
    pub max_seq_tokens: usize,
    /// Seed of the shuffling and of A's initialisation.
    pub seed: u64,
    /// Most tokens of history per question-answer synthesis call. A chunk is
    /// cut at events, in budget tokens.
    pub chunk_tokens: usize,
    /// Question-answer pairs asked for per chunk. Its setting is `pairs`.
    #[serde(rename = "pairs")]
    pub pairs_per_chunk: usize,
    /// Most new tokens of a question-answer synthesis reply.
    pub qa_max_tokens: usize,
    /// Longest context of the adapted model at read time (at least 64). It
    /// sizes the rotary table. Its setting is `context`.
    #[serde(rename = "context")]
    pub max_context: usize,
    /// After a forget, keep answering with the old adapter until the next manage retrains it.
    /// The adapter is then marked stale. Off by default: the base model
    /// answers instead, so forgotten facts cannot leak from the weights. Its
    /// setting is `serve_stale`.
    #[serde(rename = "serve_stale")]
    pub serve_stale_adapter: bool,
    /// The base model's GGUF file (unset: the local SmolLM2 that submem-models resolves).
    /// The `m9` plugin loads it; [`crate::LoraMemory::new`] takes a loaded
    /// model instead and does not read this.
    pub gguf: Option<PathBuf>,
    /// Prompt of training and reading. Not a setting: the `m9` plugin takes
    /// it from the build context's reader prompt
    /// ([`PromptFormat::from_reader`]).
    #[serde(skip)]
    pub prompt: PromptFormat,
}

impl Default for LoraConfig {
    fn default() -> Self {
        let train = TrainConfig::default();
        LoraConfig {
            rank: 8,
            alpha: 16.0,
            epochs: train.epochs,
            batch_size: train.batch_size,
            learning_rate: train.learning_rate,
            weight_decay: train.weight_decay,
            max_seq_tokens: train.max_seq_tokens,
            seed: train.seed,
            chunk_tokens: 400,
            pairs_per_chunk: 4,
            qa_max_tokens: 256,
            max_context: 2048,
            serve_stale_adapter: false,
            gguf: None,
            prompt: PromptFormat::default(),
        }
    }
}

submem_kit::setters!(LoraConfig {
    with_rank => rank: usize,
    with_alpha => alpha: f64,
    with_epochs => epochs: usize,
    with_batch_size => batch_size: usize,
    with_learning_rate => learning_rate: f64,
    with_max_seq_tokens => max_seq_tokens: usize,
    with_seed => seed: u64,
    with_chunk_tokens => chunk_tokens: usize,
    with_pairs_per_chunk => pairs_per_chunk: usize,
    with_serve_stale_adapter => serve_stale_adapter: bool,
    with_prompt => prompt: PromptFormat,
});

impl LoraConfig {
    /// The optimiser and schedule of these settings.
    pub fn train(&self) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs,
            batch_size: self.batch_size,
            learning_rate: self.learning_rate,
            weight_decay: self.weight_decay,
            max_seq_tokens: self.max_seq_tokens,
            seed: self.seed,
        }
    }

    /// Rejects settings no run can use.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(LoraError::Config(m.into()));
        if self.rank == 0 {
            return bad("rank must be at least 1");
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return bad("alpha must be positive");
        }
        if self.batch_size == 0 {
            return bad("batch_size must be at least 1");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning rate must be positive");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay must be finite and not negative");
        }
        if self.max_seq_tokens < 8 || self.chunk_tokens == 0 || self.pairs_per_chunk == 0 {
            return bad("max_seq_tokens >= 8, chunk_tokens >= 1 and pairs_per_chunk >= 1");
        }
        if self.max_context < 64 {
            return bad("max_context must be at least 64");
        }
        if self.qa_max_tokens == 0 {
            return bad("qa_max_tokens must be at least 1");
        }
        Ok(())
    }
}
