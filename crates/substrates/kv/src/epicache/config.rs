//! Settings of the episode-clustered re-prefill substrate (M11).

use serde::{Deserialize, Serialize};
use submem_core::plugin::head_messages;
use submem_core::ChatMessage;

use crate::KvError;

/// The start of the reader's prompt that an episode's KV cache is prefilled
/// under: an optional system message, then a user message that begins with
/// `memory_intro` followed by the episode's text. A reader request continues
/// the cache only when its prompt starts exactly like this, so set it to the
/// reader's template (the harness does).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReaderHead {
    /// The reader's system message; `None` means the model's default one.
    pub system: Option<String>,
    /// Text the user message starts with, before the memory block.
    pub memory_intro: String,
}

impl From<&submem_core::plugin::ReaderPrompt> for ReaderHead {
    fn from(p: &submem_core::plugin::ReaderPrompt) -> Self {
        ReaderHead {
            system: p.system.clone(),
            memory_intro: p.memory_intro.clone(),
        }
    }
}

impl ReaderHead {
    /// The head messages for an episode rendered as `memory`; the last
    /// message is left open by the prefix cache.
    pub fn messages(&self, memory: &str) -> Vec<ChatMessage> {
        head_messages(self.system.as_deref(), &self.memory_intro, memory)
    }
}

/// Settings of [`crate::EpiCache`], and of the `m11` plugin: every field but
/// the reader head is a setting (`m11:k=6`), listed by `submem substrates`
/// with the first sentence of its doc. Defaults follow the EpiCache reference
/// run on LoCoMo (4 episodes, windows of 4 utterances) and the Harness paper
/// (keep 25 % of each episode's tokens).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct EpiCacheConfig {
    /// Episodes per namespace: the k of k-means, capped by the number of
    /// segments. Default 4. Its setting is `k`.
    #[serde(rename = "k")]
    pub episodes: usize,
    /// Consecutive turns (or steps) per clustering segment. A segment never
    /// crosses a session. Default 4. Its setting is `segment`.
    #[serde(rename = "segment")]
    pub segment_turns: usize,
    /// Share of an episode's tokens kept, in (0, 1]. Whole turns are kept,
    /// most central first. Default 0.25. Its setting is `keep`.
    #[serde(rename = "keep")]
    pub keep_ratio: f32,
    /// k-means restarts (the best inertia wins). Default 10. Its setting is
    /// `runs`.
    #[serde(rename = "runs")]
    pub kmeans_runs: usize,
    /// k-means iteration cap per run. Default 100.
    pub kmeans_max_iterations: u64,
    /// Prefill one KV cache per episode on manage when the LLM offers prefix
    /// caching. Default true.
    pub kv_cache: bool,
    /// The reader prompt head caches are prefilled under. Not a setting: the
    /// plugin takes it from the build context's reader prompt.
    #[serde(skip)]
    pub reader_head: ReaderHead,
    /// Texts per embedding call at write. Default 64.
    pub embed_batch: usize,
}

impl Default for EpiCacheConfig {
    fn default() -> Self {
        EpiCacheConfig {
            episodes: 4,
            segment_turns: 4,
            keep_ratio: 0.25,
            kmeans_runs: 10,
            kmeans_max_iterations: 100,
            kv_cache: true,
            reader_head: ReaderHead::default(),
            embed_batch: 64,
        }
    }
}

submem_kit::setters!(EpiCacheConfig {
    with_episodes => episodes: usize,
    with_segment_turns => segment_turns: usize,
    with_keep_ratio => keep_ratio: f32,
    with_kmeans_runs => kmeans_runs: usize,
    with_kmeans_max_iterations => kmeans_max_iterations: u64,
    with_kv_cache => kv_cache: bool,
    with_reader_head => reader_head: ReaderHead,
    with_embed_batch => embed_batch: usize,
});

impl EpiCacheConfig {
    /// Rejects settings no run can use.
    pub fn validate(&self) -> Result<(), KvError> {
        let bad = |m: &str| Err(KvError::Config(m.into()));
        if self.episodes == 0 {
            return bad("episodes must be at least 1");
        }
        if self.segment_turns == 0 {
            return bad("segment_turns must be at least 1");
        }
        if !(self.keep_ratio > 0.0 && self.keep_ratio <= 1.0) {
            return bad("keep_ratio must be in (0, 1]");
        }
        if self.kmeans_runs == 0 || self.kmeans_max_iterations == 0 {
            return bad("kmeans_runs and kmeans_max_iterations must be at least 1");
        }
        if self.embed_batch == 0 {
            return bad("embed_batch must be at least 1");
        }
        Ok(())
    }
}
