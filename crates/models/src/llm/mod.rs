//! [`LocalLlm`]: SmolLM2-135M-Instruct (GGUF) on the CPU with candle's
//! `quantized_llama`.
//!
//! - The tokenizer is rebuilt from the GGUF metadata ([`GgufTokenizer`]).
//! - Prompts use SmolLM2's ChatML template
//!   (`<|im_start|>role\n…<|im_end|>\n`, ending with `<|im_start|>assistant\n`;
//!   like the model's own template, a default system message is added when
//!   the request has none). Generation stops at `<|im_end|>`, at any
//!   [`ChatRequest::stop`] string or after `max_tokens`.
//! - [`ChatRequest::json`] is only a hint here: the model cannot be
//!   constrained, so callers must parse leniently and keep fallbacks.
//! - Temperature 0 is greedy; otherwise temperature plus top-p sampling with
//!   the request's seed (0 when unset), so runs are reproducible.
//! - Weights are re-quantised to Q8_0 at load by default ([`LlmWeights`]).
//! - The context is the model's (8192) capped by candle's rotary table
//!   (`quantized_llama::MAX_SEQ_LEN` = 4096): a prompt that does not leave
//!   room for `max_tokens` is refused with `InvalidRequest`, or cut from the
//!   left when [`LocalLlmOptions::truncate_prompt_left`] is set.
//! - The model is not re-entrant: a `Mutex` serialises generations, which run
//!   on tokio's blocking pool.
//! - [`LocalLlm::prefill`] runs a prefix once and keeps its KV cache (a clone
//!   of the model state) in a [`PrefixCache`];
//!   [`LocalLlm::generate_with_prefix`] continues from it, giving the same
//!   tokens as a plain generation of the prefix followed by the suffix.
//! - The same mechanism is offered through [`Llm::prefix_caching`] as
//!   [`submem_core::PrefixCaching`]: a chat head (messages, the last left
//!   open) is prefilled once and the returned reader continues the cache for
//!   every request whose prompt tokens start with the head's (see
//!   [`LocalLlm::chat_prompt_head`]); other requests run in full.
//! - [`Llm::choice_scoring`] offers [`submem_core::ChoiceScoring`]: the
//!   log-likelihood of each of a list of candidate replies after a prompt
//!   (an agent's admissible commands), the prompt run once and candidates
//!   sharing their common token prefixes.

mod incremental;
mod prefix;
mod score;
mod tokenizer;
mod weights;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::quantized_llama::{ModelWeights, MAX_SEQ_LEN};
use submem_core::{ChatMessage, ChatRequest, Completion, Llm, Role, ServiceError, Usage};

pub use incremental::{first_stop, IncrementalText, StopScan};
pub use prefix::PrefilledLocal;
pub use tokenizer::GgufTokenizer;

use crate::config::LlmWeights;
use crate::error::{ModelsError, Result};

/// SmolLM2's default system message (from its chat template).
pub const DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// Options for [`LocalLlm::load`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LocalLlmOptions {
    /// How the weights are held in memory.
    pub weights: LlmWeights,
    /// Cut over-long prompts from the left instead of refusing them.
    pub truncate_prompt_left: bool,
    /// Use at most this many tokens of context (bounds latency and KV-cache
    /// memory); `None` uses the whole context.
    pub context_limit: Option<usize>,
}

/// Sampling and stopping parameters of one generation (the part of a
/// [`ChatRequest`] that is not the messages).
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// Most new tokens.
    pub max_tokens: usize,
    /// 0 = greedy.
    pub temperature: f32,
    /// Nucleus mass; 1.0 samples from the whole distribution.
    pub top_p: f32,
    /// Sampling seed.
    pub seed: u64,
    /// Extra stop strings.
    pub stop: Vec<String>,
}

impl From<&ChatRequest> for GenerateOptions {
    fn from(r: &ChatRequest) -> Self {
        GenerateOptions {
            max_tokens: r.max_tokens,
            temperature: r.temperature,
            top_p: r.top_p,
            seed: r.seed.unwrap_or(0),
            stop: r.stop.clone(),
        }
    }
}

/// A prefix run through the model once, with its KV cache, ready to be
/// continued any number of times by [`LocalLlm::generate_with_prefix`].
#[derive(Clone)]
pub struct PrefixCache {
    model: String,
    state: ModelWeights,
    tokens: Vec<u32>,
    last_logits: Tensor,
}

impl std::fmt::Debug for PrefixCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixCache")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl PrefixCache {
    /// Number of prefix tokens held.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
    /// Whether the prefix is empty (never: `prefill` refuses empty text).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// SmolLM2-135M-Instruct on the CPU. Cheap to clone (the model is shared).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use submem_core::{ChatMessage, ChatRequest, Llm};
/// let gguf = submem_models::resolve_llm_gguf(&Default::default())?;
/// let llm = submem_models::LocalLlm::load(&gguf, Default::default())?;
/// let req = ChatRequest::new(vec![ChatMessage::user("Say hello.")]).with_max_tokens(16);
/// let out = llm.complete(&req).await?;
/// println!("{} ({} tokens)", out.text, out.usage.output_tokens);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalLlm {
    inner: Arc<Inner>,
}

struct Inner {
    /// Pristine weights (empty KV cache); each generation runs on a clone,
    /// which shares the weight tensors and owns its cache and masks.
    model: Mutex<ModelWeights>,
    tokenizer: GgufTokenizer,
    name: String,
    path: PathBuf,
    context: usize,
    options: LocalLlmOptions,
    load_secs: f64,
    /// Bytes one token adds to the KV cache (keys and values of every layer,
    /// f32), from the GGUF hyper-parameters.
    kv_bytes_per_token: u64,
    /// Bytes of one logits vector (vocabulary × f32).
    logits_bytes: u64,
}

impl std::fmt::Debug for LocalLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLlm")
            .field("name", &self.inner.name)
            .field("path", &self.inner.path)
            .field("context", &self.inner.context)
            .finish()
    }
}

impl LocalLlm {
    /// Loads SmolLM2 (or another llama-architecture GGUF) from `path`.
    pub fn load(path: &Path, options: LocalLlmOptions) -> Result<Self> {
        let start = Instant::now();
        if !path.is_file() {
            return Err(ModelsError::ModelMissing {
                path: path.to_path_buf(),
                fix: format!("run `{}`", crate::locate::FETCH_COMMAND),
            });
        }
        let mut file = std::fs::File::open(path).map_err(|e| ModelsError::io(path, e))?;
        let ct = gguf_file::Content::read(&mut file).map_err(|e| ModelsError::BadModelFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        // "SmolLM2-135M-Instruct.Q4_1.gguf" -> "smollm2-135m-instruct", "q4_1".
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_else(|| "llm".into());
        let (base, shipped) = stem.split_once('.').unwrap_or((stem.as_str(), "gguf"));
        let name = match options.weights {
            LlmWeights::Q8_0 => format!("{base}-q8_0"),
            LlmWeights::AsShipped => format!("{base}-{shipped}"),
        };
        let tokenizer = GgufTokenizer::from_gguf(&ct, path, &name)?;
        let model_ctx = ct
            .metadata
            .get("llama.context_length")
            .and_then(|v| v.to_u32().ok())
            .map_or(MAX_SEQ_LEN, |v| v as usize);
        let kv_bytes_per_token = kv_bytes_per_token(&ct);
        let logits_bytes = 4 * tokenizer.vocab_size() as u64;
        let context = model_ctx
            .min(MAX_SEQ_LEN)
            .min(options.context_limit.unwrap_or(usize::MAX));
        if context < 2 {
            return Err(ModelsError::Config(format!(
                "context limit {context} leaves no room to generate"
            )));
        }
        let model = weights::load_weights(ct, &mut file, path, options.weights, &name).map_err(
            |e| match e {
                ModelsError::Candle { source, .. } => ModelsError::BadModelFile {
                    path: path.to_path_buf(),
                    reason: source.to_string(),
                },
                other => other,
            },
        )?;
        let load_secs = start.elapsed().as_secs_f64();
        tracing::info!(model = %name, path = %path.display(), context, secs = load_secs, "LLM loaded");
        Ok(LocalLlm {
            inner: Arc::new(Inner {
                model: Mutex::new(model),
                tokenizer,
                name,
                path: path.to_path_buf(),
                context,
                options,
                load_secs,
                kv_bytes_per_token,
                logits_bytes,
            }),
        })
    }

    /// Whether `self` and `other` share one loaded model.
    pub fn shares_model_with(&self, other: &LocalLlm) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.inner.tokenizer
    }

    /// Usable context in tokens (prompt plus generated).
    pub fn context_length(&self) -> usize {
        self.inner.context
    }

    /// Seconds [`LocalLlm::load`] took.
    pub fn load_secs(&self) -> f64 {
        self.inner.load_secs
    }

    /// The ChatML prompt for `messages`, ending with the assistant header.
    pub fn chat_prompt(messages: &[ChatMessage]) -> String {
        let mut out = render_chat(messages, false);
        out.push_str("<|im_start|>assistant\n");
        out
    }

    /// The start of [`LocalLlm::chat_prompt`] for any request that begins
    /// with `head`'s messages, where the last one's content may continue:
    /// every message closed except the last, which stops after its content.
    pub fn chat_prompt_head(head: &[ChatMessage]) -> String {
        render_chat(head, true)
    }

    /// Bytes the KV cache of `tokens` tokens takes (f32 keys and values of
    /// every layer), plus one logits vector.
    pub fn cache_bytes(&self, tokens: usize) -> u64 {
        tokens as u64 * self.inner.kv_bytes_per_token + self.inner.logits_bytes
    }

    /// Generates from raw prompt text (no template), blocking.
    pub fn generate_blocking(&self, prompt: &str, opts: &GenerateOptions) -> Result<Completion> {
        let ids = self.inner.tokenizer.encode(prompt)?;
        self.inner.generate(None, ids, opts)
    }

    /// Runs `prefix` (raw text, e.g. a rendered system message and memory)
    /// through the model once and keeps its KV cache. Blocking.
    pub fn prefill_blocking(&self, prefix: &str) -> Result<PrefixCache> {
        self.inner.prefill(prefix)
    }

    /// Continues a [`PrefixCache`] with `suffix` (raw text) and generates.
    /// The prompt is the prefix's tokens followed by the suffix's tokens, so
    /// cut prefixes at a message boundary. Blocking.
    pub fn generate_with_prefix_blocking(
        &self,
        cache: &PrefixCache,
        suffix: &str,
        opts: &GenerateOptions,
    ) -> Result<Completion> {
        let ids = self.inner.tokenizer.encode(suffix)?;
        self.inner.generate(Some(cache), ids, opts)
    }

    /// [`LocalLlm::prefill_blocking`] on the blocking pool.
    pub async fn prefill(&self, prefix: &str) -> Result<PrefixCache> {
        let this = self.clone();
        let prefix = prefix.to_string();
        self.blocking(move || this.prefill_blocking(&prefix)).await
    }

    /// [`LocalLlm::generate_with_prefix_blocking`] on the blocking pool.
    pub async fn generate_with_prefix(
        &self,
        cache: &PrefixCache,
        suffix: &str,
        opts: &GenerateOptions,
    ) -> Result<Completion> {
        let this = self.clone();
        let (cache, suffix, opts) = (cache.clone(), suffix.to_string(), opts.clone());
        self.blocking(move || this.generate_with_prefix_blocking(&cache, &suffix, &opts))
            .await
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| ModelsError::Task {
                model: self.inner.name.clone(),
                reason: e.to_string(),
            })?
    }
}

impl Inner {
    fn c(&self) -> impl Fn(candle_core::Error) -> ModelsError + '_ {
        move |e| ModelsError::candle(&self.name, e)
    }

    /// A fresh model state (shared weights, empty cache) and the lock that
    /// serialises use of the CPU.
    fn fresh(&self) -> Result<(std::sync::MutexGuard<'_, ModelWeights>, ModelWeights)> {
        let guard = self.model.lock().map_err(|_| ModelsError::Task {
            model: self.name.clone(),
            reason: "a previous generation panicked".into(),
        })?;
        let state = guard.clone();
        Ok((guard, state))
    }

    fn forward(&self, state: &mut ModelWeights, ids: &[u32], pos: usize) -> Result<Tensor> {
        let input = Tensor::new(ids, &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .map_err(self.c())?;
        state
            .forward(&input, pos)
            .and_then(|l| l.squeeze(0))
            .map_err(self.c())
    }

    fn prefill(&self, prefix: &str) -> Result<PrefixCache> {
        let tokens = self.tokenizer.encode(prefix)?;
        if tokens.is_empty() {
            return Err(ModelsError::InvalidRequest("empty prefix".into()));
        }
        if tokens.len() >= self.context {
            return Err(ModelsError::InvalidRequest(format!(
                "prefix of {} tokens does not fit the {}-token context",
                tokens.len(),
                self.context
            )));
        }
        let (_guard, mut state) = self.fresh()?;
        let last_logits = self.forward(&mut state, &tokens, 0)?;
        Ok(PrefixCache {
            model: self.name.clone(),
            state,
            tokens,
            last_logits,
        })
    }

    fn generate(
        &self,
        prefix: Option<&PrefixCache>,
        mut ids: Vec<u32>,
        opts: &GenerateOptions,
    ) -> Result<Completion> {
        let span = tracing::debug_span!("generate", model = %self.name);
        let _enter = span.enter();
        if let Some(p) = prefix.filter(|p| p.model != self.name) {
            return Err(ModelsError::InvalidRequest(format!(
                "prefix cache was built by {}, not {}",
                p.model, self.name
            )));
        }
        let prefix_len = prefix.map_or(0, |p| p.tokens.len());
        if prefix_len + ids.len() == 0 {
            return Err(ModelsError::InvalidRequest("empty prompt".into()));
        }
        if opts.max_tokens == 0 {
            return Err(ModelsError::InvalidRequest("max_tokens must be > 0".into()));
        }
        if opts.max_tokens >= self.context {
            return Err(ModelsError::InvalidRequest(format!(
                "max_tokens {} leaves no room for a prompt in the {}-token context",
                opts.max_tokens, self.context
            )));
        }
        let room = self.context - opts.max_tokens;
        if prefix_len + ids.len() > room {
            if self.options.truncate_prompt_left && prefix.is_none() {
                let cut = ids.len() - room;
                tracing::warn!(dropped = cut, "prompt truncated from the left");
                ids.drain(..cut);
            } else {
                return Err(ModelsError::InvalidRequest(format!(
                    "prompt of {} tokens plus max_tokens {} exceeds the {}-token context",
                    prefix_len + ids.len(),
                    opts.max_tokens,
                    self.context
                )));
            }
        }
        let sampling = if opts.temperature <= 0.0 {
            Sampling::ArgMax
        } else if opts.top_p >= 1.0 {
            Sampling::All {
                temperature: f64::from(opts.temperature),
            }
        } else {
            Sampling::TopP {
                p: f64::from(opts.top_p),
                temperature: f64::from(opts.temperature),
            }
        };
        let mut sampler = LogitsProcessor::from_sampling(opts.seed, sampling);

        let (_guard, mut state) = match prefix {
            Some(p) => {
                let guard = self.model.lock().map_err(|_| ModelsError::Task {
                    model: self.name.clone(),
                    reason: "a previous generation panicked".into(),
                })?;
                (guard, p.state.clone())
            }
            None => self.fresh()?,
        };
        let started = Instant::now();
        let mut logits = match prefix {
            Some(p) if ids.is_empty() => p.last_logits.clone(),
            _ => self.forward(&mut state, &ids, prefix_len)?,
        };
        let prefill_secs = started.elapsed().as_secs_f64();
        let mut pos = prefix_len + ids.len();
        let prompt_tokens = pos;
        let mut generated: Vec<u32> = Vec::new();
        let mut scan = StopScan::new(&opts.stop);
        let mut ended = false;
        loop {
            let next = sampler.sample(&logits).map_err(self.c())?;
            if next == self.tokenizer.eos_id {
                ended = true;
                break;
            }
            generated.push(next);
            if scan.hit(&generated, |ids| self.tokenizer.decode(ids, true))? {
                break;
            }
            if generated.len() >= opts.max_tokens {
                break;
            }
            logits = self.forward(&mut state, &[next], pos)?;
            pos += 1;
        }
        let text = scan.finish(&generated, |ids| self.tokenizer.decode(ids, true))?;
        if ended {
            generated.push(self.tokenizer.eos_id);
        }
        let secs = started.elapsed().as_secs_f64();
        tracing::debug!(
            prompt_tokens,
            output_tokens = generated.len(),
            prefill_secs,
            secs,
            "generated"
        );
        Ok(Completion {
            text,
            usage: Usage {
                input_tokens: prompt_tokens as u64,
                output_tokens: generated.len() as u64,
            },
        })
    }
}

/// ChatML for `messages` (with SmolLM2's default system message when the
/// first is not a system message); `open_last` leaves the last unclosed.
fn render_chat(messages: &[ChatMessage], open_last: bool) -> String {
    let mut out = String::new();
    if messages.first().is_none_or(|m| m.role != Role::System) {
        out.push_str(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out.push_str(&format!("<|im_start|>{role}\n{}", m.content));
        if !(open_last && i + 1 == messages.len()) {
            out.push_str("<|im_end|>\n");
        }
    }
    out
}

/// KV-cache bytes per token from the GGUF hyper-parameters: layers × (keys +
/// values) × KV heads × head size × 4 bytes. 0 when a field is missing.
fn kv_bytes_per_token(ct: &gguf_file::Content) -> u64 {
    let get = |key: &str| {
        ct.metadata
            .get(key)
            .and_then(|v| v.to_u32().ok())
            .map_or(0, u64::from)
    };
    let layers = get("llama.block_count");
    let heads = get("llama.attention.head_count");
    let kv_heads = match get("llama.attention.head_count_kv") {
        0 => heads,
        n => n,
    };
    let head_dim = get("llama.embedding_length")
        .checked_div(heads)
        .unwrap_or(0);
    layers * 2 * kv_heads * head_dim * 4
}

#[async_trait]
impl Llm for LocalLlm {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn prefix_caching(&self) -> Option<Arc<dyn submem_core::PrefixCaching>> {
        Some(Arc::new(self.clone()))
    }

    fn choice_scoring(&self) -> Option<Arc<dyn submem_core::ChoiceScoring>> {
        Some(Arc::new(self.clone()))
    }

    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<Completion, ServiceError> {
        request.validate()?;
        let prompt = LocalLlm::chat_prompt(&request.messages);
        let opts = GenerateOptions::from(request);
        let this = self.clone();
        Ok(self
            .blocking(move || this.generate_blocking(&prompt, &opts))
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_adds_default_system() {
        let p = LocalLlm::chat_prompt(&[ChatMessage::user("Hi")]);
        assert_eq!(
            p,
            format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        );
        let p = LocalLlm::chat_prompt(&[ChatMessage::system("S"), ChatMessage::user("U")]);
        assert_eq!(
            p,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn head_is_a_prefix_of_every_continuing_prompt() {
        let head = [
            ChatMessage::system("S"),
            ChatMessage::user("Memory:\nA: hi"),
        ];
        let full = LocalLlm::chat_prompt(&[
            ChatMessage::system("S"),
            ChatMessage::user("Memory:\nA: hi\n\nQuestion: q"),
        ]);
        let h = LocalLlm::chat_prompt_head(&head);
        assert!(full.starts_with(&h), "{h:?} vs {full:?}");
        assert!(h.ends_with("A: hi"));
        assert!(LocalLlm::chat_prompt_head(&[ChatMessage::user("x")])
            .starts_with(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}")));
    }

    #[test]
    fn stop_strings() {
        let stops = vec!["\n\n".to_string(), "END".to_string(), String::new()];
        assert_eq!(first_stop("abc END x\n\n", &stops), Some(4));
        assert_eq!(first_stop("abc", &stops), None);
    }
}

/// Throughput of one [`LocalLlm::speed_blocking`] run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speed {
    /// Prompt tokens run in one forward pass.
    pub prompt_tokens: usize,
    /// Seconds the prompt pass took.
    pub prefill_secs: f64,
    /// Tokens decoded one at a time.
    pub decode_tokens: usize,
    /// Seconds decoding took.
    pub decode_secs: f64,
}

impl Speed {
    /// Prompt tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_secs.max(1e-9)
    }
    /// Generated tokens per second.
    pub fn decode_tok_s(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_secs.max(1e-9)
    }
}

impl LocalLlm {
    /// Measures prefill on `prompt` (raw text) and greedy decoding of exactly
    /// `decode_tokens` tokens (end-of-turn is not a stop here). Blocking.
    pub fn speed_blocking(&self, prompt: &str, decode_tokens: usize) -> Result<Speed> {
        let inner = &self.inner;
        let ids = inner.tokenizer.encode(prompt)?;
        if ids.is_empty() || ids.len() + decode_tokens > inner.context {
            return Err(ModelsError::InvalidRequest(format!(
                "speed run of {} + {decode_tokens} tokens does not fit the {}-token context",
                ids.len(),
                inner.context
            )));
        }
        let (_guard, mut state) = inner.fresh()?;
        let t0 = Instant::now();
        let mut logits = inner.forward(&mut state, &ids, 0)?;
        let prefill_secs = t0.elapsed().as_secs_f64();
        let mut sampler = LogitsProcessor::from_sampling(0, Sampling::ArgMax);
        let t1 = Instant::now();
        for i in 0..decode_tokens {
            let next = sampler.sample(&logits).map_err(inner.c())?;
            logits = inner.forward(&mut state, &[next], ids.len() + i)?;
        }
        Ok(Speed {
            prompt_tokens: ids.len(),
            prefill_secs,
            decode_tokens,
            decode_secs: t1.elapsed().as_secs_f64(),
        })
    }
}
