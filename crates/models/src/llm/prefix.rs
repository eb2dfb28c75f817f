//! [`submem_core::PrefixCaching`] for [`LocalLlm`]: a chat head prefilled
//! once into a [`PrefixCache`], and a reader ([`PrefilledLocal`]) that
//! continues it.
//!
//! A request hits when its prompt's **tokens** start with the head's tokens
//! (a string prefix alone is not enough: byte-pair merges may cross the
//! boundary); only the remaining tokens then run before decoding, and greedy
//! output equals that of [`LocalLlm::complete`] on the same request. Any other
//! request runs in full, so the reader is always correct, only slower on a
//! miss.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use submem_core::{
    ChatMessage, ChatRequest, Completion, Llm, PrefilledLlm, PrefixCaching, PrefixReuse,
    ServiceError,
};

use super::{GenerateOptions, LocalLlm, PrefixCache};

#[async_trait]
impl PrefixCaching for LocalLlm {
    fn name(&self) -> &str {
        &self.inner.name
    }

    async fn prefill(&self, head: &[ChatMessage]) -> Result<Arc<dyn PrefilledLlm>, ServiceError> {
        if head.is_empty() {
            return Err(ServiceError::InvalidRequest("empty prefix head".into()));
        }
        let text = LocalLlm::chat_prompt_head(head);
        let cache = LocalLlm::prefill(self, &text).await?;
        Ok(Arc::new(PrefilledLocal {
            name: format!("{}+prefix", self.inner.name),
            bytes: self.cache_bytes(cache.len()),
            llm: self.clone(),
            cache,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }))
    }
}

/// The local model with one prefilled head (see the module docs).
pub struct PrefilledLocal {
    name: String,
    llm: LocalLlm,
    cache: PrefixCache,
    bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for PrefilledLocal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefilledLocal")
            .field("name", &self.name)
            .field("prefix_tokens", &self.cache.len())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Llm for PrefilledLocal {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        request.validate()?;
        let prompt = LocalLlm::chat_prompt(&request.messages);
        let opts = GenerateOptions::from(request);
        let ids = self.llm.tokenizer().encode(&prompt)?;
        let head = &self.cache.tokens;
        let hit = ids.len() > head.len() && ids.starts_with(head);
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        if !hit {
            tracing::debug!(model = %self.name, "prompt does not continue the cached head; full prefill");
        }
        let llm = self.llm.clone();
        let cache = self.cache.clone();
        let rest = ids[head.len().min(ids.len())..].to_vec();
        Ok(self
            .llm
            .blocking(move || {
                if hit {
                    llm.inner.generate(Some(&cache), rest, &opts)
                } else {
                    llm.inner.generate(None, ids, &opts)
                }
            })
            .await?)
    }
}

impl PrefilledLlm for PrefilledLocal {
    fn prefix_tokens(&self) -> usize {
        self.cache.len()
    }
    fn cache_bytes(&self) -> u64 {
        self.bytes
    }
    fn reuse(&self) -> PrefixReuse {
        PrefixReuse {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
    fn into_llm(self: Arc<Self>) -> Arc<dyn Llm> {
        self
    }
}
