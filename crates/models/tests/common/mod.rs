//! Shared helpers: the real models, resolved (and fetched if missing)
//! through the normal chain, loaded once per test binary.
#![allow(dead_code)]

use submem_models::{Config, LocalLlm, MiniLmEmbedder};

pub fn config() -> Config {
    Config::load(None).expect("config")
}

pub fn embedder() -> MiniLmEmbedder {
    config().local_embedder().expect("embedder")
}

pub fn llm() -> LocalLlm {
    config().local_llm().expect("local LLM")
}
