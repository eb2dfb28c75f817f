//! Small deterministic test doubles for logic tests: a scripted LLM, a failing
//! LLM, a prefix-caching LLM, a hashing embedder and a whitespace token
//! counter. The real models live
//! in `submem-models` and have their own tests; these never replace them.

use async_trait::async_trait;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::{
    l2_normalize, ChatMessage, ChatRequest, Completion, Embedder, Llm, PrefilledLlm, PrefixCaching,
    PrefixReuse, Role, ServiceError, Services, TokenCounter, Usage,
};

type Responder = dyn Fn(&ChatRequest) -> Result<String, ServiceError> + Send + Sync;

/// An LLM that answers from a script: a list of replies used in turn (the last
/// one repeats), or a function of the request. Usage counts whitespace words.
pub struct ScriptedLlm {
    responder: Box<Responder>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm").finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Replies with `replies` in turn; the last one repeats.
    pub fn new(replies: Vec<String>) -> Self {
        let next = AtomicUsize::new(0);
        ScriptedLlm::from_fn(move |_| {
            let i = next.fetch_add(1, Ordering::SeqCst);
            replies
                .get(i)
                .or(replies.last())
                .cloned()
                .ok_or_else(|| ServiceError::Injected("empty script".into()))
        })
    }

    /// Replies with `f(request)`.
    pub fn from_fn(
        f: impl Fn(&ChatRequest) -> Result<String, ServiceError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedLlm {
            responder: Box::new(f),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

#[async_trait]
impl Llm for ScriptedLlm {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        request.validate()?;
        if let Ok(mut r) = self.requests.lock() {
            r.push(request.clone());
        }
        let text = (self.responder)(request)?;
        Ok(Completion {
            usage: Usage {
                input_tokens: request.messages.iter().map(|m| words(&m.content)).sum(),
                output_tokens: words(&text),
            },
            text,
        })
    }
}

/// An LLM whose every call fails.
#[derive(Debug, Default)]
pub struct FailingLlm;

#[async_trait]
impl Llm for FailingLlm {
    fn name(&self) -> &str {
        "failing"
    }
    async fn complete(&self, _request: &ChatRequest) -> Result<Completion, ServiceError> {
        Err(ServiceError::Injected("FailingLlm always fails".into()))
    }
}

/// A [`ScriptedLlm`] that can prefill, standing in for the local model's
/// prefix cache ([`crate::PrefixCaching`]). Prompts render as `[role] content` lines;
/// a prefilled head is that rendering with the last line left open, and a
/// request hits when its rendering starts with it. Cache bytes are the head's
/// byte length; prefix tokens its whitespace words.
#[derive(Debug, Clone)]
pub struct CachingLlm {
    inner: Arc<CachingInner>,
}

#[derive(Debug)]
struct CachingInner {
    llm: ScriptedLlm,
    prefills: AtomicUsize,
}

impl CachingLlm {
    /// Answers every request (prefilled or not) with `f(request)`.
    pub fn from_fn(
        f: impl Fn(&ChatRequest) -> Result<String, ServiceError> + Send + Sync + 'static,
    ) -> Self {
        CachingLlm {
            inner: Arc::new(CachingInner {
                llm: ScriptedLlm::from_fn(f),
                prefills: AtomicUsize::new(0),
            }),
        }
    }

    /// Prefills run so far.
    pub fn prefills(&self) -> usize {
        self.inner.prefills.load(Ordering::SeqCst)
    }

    /// Every completion request answered so far (prefilled or not).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.inner.llm.requests()
    }

    /// The double's prompt rendering; `open_last` leaves the last message open.
    pub fn render(messages: &[ChatMessage], open_last: bool) -> String {
        let mut out = String::new();
        for (i, m) in messages.iter().enumerate() {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            out.push_str(&format!("[{role}] {}", m.content));
            if !(open_last && i + 1 == messages.len()) {
                out.push_str("\n[end]\n");
            }
        }
        out
    }
}

#[async_trait]
impl Llm for CachingLlm {
    fn name(&self) -> &str {
        "caching"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        self.inner.llm.complete(request).await
    }
    fn prefix_caching(&self) -> Option<Arc<dyn PrefixCaching>> {
        Some(Arc::new(self.clone()))
    }
}

#[async_trait]
impl PrefixCaching for CachingLlm {
    fn name(&self) -> &str {
        "caching"
    }
    async fn prefill(&self, head: &[ChatMessage]) -> Result<Arc<dyn PrefilledLlm>, ServiceError> {
        if head.is_empty() {
            return Err(ServiceError::InvalidRequest("empty head".into()));
        }
        self.inner.prefills.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(PrefilledDouble {
            model: self.clone(),
            head: CachingLlm::render(head, true),
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
        }))
    }
}

#[derive(Debug)]
struct PrefilledDouble {
    model: CachingLlm,
    head: String,
    hits: AtomicUsize,
    misses: AtomicUsize,
}

#[async_trait]
impl Llm for PrefilledDouble {
    fn name(&self) -> &str {
        "caching+prefix"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        let counter = if CachingLlm::render(&request.messages, false).starts_with(&self.head) {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::SeqCst);
        self.model.complete(request).await
    }
}

impl PrefilledLlm for PrefilledDouble {
    fn prefix_tokens(&self) -> usize {
        self.head.split_whitespace().count()
    }
    fn cache_bytes(&self) -> u64 {
        self.head.len() as u64
    }
    fn reuse(&self) -> PrefixReuse {
        PrefixReuse {
            hits: self.hits.load(Ordering::SeqCst) as u64,
            misses: self.misses.load(Ordering::SeqCst) as u64,
        }
    }
    fn into_llm(self: Arc<Self>) -> Arc<dyn Llm> {
        self
    }
}

/// A bag-of-words embedder: lower-cased alphanumeric words hashed into
/// `dimension` signed buckets, L2-normalised. Texts sharing words have positive
/// cosine; it is deterministic across runs and platforms.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dimension: usize,
}

impl HashingEmbedder {
    /// An embedder of `dimension` buckets (at least 1).
    pub fn new(dimension: usize) -> Self {
        HashingEmbedder {
            dimension: dimension.max(1),
        }
    }

    /// Embeds one text synchronously.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let mut h = DefaultHasher::new();
            word.to_lowercase().hash(&mut h);
            let x = h.finish();
            let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
            v[((x >> 1) % self.dimension as u64) as usize] += sign;
        }
        l2_normalize(&mut v);
        v
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn name(&self) -> &str {
        "hashing"
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

/// Counts whitespace-separated words as tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct WhitespaceCounter;

impl TokenCounter for WhitespaceCounter {
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    fn truncate(&self, text: &str, max_tokens: usize) -> String {
        let mut end = 0;
        for (n, (i, w)) in text
            .split_whitespace()
            .map(|w| {
                let start = w.as_ptr() as usize - text.as_ptr() as usize;
                (start, w)
            })
            .enumerate()
        {
            if n == max_tokens {
                break;
            }
            end = i + w.len();
        }
        text[..end].to_string()
    }
    /// Words never span whitespace: a cut beside whitespace (or at either
    /// end) splits no word.
    fn is_exact_cut(&self, text: &str, at: usize) -> bool {
        let (Some(left), Some(right)) = (text.get(..at), text.get(at..)) else {
            return false;
        };
        let ws = |c: Option<char>| c.is_none_or(char::is_whitespace);
        ws(left.chars().next_back()) || ws(right.chars().next())
    }
}

/// Services made of test doubles: the given LLM (if any), a 64-bucket hashing
/// embedder and the whitespace counter.
pub fn test_services(llm: Option<Arc<dyn Llm>>) -> Services {
    Services {
        llm,
        embedder: Arc::new(HashingEmbedder::new(64)),
        tokens: Arc::new(WhitespaceCounter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cosine, ChatMessage};

    #[tokio::test]
    async fn scripted_llm_replies_in_turn_and_counts_words() {
        let llm = ScriptedLlm::new(vec!["one two".into(), "three".into()]);
        let req = ChatRequest::new(vec![ChatMessage::user("a b c")]);
        let a = llm.complete(&req).await.unwrap();
        let b = llm.complete(&req).await.unwrap();
        let c = llm.complete(&req).await.unwrap();
        assert_eq!(
            (a.text.as_str(), b.text.as_str(), c.text.as_str()),
            ("one two", "three", "three")
        );
        assert_eq!(a.usage.input_tokens, 3);
        assert_eq!(a.usage.output_tokens, 2);
        assert_eq!(llm.requests().len(), 3);
    }

    #[test]
    fn hashing_embedder_is_similarity_preserving() {
        let e = HashingEmbedder::new(256);
        let a = e.embed_one("the red key is in the drawer");
        let b = e.embed_one("red key drawer");
        let c = e.embed_one("stock markets fell sharply");
        assert!(cosine(&a, &b) > cosine(&a, &c));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn whitespace_truncation() {
        let c = WhitespaceCounter;
        assert_eq!(c.truncate("a  b c d", 2), "a  b");
        assert_eq!(c.truncate("a b", 5), "a b");
        assert_eq!(c.truncate("a b", 0), "");
    }
}
