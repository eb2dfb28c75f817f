//! Model services every substrate uses: an [`Llm`], an [`Embedder`] and a
//! [`TokenCounter`]. The traits are object-safe so that one local model, a
//! remote OpenAI-compatible server or a test double can stand behind the same
//! `Arc<dyn …>`, and so that a meter (`submem_kit::meter`) can wrap any of them.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

use crate::ServiceError;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The user or the harness.
    User,
    /// The model.
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Author.
    pub role: Role,
    /// Text.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: content.into(),
        }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

crate::setters!(ChatRequest {
    with_temperature => temperature: f32,
    with_top_p => top_p: f32,
    with_max_tokens => max_tokens: usize,
    with_json => json: bool,
});

/// A chat completion request. Build it with [`ChatRequest::new`] and the
/// `with_*` setters; the defaults are greedy decoding and 256 new tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature; 0 means greedy.
    pub temperature: f32,
    /// Nucleus sampling mass (1.0 disables it).
    pub top_p: f32,
    /// Most new tokens to generate.
    pub max_tokens: usize,
    /// Extra stop strings (the model's end-of-turn marker always stops).
    pub stop: Vec<String>,
    /// Ask for a JSON object (a hint: servers that support it enforce it).
    pub json: bool,
    /// Seed for sampling, for reproducible runs.
    pub seed: Option<u64>,
}

impl ChatRequest {
    /// A greedy request of a system instruction and one user message: the
    /// shape of every memory-LLM call a substrate makes.
    pub fn instructed(system: impl Into<String>, user: impl Into<String>) -> Self {
        ChatRequest::new(vec![ChatMessage::system(system), ChatMessage::user(user)])
    }

    /// A greedy request for `messages`.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            messages,
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 256,
            stop: Vec::new(),
            json: false,
            seed: None,
        }
    }
    /// Adds a stop string.
    pub fn with_stop(mut self, s: impl Into<String>) -> Self {
        self.stop.push(s.into());
        self
    }
    /// Sets the sampling seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Rejects requests no backend can serve.
    pub fn validate(&self) -> Result<(), ServiceError> {
        if self.messages.is_empty() {
            return Err(ServiceError::InvalidRequest("no messages".into()));
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(ServiceError::InvalidRequest(format!(
                "temperature must be finite and >= 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(ServiceError::InvalidRequest(format!(
                "top_p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        Ok(())
    }
}

/// Tokens an LLM call consumed, as the backend counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// The answer to a [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// Generated text, without the end-of-turn marker.
    pub text: String,
    /// Token usage.
    pub usage: Usage,
}

/// A chat language model.
#[async_trait]
pub trait Llm: Debug + Send + Sync + 'static {
    /// A short name for reports, e.g. `smollm2-135m-instruct-q8_0`.
    fn name(&self) -> &str;
    /// Runs one chat completion.
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError>;

    /// This model's prefix-caching capability (see [`PrefixCaching`]), when it has
    /// one: a local model whose KV cache this process holds. `None` (the
    /// default) for remote APIs and test doubles; wrappers pass it through.
    fn prefix_caching(&self) -> Option<Arc<dyn PrefixCaching>> {
        None
    }

    /// This model's choice-scoring capability (see [`ChoiceScoring`]), when
    /// it has one: a local model whose output distribution this process can
    /// read. `None` (the default) for remote APIs and test doubles; wrappers
    /// pass it through.
    fn choice_scoring(&self) -> Option<Arc<dyn ChoiceScoring>> {
        None
    }
}

/// How many texts of one [`Embedder::embed_counted`] batch were computed by
/// the model and how many were answered by a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedCounts {
    /// Texts the model embedded.
    pub computed: u64,
    /// Texts answered from a cache (bit-identical to what the model returns).
    pub cached: u64,
}

/// A sentence embedder returning L2-normalised vectors.
#[async_trait]
pub trait Embedder: Debug + Send + Sync + 'static {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// Length of every vector.
    fn dimension(&self) -> usize;
    /// Embeds a batch; one vector per input, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError>;

    /// [`Embedder::embed`], also saying how many texts a cache answered, so
    /// a meter can report both what a substrate asked for (its cold cost)
    /// and what was computed. The default computes every text; caches and
    /// wrappers override it.
    async fn embed_counted(
        &self,
        texts: &[String],
    ) -> Result<(Vec<Vec<f32>>, EmbedCounts), ServiceError> {
        let out = self.embed(texts).await?;
        let counts = EmbedCounts {
            computed: texts.len() as u64,
            cached: 0,
        };
        Ok((out, counts))
    }
}

/// Counts tokens the way budgets are enforced (tiktoken `o200k_base` in
/// production).
pub trait TokenCounter: Debug + Send + Sync + 'static {
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> usize;
    /// The longest prefix of `text` with at most `max_tokens` tokens, cut on a
    /// token boundary.
    fn truncate(&self, text: &str, max_tokens: usize) -> String;
    /// Whether `text` counts as its two sides counted apart:
    /// `count(text) == count(&text[..at]) + count(&text[at..])`.
    ///
    /// A renderer that changes a few parts of a long text and counts it again
    /// counts only the changed parts between such cuts. The answer may depend
    /// only on the text next to `at`, so that several exact cuts of one text
    /// split its count into the sum of the parts between them. The default
    /// promises no cut, which is always correct.
    fn is_exact_cut(&self, text: &str, at: usize) -> bool {
        let _ = (text, at);
        false
    }
}

#[async_trait]
impl<T: Llm + ?Sized> Llm for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        (**self).complete(request).await
    }
    fn prefix_caching(&self) -> Option<Arc<dyn PrefixCaching>> {
        (**self).prefix_caching()
    }
    fn choice_scoring(&self) -> Option<Arc<dyn ChoiceScoring>> {
        (**self).choice_scoring()
    }
}

#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn dimension(&self) -> usize {
        (**self).dimension()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError> {
        (**self).embed(texts).await
    }
    async fn embed_counted(
        &self,
        texts: &[String],
    ) -> Result<(Vec<Vec<f32>>, EmbedCounts), ServiceError> {
        (**self).embed_counted(texts).await
    }
}

/// The bundle of services a substrate is built with. `llm` is `None` when the
/// run forbids memory-writing LLM calls (`--memory-llm none`); substrates with a
/// rule-based writer use it then, the others refuse to build.
#[derive(Debug, Clone)]
pub struct Services {
    /// The LLM that writes memory (records, gists, notes, summaries).
    pub llm: Option<Arc<dyn Llm>>,
    /// The embedder.
    pub embedder: Arc<dyn Embedder>,
    /// The token counter for budgets.
    pub tokens: Arc<dyn TokenCounter>,
}

/// Cosine similarity of two L2-normalised vectors (their dot product, over
/// the shorter of the two).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    // Eight running sums instead of one: a single sum is a serial chain of
    // dependent additions the compiler may not reorder, while eight
    // independent lanes vectorise. FlexA-Mem's piece ranking spent a third of
    // an 8k render here.
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    for (ca, cb) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += ca[i] * cb[i];
        }
    }
    let tail = n - n % LANES;
    let rest: f32 = a[tail..].iter().zip(&b[tail..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + rest
}

/// Scales `v` to unit length in place; leaves a zero vector unchanged.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

// ---- Prefix caching ----
//
// Prefix caching: the optional capability of an [`Llm`] to run the head of a
// chat prompt once, keep the result (its KV cache), and answer any number of
// later requests that begin with that head without running it again.
//
// M11 (episode-clustered re-prefill, EpiCache) uses it to prefill each
// episode once and hand the prefilled model to the reader as
// [`crate::Recall::reader`]. Only a model whose activations this process
// holds can offer it (the local SmolLM2 does); a remote API cannot, and
// [`Llm::prefix_caching`] returns `None` for it, so callers fall back to
// sending the text again.
//
// The capability is reached through [`Llm::prefix_caching`] rather than a
// field of [`crate::Services`] so that every wrapper of an [`Llm`] (the
// meter, lazy loaders, `Arc`) passes it through without any substrate or
// harness knowing the concrete model type.

/// How often a [`PrefilledLlm`] could continue its cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixReuse {
    /// Requests whose prompt began with the cached head: only the rest ran.
    pub hits: u64,
    /// Requests that did not: the whole prompt ran as usual.
    pub misses: u64,
}

/// A model that can prefill a prompt head once and reuse it.
#[async_trait]
pub trait PrefixCaching: Debug + Send + Sync + 'static {
    /// The model's name, as its [`Llm::name`].
    fn name(&self) -> &str;

    /// Runs the chat prompt made of `head` once and keeps its KV cache. Every
    /// message of `head` is closed as in a full prompt except the **last**,
    /// whose content stays open: a later request whose last-but-one messages
    /// equal `head[..n-1]` and whose next message's content starts with the
    /// last head message's content (same role) reuses the cache.
    async fn prefill(&self, head: &[ChatMessage]) -> Result<Arc<dyn PrefilledLlm>, ServiceError>;
}

/// An [`Llm`] holding a prefilled prompt head. It answers any request: one
/// whose prompt begins with the head runs only the remainder (a hit), any
/// other runs in full (a miss). Greedy answers are the same either way.
pub trait PrefilledLlm: Llm {
    /// Model tokens of the cached head.
    fn prefix_tokens(&self) -> usize;
    /// Bytes the cache holds (keys, values and the last logits).
    fn cache_bytes(&self) -> u64;
    /// Hits and misses so far.
    fn reuse(&self) -> PrefixReuse;
    /// The same object as a plain [`Llm`] (for [`crate::Recall::reader`]).
    fn into_llm(self: Arc<Self>) -> Arc<dyn Llm>;
}

// ---- Choice scoring ----
//
// An agent choosing among a closed list of commands (a text game's
// admissible commands) can be steered by a model's likelihood of each
// command as the reply to a prompt, instead of by free generation mapped back
// onto the list: nothing is ever unmapped, and the choice is greedy and
// deterministic. Only a model whose output distribution this process reads
// can offer it (the local SmolLM2 does); remote chat APIs do not.

/// How likely each candidate reply is after a chat prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceScores {
    /// Sum of the log-probabilities of each candidate's tokens (natural
    /// log), the end-of-turn marker included, in the candidates' order.
    pub log_likelihood: Vec<f64>,
    /// Model tokens of each candidate, the end-of-turn marker included.
    pub tokens: Vec<usize>,
    /// Tokens the model ran: the prompt once, plus each candidate token not
    /// shared with an earlier candidate's prefix.
    pub usage: Usage,
}

impl ChoiceScores {
    /// The index of the candidate with the highest mean log-probability per
    /// token (length-normalised, so short commands are not favoured for
    /// their length alone); the first such on ties. `None` when empty.
    pub fn best(&self) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, (ll, n)) in self.log_likelihood.iter().zip(&self.tokens).enumerate() {
            let mean = ll / (*n).max(1) as f64;
            if best.is_none_or(|(_, b)| mean > b) {
                best = Some((i, mean));
            }
        }
        best.map(|(i, _)| i)
    }
}

/// A model that scores closed lists of candidate replies.
#[async_trait]
pub trait ChoiceScoring: Debug + Send + Sync + 'static {
    /// The model's name, as its [`Llm::name`].
    fn name(&self) -> &str;

    /// Runs the chat prompt of `messages` once (as [`Llm::complete`] would,
    /// up to the start of the assistant's reply) and scores every candidate
    /// as the whole reply. Candidates sharing a token prefix share its cost.
    async fn score_choices(
        &self,
        messages: &[ChatMessage],
        choices: &[String],
    ) -> Result<ChoiceScores, ServiceError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_is_the_dot_product_over_the_shorter_vector() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((cosine(&a, &b) - plain).abs() < 1e-4);
        let short: f32 = a[..3].iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(cosine(&a[..3], &b), short);
        assert_eq!(cosine(&[], &b), 0.0);
    }

    #[test]
    fn the_best_choice_is_the_highest_mean_per_token() {
        let scores = ChoiceScores {
            log_likelihood: vec![-2.0, -3.0, -0.5, -3.0],
            tokens: vec![1, 6, 1, 6],
            usage: Usage::default(),
        };
        // -2.0, -0.5, -0.5, -0.5: the first of the ties wins.
        assert_eq!(scores.best(), Some(1));
        let empty = ChoiceScores {
            log_likelihood: vec![],
            tokens: vec![],
            usage: Usage::default(),
        };
        assert_eq!(empty.best(), None);
    }

    #[test]
    fn request_validation() {
        assert!(ChatRequest::new(vec![]).validate().is_err());
        let ok = ChatRequest::new(vec![ChatMessage::user("hi")]);
        assert!(ok.validate().is_ok());
        assert!(ok.clone().with_temperature(-1.0).validate().is_err());
        assert!(ok.clone().with_top_p(0.0).validate().is_err());
    }

    #[test]
    fn normalisation() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
        let mut z = vec![0.0, 0.0];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
