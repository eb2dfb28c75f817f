//! The M9 model handle ([`LoraModel`]: frozen base weights plus their
//! tokenizer, shared process-wide per GGUF file) and the adapted reader
//! ([`AdapterReader`]: an [`Llm`] that generates greedily with the base model
//! and, when set, a LoRA adapter — what M9's recall hands to the harness as
//! its own reader).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use candle_core::D;
use submem_core::{ChatRequest, Completion, Llm, ServiceError, Usage};
use submem_models::{GgufTokenizer, LocalLlm, StopScan};

use crate::codec::{check_ids, ByteCodec, TextCodec};
use submem_kit::spaces;

use crate::error::{LoraError, Result};
use crate::llama::{BaseModel, KvCache, LlamaConfig};
use crate::lora::Adapter;

struct ModelInner {
    base: BaseModel,
    codec: Arc<dyn TextCodec>,
    name: String,
}

/// Frozen base weights and tokenizer. Cheap to clone.
#[derive(Clone)]
pub struct LoraModel {
    inner: Arc<ModelInner>,
}

impl std::fmt::Debug for LoraModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraModel")
            .field("name", &self.inner.name)
            .field("config", self.inner.base.config())
            .finish()
    }
}

/// The SmolLM2 GGUF as `submem-models` resolves it (configuration
/// defaults and `SUBMEM_*` variables; fetched if missing and allowed).
pub fn resolve_local_gguf() -> Result<PathBuf> {
    let cfg = submem_models::Config::load(None)?;
    Ok(submem_models::resolve_llm_gguf(&cfg.models)?)
}

static SHARED: LazyLock<Mutex<HashMap<(PathBuf, usize), LoraModel>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl LoraModel {
    /// A model from parts.
    pub fn new(base: BaseModel, codec: Arc<dyn TextCodec>, name: impl Into<String>) -> Self {
        LoraModel {
            inner: Arc::new(ModelInner {
                base,
                codec,
                name: name.into(),
            }),
        }
    }

    /// SmolLM2 (or another llama GGUF) dequantised to f32, with the
    /// tokenizer `submem-models` rebuilds from the GGUF metadata.
    pub fn from_gguf(path: &Path, max_context: usize) -> Result<Self> {
        let started = std::time::Instant::now();
        let (_, ct) = crate::llama::open_gguf(path)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_else(|| "llm".into());
        let base_name = stem.split('.').next().unwrap_or("llm").to_string();
        let name = format!("{base_name}-f32");
        let tokenizer = GgufTokenizer::from_gguf(&ct, path, &name)?;
        drop(ct);
        let base = BaseModel::from_gguf(path, max_context)?;
        tracing::info!(model = %name, secs = started.elapsed().as_secs_f64(), "M9 base model loaded (f32)");
        Ok(Self::new(base, Arc::new(tokenizer), name))
    }

    /// The process-wide copy of [`LoraModel::from_gguf`] for `path` (loaded
    /// once: every M9 instance of a run shares the frozen weights).
    pub fn shared(path: &Path, max_context: usize) -> Result<Self> {
        let key = (
            path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
            max_context,
        );
        let mut table = spaces::lock(&SHARED);
        if let Some(m) = table.get(&key) {
            return Ok(m.clone());
        }
        let m = Self::from_gguf(path, max_context)?;
        table.insert(key, m.clone());
        Ok(m)
    }

    /// A seeded random tiny llama with the byte codec, for tests and benches
    /// of the training logic.
    pub fn tiny_random(seed: u64) -> Result<Self> {
        let base = BaseModel::random(LlamaConfig::tiny(ByteCodec::VOCAB), seed)?;
        Ok(Self::new(
            base,
            Arc::new(ByteCodec),
            format!("tiny-llama-{seed}"),
        ))
    }

    /// The frozen weights.
    pub fn base(&self) -> &BaseModel {
        &self.inner.base
    }

    /// The tokenizer.
    pub fn codec(&self) -> &dyn TextCodec {
        self.inner.codec.as_ref()
    }

    /// Name for reports (`smollm2-135m-instruct-f32`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Greedy generation from raw prompt text; stops at end-of-turn, at a
    /// stop string or after `max_tokens`. Returns the text and token usage.
    pub fn generate(
        &self,
        adapter: Option<&Adapter>,
        prompt: &str,
        max_tokens: usize,
        stop: &[String],
    ) -> Result<(String, Usage)> {
        let ids = self.codec().encode(prompt)?;
        self.generate_ids(adapter, &ids, max_tokens, stop)
    }

    /// [`LoraModel::generate`] from token ids; also returns the generated ids.
    pub fn generate_ids(
        &self,
        adapter: Option<&Adapter>,
        ids: &[u32],
        max_tokens: usize,
        stop: &[String],
    ) -> Result<(String, Usage)> {
        let (text, usage, _) = self.generate_tokens(adapter, ids, max_tokens, stop)?;
        Ok((text, usage))
    }

    /// Greedy generation returning text, usage and the generated ids.
    pub fn generate_tokens(
        &self,
        adapter: Option<&Adapter>,
        ids: &[u32],
        max_tokens: usize,
        stop: &[String],
    ) -> Result<(String, Usage, Vec<u32>)> {
        let base = self.base();
        let ctx = base.config().max_seq_len;
        if ids.is_empty() || max_tokens == 0 {
            return Err(LoraError::Request("empty prompt or max_tokens 0".into()));
        }
        if ids.len() + max_tokens > ctx {
            return Err(LoraError::Request(format!(
                "prompt of {} tokens plus {max_tokens} new tokens exceeds the {ctx}-token context",
                ids.len()
            )));
        }
        check_ids(ids, base.config().vocab_size)?;
        let eos = self.codec().eos_id();
        let mut cache = KvCache::default();
        let mut logits = base.next_logits(ids, 0, adapter, &mut cache)?;
        let mut generated: Vec<u32> = Vec::new();
        let mut scan = StopScan::new(stop);
        let mut ended = 0u64;
        loop {
            let next = logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
            if next == eos {
                ended = 1;
                break;
            }
            generated.push(next);
            if scan.hit(&generated, |ids| self.codec().decode(ids))? {
                break;
            }
            if generated.len() >= max_tokens {
                break;
            }
            logits = base.next_logits(
                &[next],
                ids.len() + generated.len() - 1,
                adapter,
                &mut cache,
            )?;
        }
        let text = scan.finish(&generated, |ids| self.codec().decode(ids))?;
        let usage = Usage {
            input_tokens: ids.len() as u64,
            output_tokens: generated.len() as u64 + ended,
        };
        Ok((text, usage, generated))
    }
}

/// The adapted model as an [`Llm`]: M9's reader. Greedy only.
#[derive(Debug, Clone)]
pub struct AdapterReader {
    model: LoraModel,
    adapter: Option<Arc<Adapter>>,
    name: String,
}

impl AdapterReader {
    /// A reader over `model` with `adapter` (the base model alone when
    /// `None`); `label` says which adapter, and whether it is stale.
    pub fn new(model: LoraModel, adapter: Option<Arc<Adapter>>, label: &str) -> Self {
        let name = format!("{}+lora({label})", model.name());
        AdapterReader {
            model,
            adapter,
            name,
        }
    }

    /// Whether an adapter is applied.
    pub fn has_adapter(&self) -> bool {
        self.adapter.is_some()
    }
}

#[async_trait]
impl Llm for AdapterReader {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<Completion, ServiceError> {
        request.validate()?;
        if request.temperature > 0.0 {
            return Err(ServiceError::InvalidRequest(
                "the M9 adapter reader decodes greedily only (temperature 0)".into(),
            ));
        }
        let prompt = LocalLlm::chat_prompt(&request.messages);
        let this = self.clone();
        let (max, stop) = (request.max_tokens, request.stop.clone());
        let out = tokio::task::spawn_blocking(move || {
            this.model
                .generate(this.adapter.as_deref(), &prompt, max, &stop)
        })
        .await
        .map_err(|e| ServiceError::Model {
            model: self.name.clone(),
            source: Box::new(LoraError::Task(e.to_string())),
        })?
        .map_err(|e| match e {
            LoraError::Request(m) => ServiceError::InvalidRequest(m),
            other => ServiceError::Model {
                model: self.name.clone(),
                source: Box::new(other),
            },
        })?;
        Ok(Completion {
            text: out.0,
            usage: out.1,
        })
    }
}
