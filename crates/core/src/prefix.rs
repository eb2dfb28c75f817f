//! Prefix caching: the optional capability of an [`Llm`] to run the head of a
//! chat prompt once, keep the result (its KV cache), and answer any number of
//! later requests that begin with that head without running it again.
//!
//! M11 (episode-clustered re-prefill, EpiCache) uses it to prefill each
//! episode once and hand the prefilled model to the reader as
//! [`crate::Recall::reader`]. Only a model whose activations this process
//! holds can offer it (the local SmolLM2 does); a remote API cannot, and
//! [`Llm::prefix_caching`] returns `None` for it, so callers fall back to
//! sending the text again.
//!
//! The capability is reached through [`Llm::prefix_caching`] rather than a
//! field of [`crate::Services`] so that every wrapper of an [`Llm`] (the
//! meter, lazy loaders, `Arc`) passes it through without any substrate or
//! harness knowing the concrete model type.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

use crate::{ChatMessage, Llm, ServiceError};

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
