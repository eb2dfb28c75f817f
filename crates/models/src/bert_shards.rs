//! MiniLM's BERT encoder split across threads for short inputs: the
//! Megatron-LM tensor-parallel layout, written with candle ops.
//!
//! A query's forward pass is too small for candle's per-op thread hand-offs
//! to pay (they cost more than a second core gives back), yet on one thread
//! its linear layers alone take ~6.5 ms. Here each of `S` shards, one thread
//! each, owns `1/S` of every layer's attention heads and of its feed-forward
//! columns:
//!
//! - its heads' query, key and value columns, so it runs attention for its
//!   heads with no exchange;
//! - the rows of the attention output projection that read those heads, and
//!   the rows of the feed-forward down projection that read its columns, so
//!   both projections give partial sums of the full output.
//!
//! The shards exchange their partial sums twice per layer (after attention,
//! after the feed-forward block) and add them in shard order, so every shard
//! holds the same hidden state after each exchange. Layer norms and the
//! residuals run on every shard (they are tiny); matrix products, softmax and
//! GELU are split. Each shard runs its candle ops on its own one-thread rayon
//! pool, so candle never hands a small op to another thread, and its matrix
//! products on gemm directly, from weights stored for streaming
//! ([`matmul`] says why both matter).
//!
//! Criterion on 2 cores: 7.0 ms p50 for a 20-word query, against 15.0 ms
//! for candle-transformers' BERT on one thread.
//!
//! The result equals [`candle_transformers::models::bert::BertModel`]'s up to
//! the order in which the partial sums are added.

mod matmul;

use std::sync::mpsc::{channel, Receiver, Sender};

use candle_core::{DType, Module, Tensor};
use candle_nn::{LayerNorm, VarBuilder};
use candle_transformers::models::bert::{Config as BertConfig, HiddenAct};

use matmul::{matmul, PanelWeights};

/// Shards of the encoder, and the threads that run them.
pub(crate) struct ShardedEncoder {
    embeddings: Embeddings,
    shards: Vec<Shard>,
    /// One single-thread pool per shard.
    pools: Vec<rayon::ThreadPool>,
    heads_per_shard: usize,
    head_size: usize,
}

/// Token, position and token-type embeddings, then a layer norm. Every shard
/// computes them (a table lookup and a norm).
struct Embeddings {
    words: Tensor,
    positions: Tensor,
    /// Row 0 of the token-type table: MiniLM's inputs are one segment.
    segment: Tensor,
    norm: LayerNorm,
}

/// One shard's slice of every layer.
struct Shard {
    layers: Vec<ShardLayer>,
}

/// One shard's slice of one layer. Weights are stored as `Wᵀ` (in × out) so
/// that every product reads a contiguous right-hand side.
struct ShardLayer {
    /// This shard's heads' query, key and value columns side by side:
    /// `hidden × 3·width`, with `width = heads_per_shard · head_size`.
    qkv: PanelWeights,
    qkv_bias: Tensor,
    /// Rows of the attention output projection that read this shard's heads:
    /// `width × hidden`.
    attention_out: PanelWeights,
    /// The bias of the attention output, added once after the exchange.
    attention_out_bias: Tensor,
    attention_norm: LayerNorm,
    /// This shard's feed-forward columns: `hidden × intermediate/S`.
    up: PanelWeights,
    up_bias: Tensor,
    /// Rows of the down projection that read those columns:
    /// `intermediate/S × hidden`.
    down: PanelWeights,
    down_bias: Tensor,
    output_norm: LayerNorm,
}

/// A shard's links to the other shard (none when there is one shard).
struct Exchange {
    index: usize,
    link: Option<(Sender<Tensor>, Receiver<Tensor>)>,
    /// Set when the other shard hung up: its own error is the one to report.
    peer_stopped: std::cell::Cell<bool>,
}

impl Exchange {
    /// The sum of every shard's `partial`, added in shard order so that all
    /// shards get the same bits.
    fn all_reduce(&self, partial: Tensor) -> candle_core::Result<Tensor> {
        let Some((to_peer, from_peer)) = &self.link else {
            return Ok(partial);
        };
        let stopped = || {
            self.peer_stopped.set(true);
            candle_core::Error::Msg("the other encoder shard stopped".into())
        };
        to_peer.send(partial.clone()).map_err(|_| stopped())?;
        let other = from_peer.recv().map_err(|_| stopped())?;
        if self.index == 0 {
            partial + other
        } else {
            other + partial
        }
    }
}

impl ShardedEncoder {
    /// Splits the encoder in `vb` into `shards` shards (1 or 2) with one
    /// thread each. `vb` must hand out linear weights as views of a
    /// contiguous `Wᵀ` (the embedder's loader does).
    pub(crate) fn load(
        vb: VarBuilder,
        config: &BertConfig,
        shards: usize,
    ) -> candle_core::Result<Self> {
        let shards = shards.clamp(1, 2);
        if config.hidden_act != HiddenAct::Gelu {
            candle_core::bail!(
                "the sharded encoder implements BERT's erf GELU, the model asks for {:?}",
                config.hidden_act
            );
        }
        let heads = config.num_attention_heads;
        if heads % shards != 0 || config.intermediate_size % shards != 0 {
            candle_core::bail!(
                "{heads} heads and {} feed-forward columns do not split into {shards} shards",
                config.intermediate_size
            );
        }
        let hidden = config.hidden_size;
        let head_size = hidden / heads;
        let heads_per_shard = heads / shards;
        let width = heads_per_shard * head_size;
        let columns = config.intermediate_size / shards;
        let eps = config.layer_norm_eps;

        let e = vb.pp("embeddings");
        let embeddings = Embeddings {
            words: e.get((config.vocab_size, hidden), "word_embeddings.weight")?,
            positions: e.get(
                (config.max_position_embeddings, hidden),
                "position_embeddings.weight",
            )?,
            segment: e
                .get(
                    (config.type_vocab_size, hidden),
                    "token_type_embeddings.weight",
                )?
                .get(0)?,
            norm: candle_nn::layer_norm(hidden, eps, e.pp("LayerNorm"))?,
        };

        let mut per_shard: Vec<Vec<ShardLayer>> = (0..shards).map(|_| Vec::new()).collect();
        for l in 0..config.num_hidden_layers {
            let vb = vb.pp(format!("encoder.layer.{l}"));
            // `Wᵀ` of a linear layer `in → out`, as an `in × out` tensor.
            let linear_t = |vb: VarBuilder, inputs: usize, outputs: usize| {
                Ok::<_, candle_core::Error>((
                    vb.get((outputs, inputs), "weight")?.t()?,
                    vb.get(outputs, "bias")?,
                ))
            };
            let attention = vb.pp("attention");
            let (q, q_bias) = linear_t(attention.pp("self.query"), hidden, hidden)?;
            let (k, k_bias) = linear_t(attention.pp("self.key"), hidden, hidden)?;
            let (v, v_bias) = linear_t(attention.pp("self.value"), hidden, hidden)?;
            let (out, out_bias) = linear_t(attention.pp("output.dense"), hidden, hidden)?;
            let attention_norm =
                candle_nn::layer_norm(hidden, eps, attention.pp("output.LayerNorm"))?;
            let (up, up_bias) = linear_t(
                vb.pp("intermediate.dense"),
                hidden,
                config.intermediate_size,
            )?;
            let (down, down_bias) =
                linear_t(vb.pp("output.dense"), config.intermediate_size, hidden)?;
            let output_norm = candle_nn::layer_norm(hidden, eps, vb.pp("output.LayerNorm"))?;

            for (s, layers) in per_shard.iter_mut().enumerate() {
                let cols = |t: &Tensor| t.narrow(1, s * width, width);
                let bias = |b: &Tensor| b.narrow(0, s * width, width);
                layers.push(ShardLayer {
                    qkv: PanelWeights::new(&Tensor::cat(&[cols(&q)?, cols(&k)?, cols(&v)?], 1)?)?,
                    qkv_bias: Tensor::cat(&[bias(&q_bias)?, bias(&k_bias)?, bias(&v_bias)?], 0)?,
                    attention_out: PanelWeights::new(&out.narrow(0, s * width, width)?)?,
                    attention_out_bias: out_bias.clone(),
                    attention_norm: attention_norm.clone(),
                    up: PanelWeights::new(&up.narrow(1, s * columns, columns)?)?,
                    up_bias: up_bias.narrow(0, s * columns, columns)?,
                    down: PanelWeights::new(&down.narrow(0, s * columns, columns)?)?,
                    down_bias: down_bias.clone(),
                    output_norm: output_norm.clone(),
                });
            }
        }

        let pools = (0..shards)
            .map(|s| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("minilm-shard-{s}"))
                    .build()
                    .map_err(|e| candle_core::Error::Msg(format!("encoder shard thread: {e}")))
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(ShardedEncoder {
            embeddings,
            shards: per_shard
                .into_iter()
                .map(|layers| Shard { layers })
                .collect(),
            pools,
            heads_per_shard,
            head_size,
        })
    }

    /// How many shards (threads) the encoder is split into.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The last hidden state, `(n, len, hidden)`, of `n` padded sequences of
    /// `len` tokens (`ids` and `mask` are `(n, len)`, mask 1 for real
    /// tokens).
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (n, len) = ids.dims2()?;
        // Padding keys get the most negative float, as in BERT.
        let key_mask = ((mask.ones_like()? - mask)?.to_dtype(DType::F32)? * f64::from(f32::MIN))?
            .reshape((n, 1, 1, len))?;
        // A shard's result, and whether it failed only because the other
        // shard hung up.
        let run = |s: usize, link| {
            let exchange = Exchange {
                index: s,
                link,
                peer_stopped: std::cell::Cell::new(false),
            };
            let result = self.shard_forward(&self.shards[s], &exchange, ids, &key_mask);
            (result, exchange.peer_stopped.get())
        };
        let hidden = match self.pools.as_slice() {
            [pool] => pool.install(|| run(0, None)).0?,
            [first, second] => {
                let (to_second, from_first) = channel();
                let (to_first, from_second) = channel();
                let mut second_result = None;
                let first_result = first.install(|| {
                    second.in_place_scope(|scope| {
                        scope.spawn(|_| second_result = Some(run(1, Some((to_first, from_first)))));
                        run(0, Some((to_second, from_second)))
                    })
                });
                match (first_result, second_result) {
                    ((Ok(hidden), _), Some((Ok(_), _))) => hidden,
                    // A shard that failed makes the other report a stopped
                    // peer: report the failure itself.
                    ((Err(e), _), Some((Ok(_), _))) | ((Ok(_), _), Some((Err(e), _))) => {
                        return Err(e)
                    }
                    ((Err(first), first_peer_stopped), Some((Err(second), _))) => {
                        return Err(if first_peer_stopped { second } else { first })
                    }
                    (_, None) => candle_core::bail!("the second encoder shard did not run"),
                }
            }
            _ => candle_core::bail!("the encoder has {} shards", self.pools.len()),
        };
        hidden.reshape((n, len, ()))
    }

    fn shard_forward(
        &self,
        shard: &Shard,
        exchange: &Exchange,
        ids: &Tensor,
        key_mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (n, len) = ids.dims2()?;
        let e = &self.embeddings;
        let flat_ids = ids.flatten_all()?;
        let positions = e.positions.narrow(0, 0, len)?;
        let mut x = e
            .words
            .index_select(&flat_ids, 0)?
            .reshape((n, len, ()))?
            .broadcast_add(&positions)?
            .broadcast_add(&e.segment)?;
        x = e.norm.forward(&x)?.reshape((n * len, ()))?;

        let width = self.heads_per_shard * self.head_size;
        let scale = 1.0 / (self.head_size as f64).sqrt();
        for layer in &shard.layers {
            let qkv = layer.qkv.apply(&x)?.broadcast_add(&layer.qkv_bias)?;
            let heads = |i: usize| {
                qkv.narrow(1, i * width, width)?
                    .reshape((n, len, self.heads_per_shard, self.head_size))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let (q, k, v) = (heads(0)?, heads(1)?, heads(2)?);
            let scores = (matmul(&q, &k.t()?)? * scale)?.broadcast_add(key_mask)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = matmul(&probs, &v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((n * len, width))?;
            let attention = exchange.all_reduce(layer.attention_out.apply(&context)?)?;
            let attention = (attention.broadcast_add(&layer.attention_out_bias)? + &x)?;
            x = layer.attention_norm.forward(&attention)?;

            let inner = layer
                .up
                .apply(&x)?
                .broadcast_add(&layer.up_bias)?
                .gelu_erf()?;
            let out = exchange.all_reduce(layer.down.apply(&inner)?)?;
            let out = (out.broadcast_add(&layer.down_bias)? + &x)?;
            x = layer.output_norm.forward(&out)?;
        }
        Ok(x)
    }
}

/// Shards to use on this machine: two where two cores are available.
pub(crate) fn default_shards() -> usize {
    if let Some(n) = std::env::var("XSHARDS").ok().and_then(|s| s.parse().ok()) {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use candle_core::Device;
    use candle_transformers::models::bert::BertModel;

    /// One and two shards give BertModel's hidden states on a padded batch
    /// (so the key mask is exercised), up to the order of partial sums.
    #[test]
    fn shards_match_bert_model() {
        let embedder = crate::Config::load(None)
            .and_then(|c| c.local_embedder())
            .expect("embedder");
        let dir = embedder.dir();
        let config: BertConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let vb = crate::embedder::mmap_safetensors(&dir.join("model.safetensors"), &Device::Cpu)
            .unwrap();
        let reference = BertModel::load(vb.clone(), &config).unwrap();

        // "[CLS] the cat sat on the mat [SEP]" and "[CLS] hello [SEP]" + padding.
        let ids: Vec<u32> = vec![
            101, 1996, 4937, 2938, 2006, 1996, 13523, 102, 101, 7592, 102, 0, 0, 0, 0, 0,
        ];
        let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0];
        let ids = Tensor::from_vec(ids, (2, 8), &Device::Cpu).unwrap();
        let mask = Tensor::from_vec(mask, (2, 8), &Device::Cpu).unwrap();
        let expected = reference
            .forward(&ids, &ids.zeros_like().unwrap(), Some(&mask))
            .unwrap();

        for shards in [1, 2] {
            let encoder = ShardedEncoder::load(vb.clone(), &config, shards).unwrap();
            assert_eq!(encoder.shards(), shards);
            let got = encoder.forward(&ids, &mask).unwrap();
            assert_eq!(got.dims(), expected.dims());
            let worst = (got - &expected)
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(worst < 1e-4, "{shards} shard(s) differ by {worst}");

            // A token id outside the vocabulary is an error, not a hang.
            let bad = Tensor::from_vec(vec![101u32, 999_999], (1, 2), &Device::Cpu).unwrap();
            let err = encoder
                .forward(&bad, &bad.ones_like().unwrap())
                .unwrap_err();
            assert!(!err.to_string().contains("shard stopped"), "{err}");
        }
    }
}
