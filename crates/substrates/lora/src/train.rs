//! Supervised fine-tuning of an [`Adapter`] on question–answer pairs with
//! answer-only loss.
//!
//! Each pair becomes one sequence: the chat prompt of the question (built by
//! the configured [`PromptFormat`], ending with the assistant header) followed
//! by the answer and the end-of-turn marker. The prompt and answer are
//! tokenised separately, exactly as generation sees them (the prompt is
//! encoded, the answer is produced token by token). Loss is the mean
//! cross-entropy of the answer tokens (and the end-of-turn marker) only:
//! prompt tokens are masked out, which is the paper's "answer-only loss".
//! Sequences are batched with right padding; since attention is causal,
//! padding after a sequence never influences its positions, and padded
//! positions are never scored. Optimiser: `candle_nn::AdamW`.

use std::time::Instant;

use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::codec::{check_ids, TextCodec, IM_END};
use crate::config::{PromptFormat, TrainConfig};
use crate::error::{LoraError, Result};
use crate::llama::BaseModel;
use crate::lora::Adapter;

/// One tokenised training sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Prompt then answer token ids.
    pub ids: Vec<u32>,
    /// Index of the first answer token in `ids` (≥ 1).
    pub answer_start: usize,
}

impl Example {
    /// Builds the example for `question` → `answer`; `None` when it cannot
    /// fit `max_len` tokens with at least one answer token.
    pub fn new(
        codec: &dyn TextCodec,
        format: &PromptFormat,
        question: &str,
        answer: &str,
        max_len: usize,
    ) -> Result<Option<Self>> {
        let prompt = codec.encode(&format.prompt(question))?;
        let mut answer_ids = codec.encode(&format!("{}{IM_END}", answer.trim()))?;
        if prompt.is_empty() || prompt.len() + 1 > max_len {
            return Ok(None);
        }
        answer_ids.truncate(max_len - prompt.len());
        let answer_start = prompt.len();
        let mut ids = prompt;
        ids.extend(answer_ids);
        Ok(Some(Example { ids, answer_start }))
    }

    /// Tokens that are scored.
    pub fn answer_tokens(&self) -> usize {
        self.ids.len() - self.answer_start
    }
}

/// What a training run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Sequences trained on (per epoch).
    pub examples: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Epochs.
    pub epochs: usize,
    /// Tokens run forward and backward (all epochs, padding excluded).
    pub tokens: usize,
    /// Mean loss of the first epoch.
    pub first_epoch_loss: f32,
    /// Mean loss of the last epoch.
    pub last_epoch_loss: f32,
    /// Wall time.
    pub seconds: f64,
}

/// Mean answer-only cross-entropy of `batch` under `adapter`.
pub fn batch_loss(
    model: &BaseModel,
    adapter: Option<&Adapter>,
    batch: &[&Example],
) -> Result<Tensor> {
    let vocab = model.config().vocab_size;
    let len = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0);
    if batch.is_empty() || len < 2 {
        return Err(LoraError::Request("empty training batch".into()));
    }
    let mut ids = Vec::with_capacity(batch.len() * len);
    let mut rows = Vec::new();
    let mut targets = Vec::new();
    for (b, e) in batch.iter().enumerate() {
        check_ids(&e.ids, vocab)?;
        ids.extend(&e.ids);
        ids.extend(std::iter::repeat_n(0u32, len - e.ids.len()));
        // The logit at position p predicts token p + 1.
        for p in e.answer_start.saturating_sub(1)..e.ids.len() - 1 {
            rows.push((b * len + p) as u32);
            targets.push(e.ids[p + 1]);
        }
    }
    if rows.is_empty() {
        return Err(LoraError::Request("no answer tokens to score".into()));
    }
    let input = Tensor::from_vec(ids, (batch.len(), len), &Device::Cpu)?;
    let hidden = model.hidden(&input, 0, adapter, None)?;
    let hidden = hidden.reshape((batch.len() * len, model.config().hidden_size))?;
    let n = rows.len();
    let picked = hidden.index_select(&Tensor::from_vec(rows, n, &Device::Cpu)?, 0)?;
    let logits = model.logits(&picked)?;
    let targets = Tensor::from_vec(targets, n, &Device::Cpu)?;
    Ok(candle_nn::loss::cross_entropy(&logits, &targets)?)
}

/// Trains `adapter` on `examples` for `cfg.epochs` epochs (order shuffled per
/// epoch with `cfg.seed`).
pub fn train(
    model: &BaseModel,
    adapter: &Adapter,
    examples: &[Example],
    cfg: &TrainConfig,
) -> Result<TrainReport> {
    let started = Instant::now();
    let mut report = TrainReport {
        examples: examples.len(),
        epochs: cfg.epochs,
        ..TrainReport::default()
    };
    if examples.is_empty() || cfg.epochs == 0 {
        return Ok(report);
    }
    let params = ParamsAdamW {
        lr: cfg.learning_rate,
        weight_decay: cfg.weight_decay,
        ..ParamsAdamW::default()
    };
    let mut opt = AdamW::new(adapter.vars(), params)?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut order: Vec<usize> = (0..examples.len()).collect();
    for epoch in 0..cfg.epochs {
        order.shuffle(&mut rng);
        let (mut sum, mut batches) = (0f32, 0usize);
        for chunk in order.chunks(cfg.batch_size.max(1)) {
            let batch: Vec<&Example> = chunk.iter().map(|&i| &examples[i]).collect();
            let loss = batch_loss(model, Some(adapter), &batch)?;
            opt.backward_step(&loss)?;
            sum += loss.to_scalar::<f32>()?;
            batches += 1;
            report.steps += 1;
            report.tokens += batch.iter().map(|e| e.ids.len()).sum::<usize>();
        }
        let mean = sum / batches.max(1) as f32;
        if epoch == 0 {
            report.first_epoch_loss = mean;
        }
        report.last_epoch_loss = mean;
        tracing::debug!(epoch, loss = mean, "M9 epoch done");
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
