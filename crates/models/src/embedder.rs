//! [`MiniLmEmbedder`]: sentence-transformers all-MiniLM-L6-v2 on the CPU with
//! candle (384-dimensional, L2-normalised vectors).
//!
//! It reproduces sentence-transformers' pipeline: the shipped WordPiece
//! `tokenizer.json`, but truncating at 256 tokens (the model's
//! `max_seq_length`; the shipped file says 128) and padding only to the
//! longest text of each batch (the shipped file pads everything to 128), then
//! BERT, mean pooling over the attention mask, and L2 normalisation. Inputs
//! are sorted by length and cut into batches of 32 so that short texts are
//! not padded to the length of long ones. The CPU work runs on tokio's
//! blocking pool, never on the async executor.
//!
//! Checked against an independent float64 NumPy implementation of BERT
//! (`tests/reference/minilm_reference.py`): the vectors agree to ~1e-7.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use submem_core::{Embedder, ServiceError};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::bert_shards::{default_shards, ShardedEncoder};
use crate::error::{ModelsError, Result};

/// Longest input in tokens (sentence-transformers' `max_seq_length`).
pub const MAX_TOKENS: usize = 256;
/// Texts per forward pass.
pub const BATCH_SIZE: usize = 32;
/// Padded batches of at most this many tokens (a query, a few short texts)
/// run on the sharded encoder ([`crate::bert_shards`]); longer ones on
/// candle-transformers' BERT with candle's own threading.
///
/// Measured on 2 cores (release loop, p50): one text of ~50 tokens took
/// 14 ms sharded against 27 ms on candle's pool. From ~86 tokens the
/// feed-forward activations pass 64 K elements, where candle hands
/// element-wise ops to its global pool, which both shards would then
/// share: one text of ~100 tokens took 64 ms sharded against 51 ms.
const SHARDED_MAX_TOKENS: usize = 64;

const NAME: &str = "all-MiniLM-L6-v2";

/// all-MiniLM-L6-v2 on the CPU. Cheap to clone (the model is shared).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use submem_core::{cosine, Embedder};
/// let dir = submem_models::resolve_embedder_dir(&Default::default())?;
/// let e = submem_models::MiniLmEmbedder::load(&dir)?;
/// let v = e.embed(&["The cat sits on the mat".into(), "A cat is sitting on a mat".into()]).await?;
/// assert!(cosine(&v[0], &v[1]) > 0.9);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MiniLmEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dimension: usize,
    dir: PathBuf,
    /// Runs the forward pass of small batches (see [`SHARDED_MAX_TOKENS`]);
    /// `None` if it could not be built, and then `model` runs them.
    sharded: Option<ShardedEncoder>,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.inner.dir)
            .field("dimension", &self.inner.dimension)
            .finish()
    }
}

impl MiniLmEmbedder {
    /// Loads the model from a directory with `config.json`,
    /// `model.safetensors` and `tokenizer.json` (weights are memory-mapped).
    pub fn load(dir: &Path) -> Result<Self> {
        let start = Instant::now();
        let file = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(ModelsError::ModelMissing {
                    path: p,
                    fix: format!("run `{}`", crate::locate::FETCH_COMMAND),
                })
            }
        };
        let config_path = file("config.json")?;
        let weights_path = file("model.safetensors")?;
        let tokenizer_path = file("tokenizer.json")?;

        let text =
            std::fs::read_to_string(&config_path).map_err(|e| ModelsError::io(&config_path, e))?;
        let config: BertConfig =
            serde_json::from_str(&text).map_err(|e| ModelsError::BadModelFile {
                path: config_path.clone(),
                reason: e.to_string(),
            })?;

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| ModelsError::tokenizer(NAME, e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| ModelsError::tokenizer(NAME, e))?;

        let device = Device::Cpu;
        let vb = mmap_safetensors(&weights_path, &device)?;
        let model =
            BertModel::load(vb.clone(), &config).map_err(|e| ModelsError::candle(NAME, e))?;
        let sharded = ShardedEncoder::load(vb, &config, default_shards())
            .map_err(|e| tracing::warn!(error = %e, "no sharded encoder for short inputs"))
            .ok();
        tracing::info!(
            model = NAME,
            dir = %dir.display(),
            secs = start.elapsed().as_secs_f64(),
            "embedder loaded"
        );
        Ok(MiniLmEmbedder {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                device,
                dimension: config.hidden_size,
                dir: dir.to_path_buf(),
                sharded,
            }),
        })
    }

    /// Whether `self` and `other` share one loaded model.
    pub fn shares_model_with(&self, other: &MiniLmEmbedder) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// How many threads a short input (a query, a few short texts) is split
    /// across ([`crate::bert_shards`]); `None` if the sharded encoder could
    /// not be built and short inputs run like long ones.
    pub fn short_input_shards(&self) -> Option<usize> {
        self.inner.sharded.as_ref().map(ShardedEncoder::shards)
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Embeds `texts` on the calling thread (blocking; use
    /// [`Embedder::embed`] from async code).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.inner.embed(texts)
    }
}

/// Memory-maps a safetensors file into a `VarBuilder` whose linear weights
/// are stored transposed (see [`TransposedLinearWeights`]).
#[allow(unsafe_code)]
pub(crate) fn mmap_safetensors(path: &Path, device: &Device) -> Result<VarBuilder<'static>> {
    // SAFETY: the mapping is only unsound if the file is modified while it is
    // mapped. Model files are installed once, by rename, into the cache and
    // never rewritten; a user pointing at a file they edit concurrently is
    // outside what any loader can defend against.
    let tensors =
        unsafe { MmapedSafetensors::new(path) }.map_err(|e| ModelsError::candle(NAME, e))?;
    Ok(VarBuilder::from_backend(
        Box::new(TransposedLinearWeights(tensors)),
        DType::F32,
        device.clone(),
    ))
}

/// Hands BERT its linear weights `W` (out × in) as views of a contiguous
/// `Wᵀ`, so that the `x · Wᵀ` of every linear layer reads a contiguous
/// right-hand side.
///
/// With the checkpoint's row-major `W`, gemm repacks the whole weight matrix
/// on every call: a query's forward pass copied all ~10.6 M linear weights
/// and spent a third of its time doing so. Transposing once at load (a copy
/// of ~42 MB) removes that; the values, and so the vectors, are unchanged.
struct TransposedLinearWeights(MmapedSafetensors);

impl TransposedLinearWeights {
    /// Linear layers' weights: 2-D `.weight` tensors outside the embedding
    /// tables (which are read by row, so they stay as shipped).
    fn is_linear_weight(name: &str, shape: &Shape) -> bool {
        shape.rank() == 2 && name.ends_with(".weight") && !name.contains("embeddings.")
    }
}

impl SimpleBackend for TransposedLinearWeights {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        hints: candle_nn::Init,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let tensor = SimpleBackend::get(&self.0, shape.clone(), name, hints, dtype, device)?;
        if Self::is_linear_weight(name, &shape) {
            tensor.t()?.contiguous()?.t()
        } else {
            Ok(tensor)
        }
    }

    fn get_unchecked(
        &self,
        name: &str,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        SimpleBackend::get_unchecked(&self.0, name, dtype, device)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        SimpleBackend::contains_tensor(&self.0, name)
    }
}

impl Inner {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.embed_batch(&batch)?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_batch(&self, batch: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(batch.to_vec(), true)
            .map_err(|e| ModelsError::tokenizer(NAME, e))?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        self.forward(ids, mask, n, len)
    }

    /// BERT, mean pooling over the mask and L2 normalisation of `n` padded
    /// sequences of `len` tokens.
    fn forward(
        &self,
        ids: Vec<u32>,
        mask: Vec<u32>,
        n: usize,
        len: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let c = |e| ModelsError::candle(NAME, e);
        let ids = Tensor::from_vec(ids, (n, len), &self.device).map_err(c)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device).map_err(c)?;
        let hidden = match &self.sharded {
            Some(sharded) if n * len <= SHARDED_MAX_TOKENS => sharded.forward(&ids, &mask),
            _ => {
                let type_ids = ids.zeros_like().map_err(c)?;
                self.model.forward(&ids, &type_ids, Some(&mask))
            }
        }
        .map_err(c)?;
        // Mean over real tokens: sum(h * m) / sum(m), then L2 norm.
        let m = mask
            .to_dtype(DType::F32)
            .map_err(c)?
            .unsqueeze(2)
            .map_err(c)?;
        let summed = hidden.broadcast_mul(&m).map_err(c)?.sum(1).map_err(c)?;
        let counts = m.sum(1).map_err(c)?.clamp(1e-9, f64::MAX).map_err(c)?;
        let mean = summed.broadcast_div(&counts).map_err(c)?;
        let norm = mean
            .sqr()
            .map_err(c)?
            .sum_keepdim(1)
            .map_err(c)?
            .sqrt()
            .map_err(c)?
            .clamp(1e-12, f64::MAX)
            .map_err(c)?;
        let unit = mean.broadcast_div(&norm).map_err(c)?;
        unit.to_vec2::<f32>().map_err(c)
    }
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        NAME
    }

    fn dimension(&self) -> usize {
        self.inner.dimension
    }

    async fn embed(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, ServiceError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = self.inner.clone();
        let texts = texts.to_vec();
        let span = tracing::debug_span!("embed", model = NAME, n = texts.len());
        tokio::task::spawn_blocking(move || span.in_scope(|| inner.embed(&texts)))
            .await
            .map_err(|e| ModelsError::Task {
                model: NAME.into(),
                reason: e.to_string(),
            })?
            .map_err(ServiceError::from)
    }
}
