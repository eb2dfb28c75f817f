//! [`submem_core::ChoiceScoring`] for [`LocalLlm`]: the log-likelihood of
//! each candidate reply after a chat prompt, for an agent choosing among a
//! text game's admissible commands.
//!
//! The prompt runs once. Candidates are taken in token order, so that each
//! shares the model states of the tokens it has in common with the one
//! before it (`go to desk 1` and `go to desk 2` differ in one token): a
//! stack holds the state after every token of the current candidate, and
//! the next candidate pops back to their common prefix. A candidate's last
//! token needs no forward pass of its own (its probability is read from the
//! state before it), so a list of one-token commands costs the prompt alone.

use async_trait::async_trait;
use candle_core::Tensor;
use candle_transformers::models::quantized_llama::ModelWeights;
use submem_core::{ChatMessage, ChoiceScores, ChoiceScoring, ServiceError, Usage};

use super::{Inner, LocalLlm};
use crate::error::{ModelsError, Result};

#[async_trait]
impl ChoiceScoring for LocalLlm {
    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn score_choices(
        &self,
        messages: &[ChatMessage],
        choices: &[String],
    ) -> std::result::Result<ChoiceScores, ServiceError> {
        if messages.is_empty() {
            return Err(ServiceError::InvalidRequest("no messages".into()));
        }
        let prompt = LocalLlm::chat_prompt(messages);
        let inner = self.inner.clone();
        let choices = choices.to_vec();
        let model = self.inner.name.clone();
        let scores = tokio::task::spawn_blocking(move || inner.score_choices(&prompt, &choices))
            .await
            .map_err(|e| ModelsError::Task {
                model,
                reason: e.to_string(),
            })??;
        Ok(scores)
    }
}

/// Natural-log probabilities of one logits vector.
fn log_softmax(logits: &Tensor, model: &str) -> Result<Vec<f32>> {
    let v = logits
        .to_dtype(candle_core::DType::F32)
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| ModelsError::candle(model, e))?;
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = v.iter().map(|x| (x - max).exp()).sum();
    let log_z = max + sum.ln();
    Ok(v.into_iter().map(|x| x - log_z).collect())
}

/// One level of the candidate stack: the model state after a token and the
/// distribution of the token after it, with the log-likelihood so far.
struct Level {
    state: ModelWeights,
    next: Vec<f32>,
    so_far: f64,
}

impl Inner {
    pub(super) fn score_choices(&self, prompt: &str, choices: &[String]) -> Result<ChoiceScores> {
        let prompt_ids = self.tokenizer.encode(prompt)?;
        if prompt_ids.is_empty() {
            return Err(ModelsError::InvalidRequest("empty prompt".into()));
        }
        let mut candidates: Vec<Vec<u32>> = Vec::with_capacity(choices.len());
        for c in choices {
            let mut ids = self.tokenizer.encode(c)?;
            ids.push(self.tokenizer.eos_id);
            candidates.push(ids);
        }
        let longest = candidates.iter().map(Vec::len).max().unwrap_or(0);
        if prompt_ids.len() + longest > self.context {
            return Err(ModelsError::InvalidRequest(format!(
                "prompt of {} tokens plus a {longest}-token choice exceeds the {}-token context",
                prompt_ids.len(),
                self.context
            )));
        }
        let (_guard, mut state) = self.fresh()?;
        let logits = self.forward(&mut state, &prompt_ids, 0)?;
        let mut ran = prompt_ids.len() as u64;
        let mut stack = vec![Level {
            next: log_softmax(&logits, &self.name)?,
            state,
            so_far: 0.0,
        }];
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|a, b| candidates[*a].cmp(&candidates[*b]));
        let mut log_likelihood = vec![0.0; candidates.len()];
        let mut previous: &[u32] = &[];
        for i in order {
            let ids = &candidates[i];
            let shared = ids
                .iter()
                .zip(previous)
                .take_while(|(a, b)| a == b)
                .count()
                .min(stack.len() - 1);
            stack.truncate(shared + 1);
            for (j, &token) in ids.iter().enumerate().skip(shared) {
                let level = &stack[j];
                let so_far = level.so_far + f64::from(level.next[token as usize]);
                if j + 1 == ids.len() {
                    log_likelihood[i] = so_far;
                    break;
                }
                let mut state = level.state.clone();
                let logits = self.forward(&mut state, &[token], prompt_ids.len() + j)?;
                ran += 1;
                stack.push(Level {
                    next: log_softmax(&logits, &self.name)?,
                    state,
                    so_far,
                });
            }
            previous = ids;
        }
        Ok(ChoiceScores {
            log_likelihood,
            tokens: candidates.iter().map(Vec::len).collect(),
            usage: Usage {
                input_tokens: ran,
                output_tokens: 0,
            },
        })
    }
}
