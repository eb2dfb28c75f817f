//! [`OpenAiClient`]: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp's
//! server, Ollama, …) as an [`Llm`] (`/v1/chat/completions`) and an
//! [`Embedder`] (`/v1/embeddings`).
//!
//! Every request has a timeout; 429, 5xx, timeouts and connection errors are
//! retried a bounded number of times with exponential backoff, honouring a
//! `Retry-After` header given in seconds. Failures map onto the shared
//! [`ServiceError`] vocabulary: `Http { status, body }` for error statuses,
//! `Transport` for unreachable servers and timeouts, `Malformed` for answers
//! that are not the expected JSON. Embeddings are L2-normalised.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use submem_core::{
    l2_normalize, ChatRequest, Completion, Embedder, Llm, Role, ServiceError, Usage,
};

use crate::config::OpenAiConfig;
use crate::error::{ModelsError, Result};

/// Texts per `/v1/embeddings` request.
pub const EMBED_BATCH: usize = 128;
/// Longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A client for an OpenAI-compatible server.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use submem_core::{ChatMessage, ChatRequest, Llm};
/// let cfg = submem_models::OpenAiConfig {
///     base_url: Some("http://127.0.0.1:8000/v1".into()),
///     chat_model: Some("my-model".into()),
///     ..Default::default()
/// };
/// let client = submem_models::OpenAiClient::new(&cfg)?;
/// let out = client.complete(&ChatRequest::new(vec![ChatMessage::user("Hi")])).await?;
/// println!("{}", out.text);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    chat_model: Option<String>,
    embedding_model: Option<String>,
    dimension: AtomicUsize,
    max_retries: u32,
    backoff: Duration,
    name: String,
}

impl OpenAiClient {
    /// A client for `cfg` (`base_url` is required; the models are required
    /// only by the calls that use them).
    pub fn new(cfg: &OpenAiConfig) -> Result<Self> {
        let base = cfg.base_url.as_deref().map(str::trim).unwrap_or("");
        if base.is_empty() {
            return Err(ModelsError::Config(
                "no OpenAI base URL: set [openai] base_url or SUBMEM_OPENAI_BASE_URL".into(),
            ));
        }
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelsError::Config(format!(
                "OpenAI base URL {base:?} must start with http:// or https://"
            )));
        }
        let base = base.trim_end_matches('/');
        let base = if base.ends_with("/v1") {
            base.to_string()
        } else {
            format!("{base}/v1")
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_secs.max(1)))
            .connect_timeout(Duration::from_secs(cfg.timeout_secs.clamp(1, 10)))
            .build()
            .map_err(|e| ModelsError::Config(format!("HTTP client: {e}")))?;
        let name = format!(
            "openai:{}",
            cfg.chat_model
                .as_deref()
                .or(cfg.embedding_model.as_deref())
                .unwrap_or("unset")
        );
        Ok(OpenAiClient {
            http,
            base,
            api_key: cfg.api_key.clone().filter(|k| !k.is_empty()),
            chat_model: cfg.chat_model.clone(),
            embedding_model: cfg.embedding_model.clone(),
            dimension: AtomicUsize::new(cfg.embedding_dimension.unwrap_or(0)),
            max_retries: cfg.max_retries,
            backoff: Duration::from_millis(500),
            name,
        })
    }

    /// Sets the first retry delay (doubled on each retry; default 500 ms).
    pub fn with_backoff(mut self, first: Duration) -> Self {
        self.backoff = first;
        self
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| ModelsError::Config(format!("HTTP client: {e}")))?;
        Ok(self)
    }

    /// The `…/v1` base every endpoint is appended to.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Embeds one probe text to learn the dimension (when not configured).
    pub async fn probe_dimension(&self) -> std::result::Result<usize, ServiceError> {
        let known = self.dimension.load(Ordering::Relaxed);
        if known > 0 {
            return Ok(known);
        }
        let v = self.embed(&["dimension probe".to_string()]).await?;
        Ok(v.first().map_or(0, Vec::len))
    }

    /// POSTs `body` to `path` with retries; returns the parsed JSON.
    async fn post(&self, path: &str, body: &Value) -> std::result::Result<Value, ServiceError> {
        let url = format!("{}{path}", self.base);
        let mut attempt = 0u32;
        loop {
            let mut req = self.http.post(&url).json(body);
            if let Some(key) = &self.api_key {
                req = req.bearer_auth(key);
            }
            let (err, retry_after) = match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    match resp.text().await {
                        Ok(text) if status.is_success() => {
                            return serde_json::from_str(&text).map_err(|e| {
                                ServiceError::Malformed {
                                    service: url.clone(),
                                    reason: format!("not JSON ({e}): {}", head(&text)),
                                }
                            });
                        }
                        Ok(text) => {
                            let err = ServiceError::Http {
                                service: url.clone(),
                                status: status.as_u16(),
                                body: head(&text),
                            };
                            if !(status.as_u16() == 429 || status.is_server_error()) {
                                return Err(err);
                            }
                            (err, retry_after)
                        }
                        // The connection broke mid-answer (a server killed
                        // while generating): as retryable as a refused one.
                        Err(e) => (
                            ServiceError::Transport {
                                service: url.clone(),
                                source: Box::new(e),
                            },
                            None,
                        ),
                    }
                }
                Err(e) => (
                    ServiceError::Transport {
                        service: url.clone(),
                        source: Box::new(e),
                    },
                    None,
                ),
            };
            if attempt >= self.max_retries {
                return Err(err);
            }
            let backoff = self
                .backoff
                .saturating_mul(2u32.saturating_pow(attempt))
                .min(MAX_BACKOFF);
            let wait = retry_after.map_or(backoff, |r| r.min(MAX_BACKOFF));
            tracing::warn!(%url, attempt, error = %err, wait_ms = wait.as_millis() as u64, "retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn malformed(&self, path: &str, reason: impl Into<String>) -> ServiceError {
        ServiceError::Malformed {
            service: format!("{}{path}", self.base),
            reason: reason.into(),
        }
    }
}

fn head(text: &str) -> String {
    text.chars().take(500).collect()
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    usage: Option<ApiUsage>,
}
#[derive(Deserialize)]
struct Choice {
    message: Message,
}
#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}
#[derive(Deserialize)]
struct ApiUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}
#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}
#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[async_trait]
impl Llm for OpenAiClient {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<Completion, ServiceError> {
        request.validate()?;
        let model = self.chat_model.as_deref().ok_or_else(|| {
            ServiceError::Config(
                "no chat model: set [openai] chat_model or SUBMEM_OPENAI_MODEL".into(),
            )
        })?;
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": m.content})
            })
            .collect();
        let mut body = json!({
            "model": model,
            "messages": messages,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
        });
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if let Some(seed) = request.seed {
            body["seed"] = json!(seed);
        }
        if request.json {
            body["response_format"] = json!({"type": "json_object"});
        }
        let path = "/chat/completions";
        let value = self.post(path, &body).await?;
        let resp: ChatResponse = serde_json::from_value(value)
            .map_err(|e| self.malformed(path, format!("unexpected shape: {e}")))?;
        let text = resp
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| self.malformed(path, "no choices[0].message.content"))?;
        let usage = resp.usage.map_or_else(
            || {
                tracing::warn!("server sent no usage; counting 0 tokens");
                Usage::default()
            },
            |u| Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
            },
        );
        Ok(Completion { text, usage })
    }
}

#[async_trait]
impl Embedder for OpenAiClient {
    fn name(&self) -> &str {
        self.embedding_model.as_deref().unwrap_or(&self.name)
    }

    /// The configured dimension, or the one learned from the first answer
    /// (0 before any; see [`OpenAiClient::probe_dimension`]).
    fn dimension(&self) -> usize {
        self.dimension.load(Ordering::Relaxed)
    }

    async fn embed(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, ServiceError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.embedding_model.as_deref().ok_or_else(|| {
            ServiceError::Config(
                "no embedding model: set [openai] embedding_model or SUBMEM_OPENAI_EMBEDDING_MODEL"
                    .into(),
            )
        })?;
        let path = "/embeddings";
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(EMBED_BATCH) {
            let value = self
                .post(path, &json!({"model": model, "input": chunk}))
                .await?;
            let resp: EmbeddingResponse = serde_json::from_value(value)
                .map_err(|e| self.malformed(path, format!("unexpected shape: {e}")))?;
            if resp.data.len() != chunk.len() {
                return Err(self.malformed(
                    path,
                    format!("{} vectors for {} inputs", resp.data.len(), chunk.len()),
                ));
            }
            let mut items = resp.data;
            if items.iter().all(|i| i.index.is_some()) {
                items.sort_by_key(|i| i.index);
            }
            for item in items {
                let mut v = item.embedding;
                if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
                    return Err(self.malformed(path, "empty or non-finite vector"));
                }
                let known = self.dimension.load(Ordering::Relaxed);
                if known == 0 {
                    self.dimension.store(v.len(), Ordering::Relaxed);
                } else if known != v.len() {
                    return Err(self.malformed(
                        path,
                        format!("vector of {} dims, expected {known}", v.len()),
                    ));
                }
                l2_normalize(&mut v);
                out.push(v);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_normalised() {
        let mk = |u: &str| {
            OpenAiClient::new(&OpenAiConfig {
                base_url: Some(u.into()),
                ..Default::default()
            })
        };
        assert_eq!(mk("http://h:1").unwrap().base_url(), "http://h:1/v1");
        assert_eq!(mk("http://h:1/v1/").unwrap().base_url(), "http://h:1/v1");
        assert!(mk("h:1").is_err());
        assert!(OpenAiClient::new(&OpenAiConfig::default()).is_err());
    }
}
