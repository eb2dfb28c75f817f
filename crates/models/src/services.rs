//! Building [`submem_core::Services`] from a [`Config`].
//!
//! Local models are loaded once per process: the builders keep every loaded
//! embedder and LLM in a process-wide table keyed by file and options, so
//! building services twice (or from two threads) shares one copy. Loading is
//! blocking (it reads ~100 MB and may fetch); call these at start-up, or from
//! `spawn_blocking` inside async code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use submem_core::{Embedder, Llm, Services, TokenCounter};

use crate::config::{Config, EmbedderKind, LlmKind, LlmWeights};
use crate::embedder::MiniLmEmbedder;
use crate::error::{ModelsError, Result};
use crate::llm::{LocalLlm, LocalLlmOptions};
use crate::locate::{resolve_embedder_dir, resolve_llm_gguf};
use crate::openai::OpenAiClient;
use crate::tokens::O200kCounter;

type LlmKey = (PathBuf, LlmWeights, bool, Option<usize>);

static EMBEDDERS: LazyLock<Mutex<HashMap<PathBuf, MiniLmEmbedder>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
static LLMS: LazyLock<Mutex<HashMap<LlmKey, LocalLlm>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn poisoned(what: &str) -> ModelsError {
    ModelsError::Task {
        model: what.to_string(),
        reason: "a previous load panicked".into(),
    }
}

/// The process-wide all-MiniLM-L6-v2 loaded from `dir` (loaded on first use).
pub fn shared_embedder(dir: &Path) -> Result<MiniLmEmbedder> {
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut table = EMBEDDERS.lock().map_err(|_| poisoned("embedder cache"))?;
    if let Some(e) = table.get(&key) {
        return Ok(e.clone());
    }
    let e = MiniLmEmbedder::load(dir)?;
    table.insert(key, e.clone());
    Ok(e)
}

/// The process-wide local LLM loaded from `gguf` with `options`.
pub fn shared_local_llm(gguf: &Path, options: LocalLlmOptions) -> Result<LocalLlm> {
    let path = gguf.canonicalize().unwrap_or_else(|_| gguf.to_path_buf());
    let key = (
        path,
        options.weights,
        options.truncate_prompt_left,
        options.context_limit,
    );
    let mut table = LLMS.lock().map_err(|_| poisoned("LLM cache"))?;
    if let Some(l) = table.get(&key) {
        return Ok(l.clone());
    }
    let l = LocalLlm::load(gguf, options)?;
    table.insert(key, l.clone());
    Ok(l)
}

impl Config {
    /// The budget token counter (tiktoken `o200k_base`).
    pub fn token_counter(&self) -> Result<Arc<dyn TokenCounter>> {
        Ok(Arc::new(O200kCounter::new()?))
    }

    /// The local embedder, resolving (and fetching) its files as configured.
    pub fn local_embedder(&self) -> Result<MiniLmEmbedder> {
        shared_embedder(&resolve_embedder_dir(&self.models)?)
    }

    /// The local LLM, resolving (and fetching) its file as configured.
    pub fn local_llm(&self) -> Result<LocalLlm> {
        let options = LocalLlmOptions {
            weights: self.models.llm_weights,
            truncate_prompt_left: self.models.truncate_prompt_left,
            context_limit: None,
        };
        shared_local_llm(&resolve_llm_gguf(&self.models)?, options)
    }

    /// The configured embedder (`[services] embedder`).
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        Ok(match self.services.embedder {
            EmbedderKind::Local => Arc::new(self.local_embedder()?),
            EmbedderKind::Openai => Arc::new(OpenAiClient::new(&self.openai)?),
        })
    }

    /// An LLM of `kind`; `None` for [`LlmKind::None`].
    pub fn llm(&self, kind: LlmKind) -> Result<Option<Arc<dyn Llm>>> {
        Ok(match kind {
            LlmKind::None => None,
            LlmKind::Local => Some(Arc::new(self.local_llm()?)),
            LlmKind::Openai => {
                if self.openai.chat_model.is_none() {
                    return Err(ModelsError::Config(
                        "[services] asks for the OpenAI LLM but no chat model is set \
                         ([openai] chat_model or SUBMEM_OPENAI_MODEL)"
                            .into(),
                    ));
                }
                Some(Arc::new(OpenAiClient::new(&self.openai)?))
            }
        })
    }

    /// The memory-writing LLM (`[services] memory_llm`).
    pub fn memory_llm(&self) -> Result<Option<Arc<dyn Llm>>> {
        self.llm(self.services.memory_llm)
    }

    /// The reader LLM (`[services] reader`).
    pub fn reader_llm(&self) -> Result<Option<Arc<dyn Llm>>> {
        self.llm(self.services.reader)
    }

    /// Services on the embedded models whatever the configured kinds say:
    /// the local SmolLM2 as memory LLM, MiniLM, o200k. For examples, benches
    /// and real-model tests, which measure these very models.
    pub fn local_services(&self) -> Result<Services> {
        Ok(Services {
            llm: Some(Arc::new(self.local_llm()?)),
            embedder: Arc::new(self.local_embedder()?),
            tokens: self.token_counter()?,
        })
    }

    /// The services bundle substrates are built with (memory LLM per config).
    pub fn services(&self) -> Result<Services> {
        Ok(Services {
            llm: self.memory_llm()?,
            embedder: self.embedder()?,
            tokens: self.token_counter()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_and_misconfigured_openai() {
        let cfg = Config::default();
        assert!(cfg.llm(LlmKind::None).unwrap().is_none());
        let err = cfg.llm(LlmKind::Openai).unwrap_err();
        assert!(matches!(err, ModelsError::Config(_)), "{err}");
        let mut cfg = Config::default();
        cfg.services.embedder = EmbedderKind::Openai;
        assert!(matches!(
            cfg.embedder().unwrap_err(),
            ModelsError::Config(_)
        ));
    }
}
