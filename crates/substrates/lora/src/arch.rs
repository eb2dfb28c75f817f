//! The shape of a llama-architecture model ([`LlamaConfig`]): what the model
//! (`llama`) is built with and what its LoRA adapters (`lora`) are sized by.
//! Both modules use it, so it lives in neither; `llama` re-exports it as
//! `submem_lora::llama::LlamaConfig`.

use crate::error::{LoraError, Result};

/// Hyper-parameters of a llama model.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Transformer blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (grouped-query attention).
    pub num_kv_heads: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f32,
    /// Longest sequence (prompt plus generated) the rotary table covers.
    pub max_seq_len: usize,
}

impl LlamaConfig {
    /// A tiny model for logic tests: 2 layers, width 32, 4 query / 2 kv heads.
    pub fn tiny(vocab_size: usize) -> Self {
        LlamaConfig {
            vocab_size,
            hidden_size: 32,
            intermediate_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            rms_eps: 1e-5,
            rope_theta: 10_000.0,
            max_seq_len: 1024,
        }
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Output width of the query projection.
    pub fn q_out(&self) -> usize {
        self.num_heads * self.head_dim()
    }

    /// Output width of the key and value projections.
    pub fn kv_out(&self) -> usize {
        self.num_kv_heads * self.head_dim()
    }

    /// Checks that the shape is consistent (heads divide the width, even
    /// head width, …).
    pub(crate) fn validate(&self) -> Result<()> {
        let ok = self.num_heads > 0
            && self.num_kv_heads > 0
            && self.hidden_size % self.num_heads == 0
            && self.num_heads % self.num_kv_heads == 0
            && self.head_dim() % 2 == 0
            && self.num_layers > 0
            && self.vocab_size > 0
            && self.max_seq_len > 1;
        if ok {
            Ok(())
        } else {
            Err(LoraError::Config(format!(
                "inconsistent llama config {self:?}"
            )))
        }
    }
}
