//! Building [`submem_core::Services`] from a [`Config`].
//!
//! Local models are loaded once per process: the builders keep every loaded
//! embedder and LLM in a process-wide table keyed by file and options, so
//! building services twice (or from two threads) shares one copy. The
//! configured embedder comes behind one process-wide [`CachedEmbedder`] per
//! model (unless `[models] embed_cache = false`), so every substrate, run
//! and shard embeds a text once. Loading is
//! blocking (it reads ~100 MB and may fetch); call these at start-up, or from
//! `spawn_blocking` inside async code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use submem_core::{Embedder, Llm, Services, TokenCounter};

use crate::config::{Config, EmbedderKind, LlmKind, LlmWeights};
use crate::embed_cache::CachedEmbedder;
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
type CacheKey = (String, Option<PathBuf>, usize);
static EMBED_CACHES: LazyLock<Mutex<HashMap<CacheKey, Arc<CachedEmbedder>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// What makes MiniLM's vectors what they are: its files (the weights by
/// length and their first and last MiB, so that this costs milliseconds,
/// not a hash of 90 MB) and the pipeline's options.
fn minilm_identity(dir: &Path) -> Result<String> {
    static SEEN: LazyLock<Mutex<HashMap<PathBuf, String>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if let Some(id) = SEEN
        .lock()
        .map_err(|_| poisoned("identity table"))?
        .get(&key)
    {
        return Ok(id.clone());
    }
    let id = fingerprint_minilm(dir)?;
    SEEN.lock()
        .map_err(|_| poisoned("identity table"))?
        .insert(key, id.clone());
    Ok(id)
}

fn fingerprint_minilm(dir: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek, SeekFrom};
    let io = |path: &Path, e: std::io::Error| ModelsError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut h = Sha256::new();
    for name in ["config.json", "tokenizer.json"] {
        let path = dir.join(name);
        h.update(std::fs::read(&path).map_err(|e| io(&path, e))?);
    }
    let path = dir.join("model.safetensors");
    let mut f = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
    let len = f.metadata().map_err(|e| io(&path, e))?.len();
    h.update(len.to_le_bytes());
    let mut buf = vec![0u8; (1 << 20).min(len as usize)];
    f.read_exact(&mut buf).map_err(|e| io(&path, e))?;
    h.update(&buf);
    f.seek(SeekFrom::Start(len - buf.len() as u64))
        .map_err(|e| io(&path, e))?;
    f.read_exact(&mut buf).map_err(|e| io(&path, e))?;
    h.update(&buf);
    let digest: [u8; 32] = h.finalize().into();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "all-MiniLM-L6-v2|files={hex}|max_tokens={}",
        crate::embedder::MAX_TOKENS
    ))
}

/// `inner` behind the process-wide cache for `identity` (one per
/// identity, store and bound, so every substrate of the process shares it).
pub fn shared_cached_embedder(
    inner: Arc<dyn Embedder>,
    identity: String,
    root: Option<PathBuf>,
    entries: usize,
) -> Result<Arc<CachedEmbedder>> {
    let key = (identity, root, entries);
    let mut table = EMBED_CACHES
        .lock()
        .map_err(|_| poisoned("embedding cache table"))?;
    if let Some(c) = table.get(&key) {
        return Ok(c.clone());
    }
    let c = Arc::new(CachedEmbedder::new(
        inner,
        key.0.clone(),
        key.1.as_deref(),
        entries,
    ));
    table.insert(key, c.clone());
    Ok(c)
}

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

    /// What the configured embedder's vectors are cached under: the model
    /// and its files' fingerprint (local), or the server and model (OpenAI).
    pub fn embedder_identity(&self) -> Result<String> {
        Ok(match self.services.embedder {
            EmbedderKind::Local => minilm_identity(&resolve_embedder_dir(&self.models)?)?,
            EmbedderKind::Openai => format!(
                "openai|{}|{}",
                self.openai.base_url.as_deref().unwrap_or(""),
                self.openai.embedding_model.as_deref().unwrap_or("")
            ),
        })
    }

    /// The configured embedder (`[services] embedder`), behind the
    /// process-wide embedding cache unless `[models] embed_cache = false`.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        let inner: Arc<dyn Embedder> = match self.services.embedder {
            EmbedderKind::Local => Arc::new(self.local_embedder()?),
            EmbedderKind::Openai => Arc::new(OpenAiClient::new(&self.openai)?),
        };
        if !self.models.embed_cache {
            return Ok(inner);
        }
        let root = match crate::locate::ModelLocator::new(&self.models).cache_dir() {
            Ok(dir) => Some(dir.join("embeddings")),
            Err(e) => {
                tracing::warn!(error = %e, "no cache directory: embeddings cached in this process only");
                None
            }
        };
        let cached = shared_cached_embedder(
            inner,
            self.embedder_identity()?,
            root,
            self.models.embed_cache_entries,
        )?;
        Ok(cached)
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
