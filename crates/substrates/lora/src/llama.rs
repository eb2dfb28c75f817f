//! A llama-architecture model in f32 with optional LoRA updates on the query
//! and value projections: the model M9 trains and generates with.
//!
//! candle's `quantized_llama` keeps its layers private and quantised matmuls
//! have no backward pass, so this module defines the model itself on plain
//! candle ops that all have gradients: RMSNorm as `x / √(mean(x²)+ε)·g`,
//! interleaved rotary embeddings (GGUF stores q/k permuted for llama.cpp's
//! interleaved RoPE, as `quantized_llama` also assumes), grouped-query
//! attention, SwiGLU MLP, tied or separate output head. Weights are the
//! SmolLM2 GGUF dequantised to f32 at load ([`BaseModel::from_gguf`]) and
//! frozen, or a seeded random tiny model for tests ([`BaseModel::random`]).
//! The output head is applied only to the positions asked for, so training
//! never builds logits for prompt tokens it does not score.

use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, IndexOp, Tensor, D};
use candle_nn::{Linear, Module};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use crate::arch::LlamaConfig;
use crate::error::{LoraError, Result};
use crate::lora::Adapter;

struct Block {
    attn_norm: Tensor,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// Frozen f32 weights of a llama model.
pub struct BaseModel {
    config: LlamaConfig,
    embed: Tensor,
    blocks: Vec<Block>,
    norm: Tensor,
    head: Linear,
    cos: Tensor,
    sin: Tensor,
}

submem_kit::debug_fields!(BaseModel { config });

/// Per-layer key/value cache of one generation.
#[derive(Debug, Default, Clone)]
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
}

impl KvCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.layers
            .first()
            .and_then(|l| l.as_ref())
            .and_then(|(k, _)| k.dim(2).ok())
            .unwrap_or(0)
    }
    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The GGUF file at `path`, opened, with its metadata and tensor index read.
pub(crate) fn open_gguf(path: &Path) -> Result<(std::fs::File, gguf_file::Content)> {
    let bad = |e: &dyn std::fmt::Display| LoraError::BadModel {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(|e| bad(&e))?;
    let content = gguf_file::Content::read(&mut file).map_err(|e| bad(&e))?;
    Ok((file, content))
}

fn gguf_u32(ct: &gguf_file::Content, path: &Path, key: &str) -> Result<usize> {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_u32().ok())
        .map(|v| v as usize)
        .ok_or_else(|| LoraError::BadModel {
            path: path.to_path_buf(),
            reason: format!("missing or non-integer metadata {key}"),
        })
}

fn gguf_f32(ct: &gguf_file::Content, key: &str, default: f32) -> f32 {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_f32().ok())
        .unwrap_or(default)
}

impl BaseModel {
    /// Reads a llama GGUF and dequantises every tensor to f32.
    pub fn from_gguf(path: &Path, max_seq_len: usize) -> Result<Self> {
        let (mut file, ct) = open_gguf(path)?;
        let hidden = gguf_u32(&ct, path, "llama.embedding_length")?;
        let mut config = LlamaConfig {
            vocab_size: 0,
            hidden_size: hidden,
            intermediate_size: gguf_u32(&ct, path, "llama.feed_forward_length")?,
            num_layers: gguf_u32(&ct, path, "llama.block_count")?,
            num_heads: gguf_u32(&ct, path, "llama.attention.head_count")?,
            num_kv_heads: gguf_u32(&ct, path, "llama.attention.head_count_kv")?,
            rms_eps: f64::from(gguf_f32(
                &ct,
                "llama.attention.layer_norm_rms_epsilon",
                1e-5,
            )),
            rope_theta: gguf_f32(&ct, "llama.rope.freq_base", 10_000.0),
            max_seq_len,
        };
        let device = Device::Cpu;
        let mut get = |name: &str| -> Result<Tensor> {
            let q = ct
                .tensor(&mut file, name, &device)
                .map_err(|e| LoraError::BadModel {
                    path: path.to_path_buf(),
                    reason: format!("tensor {name}: {e}"),
                })?;
            Ok(q.dequantize(&device)?.to_dtype(DType::F32)?)
        };
        let embed = get("token_embd.weight")?;
        config.vocab_size = embed.dim(0)?;
        let head = if ct.tensor_infos.contains_key("output.weight") {
            get("output.weight")?
        } else {
            embed.clone()
        };
        let norm = get("output_norm.weight")?;
        let mut blocks = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let p = format!("blk.{i}");
            let lin = |t: Tensor| Linear::new(t, None);
            blocks.push(Block {
                attn_norm: get(&format!("{p}.attn_norm.weight"))?,
                wq: lin(get(&format!("{p}.attn_q.weight"))?),
                wk: lin(get(&format!("{p}.attn_k.weight"))?),
                wv: lin(get(&format!("{p}.attn_v.weight"))?),
                wo: lin(get(&format!("{p}.attn_output.weight"))?),
                ffn_norm: get(&format!("{p}.ffn_norm.weight"))?,
                gate: lin(get(&format!("{p}.ffn_gate.weight"))?),
                up: lin(get(&format!("{p}.ffn_up.weight"))?),
                down: lin(get(&format!("{p}.ffn_down.weight"))?),
            });
        }
        Self::assemble(config, embed, blocks, norm, head)
    }

    /// A seeded random model for tests: matrices with std `1/√cols` (so a
    /// tiny width still gives logits of useful range), unit norms.
    pub fn random(config: LlamaConfig, seed: u64) -> Result<Self> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rand = |rows: usize, cols: usize| -> Result<Tensor> {
            // Sum of 4 uniforms on ±1 has std √(4/3): close enough to normal.
            let scale = 1.0 / ((cols as f32).sqrt() * (4.0f32 / 3.0).sqrt());
            let v: Vec<f32> = (0..rows * cols)
                .map(|_| (0..4).map(|_| rng.random_range(-1.0f32..1.0)).sum::<f32>() * scale)
                .collect();
            Ok(Tensor::from_vec(v, (rows, cols), &Device::Cpu)?)
        };
        let c = &config;
        let ones = |n: usize| Tensor::ones(n, DType::F32, &Device::Cpu);
        let embed = rand(c.vocab_size, c.hidden_size)?;
        let mut blocks = Vec::with_capacity(c.num_layers);
        for _ in 0..c.num_layers {
            blocks.push(Block {
                attn_norm: ones(c.hidden_size)?,
                wq: Linear::new(rand(c.q_out(), c.hidden_size)?, None),
                wk: Linear::new(rand(c.kv_out(), c.hidden_size)?, None),
                wv: Linear::new(rand(c.kv_out(), c.hidden_size)?, None),
                wo: Linear::new(rand(c.hidden_size, c.q_out())?, None),
                ffn_norm: ones(c.hidden_size)?,
                gate: Linear::new(rand(c.intermediate_size, c.hidden_size)?, None),
                up: Linear::new(rand(c.intermediate_size, c.hidden_size)?, None),
                down: Linear::new(rand(c.hidden_size, c.intermediate_size)?, None),
            });
        }
        let norm = ones(c.hidden_size)?;
        let head = embed.clone();
        Self::assemble(config, embed, blocks, norm, head)
    }

    fn assemble(
        config: LlamaConfig,
        embed: Tensor,
        blocks: Vec<Block>,
        norm: Tensor,
        head: Tensor,
    ) -> Result<Self> {
        config.validate()?;
        let half = config.head_dim() / 2;
        let theta: Vec<f32> = (0..half)
            .map(|i| {
                1.0 / config
                    .rope_theta
                    .powf(2.0 * i as f32 / config.head_dim() as f32)
            })
            .collect();
        let theta = Tensor::from_vec(theta, (1, half), &Device::Cpu)?;
        let positions = Tensor::arange(0u32, config.max_seq_len as u32, &Device::Cpu)?
            .to_dtype(DType::F32)?
            .reshape((config.max_seq_len, 1))?;
        let freqs = positions.broadcast_mul(&theta)?;
        Ok(BaseModel {
            cos: freqs.cos()?,
            sin: freqs.sin()?,
            config,
            embed,
            blocks,
            norm,
            head: Linear::new(head, None),
        })
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Parameters of the frozen model (the embedding counted once when tied).
    pub fn parameter_count(&self) -> usize {
        let c = &self.config;
        let per_block = 2 * c.hidden_size
            + c.hidden_size * (2 * c.q_out() + 2 * c.kv_out())
            + 3 * c.hidden_size * c.intermediate_size;
        c.vocab_size * c.hidden_size * 2 + c.num_layers * per_block + c.hidden_size
    }

    /// Final hidden states `(batch, seq, hidden)` for `ids` `(batch, seq)`
    /// starting at position `pos`, continuing `cache` when given.
    pub fn hidden(
        &self,
        ids: &Tensor,
        pos: usize,
        adapter: Option<&Adapter>,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let c = &self.config;
        if pos + t > c.max_seq_len {
            return Err(LoraError::Request(format!(
                "{} positions exceed the model's {}-token rotary table",
                pos + t,
                c.max_seq_len
            )));
        }
        let (hd, nh, nkv) = (c.head_dim(), c.num_heads, c.num_kv_heads);
        let cos = self.cos.narrow(0, pos, t)?;
        let sin = self.sin.narrow(0, pos, t)?;
        let mask = if t > 1 {
            Some(causal_mask(t, pos)?)
        } else {
            None
        };
        let scale = adapter.map_or(0.0, Adapter::scale);
        if let Some(cache) = cache.as_deref_mut() {
            cache.layers.resize(c.num_layers, None);
        }
        let mut x =
            self.embed
                .index_select(&ids.flatten_all()?, 0)?
                .reshape((b, t, c.hidden_size))?;
        for (i, blk) in self.blocks.iter().enumerate() {
            let lora = adapter.and_then(|a| a.layer(i));
            let h = rms_norm(&x, &blk.attn_norm, c.rms_eps)?;
            let mut q = blk.wq.forward(&h)?;
            let k = blk.wk.forward(&h)?;
            let mut v = blk.wv.forward(&h)?;
            if let Some(l) = lora {
                q = (q + l.q.delta(&h, scale)?)?;
                v = (v + l.v.delta(&h, scale)?)?;
            }
            let q = q.reshape((b, t, nh, hd))?.transpose(1, 2)?;
            let k = k.reshape((b, t, nkv, hd))?.transpose(1, 2)?;
            let v = v.reshape((b, t, nkv, hd))?.transpose(1, 2)?.contiguous()?;
            let q = rope_interleaved(&q, &cos, &sin)?;
            let mut k = rope_interleaved(&k, &cos, &sin)?;
            let mut v = v;
            if let Some(cache) = cache.as_deref_mut() {
                if let Some((pk, pv)) = &cache.layers[i] {
                    k = Tensor::cat(&[pk, &k], 2)?;
                    v = Tensor::cat(&[pv, &v], 2)?;
                }
                cache.layers[i] = Some((k.clone(), v.clone()));
            }
            let k = repeat_kv(&k, nh / nkv)?;
            let v = repeat_kv(&v, nh / nkv)?;
            let mut att = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?;
            if let Some(m) = &mask {
                att = att.broadcast_add(m)?;
            }
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, nh * hd))?;
            x = (x + blk.wo.forward(&y)?)?;
            let h = rms_norm(&x, &blk.ffn_norm, c.rms_eps)?;
            let act = candle_nn::ops::silu(&blk.gate.forward(&h)?)?;
            let mlp = blk.down.forward(&(act * blk.up.forward(&h)?)?)?;
            x = (x + mlp)?;
        }
        rms_norm(&x, &self.norm, c.rms_eps)
    }

    /// Logits `(n, vocab)` of hidden states `(n, hidden)`.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        Ok(self.head.forward(hidden)?)
    }

    /// Logits of the last position of a single sequence, continuing `cache`.
    pub fn next_logits(
        &self,
        ids: &[u32],
        pos: usize,
        adapter: Option<&Adapter>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
        let h = self.hidden(&input, pos, adapter, Some(cache))?;
        let last = h.i((0, ids.len() - 1))?.unsqueeze(0)?;
        Ok(self.logits(&last)?.squeeze(0)?)
    }
}

/// `x / √(mean(x²) + ε) · g`, from differentiable ops (candle's fused
/// `rms_norm` has no backward pass).
fn rms_norm(x: &Tensor, g: &Tensor, eps: f64) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(x.broadcast_div(&(ms + eps)?.sqrt()?)?.broadcast_mul(g)?)
}

/// Interleaved RoPE on `(b, h, t, d)`: pairs `(x₂ᵢ, x₂ᵢ₊₁)` rotate by
/// `pos·θᵢ` (candle's `rope_i`, which has no backward pass).
fn rope_interleaved(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, h, t, d) = x.dims4()?;
    let pairs = x.reshape((b, h, t, d / 2, 2))?;
    let x0 = pairs.narrow(D::Minus1, 0, 1)?;
    let x1 = pairs.narrow(D::Minus1, 1, 1)?;
    let cos = cos.reshape((1, 1, t, d / 2, 1))?;
    let sin = sin.reshape((1, 1, t, d / 2, 1))?;
    let r0 = (x0.broadcast_mul(&cos)? - x1.broadcast_mul(&sin)?)?;
    let r1 = (x0.broadcast_mul(&sin)? + x1.broadcast_mul(&cos)?)?;
    Ok(Tensor::cat(&[r0, r1], D::Minus1)?.reshape((b, h, t, d))?)
}

/// `(b, kv, t, d)` → `(b, kv·n, t, d)`, each kv head repeated n times in place.
fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (b, kv, t, d) = x.dims4()?;
    Ok(x.unsqueeze(2)?
        .broadcast_as((b, kv, n, t, d))?
        .contiguous()?
        .reshape((b, kv * n, t, d))?)
}

/// Additive mask `(t, pos + t)`: 0 where a query may look, −∞ after it.
fn causal_mask(t: usize, pos: usize) -> Result<Tensor> {
    let total = pos + t;
    let v: Vec<f32> = (0..t)
        .flat_map(|i| (0..total).map(move |j| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Ok(Tensor::from_vec(v, (t, total), &Device::Cpu)?)
}
