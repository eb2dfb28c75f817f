//! Services that load their model on first use, so that a run whose
//! substrates never embed (M2, M10, the baselines) or never call an LLM does
//! not pay for loading (or fetching) one.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};

use submem_core::{ChatRequest, Completion, Embedder, Llm, PrefixCaching, ServiceError};
use submem_models::ModelsError;

type Loader<T> = Box<dyn Fn() -> Result<T, ModelsError> + Send + Sync>;

fn load_err(what: &str, e: ModelsError) -> ServiceError {
    ServiceError::Model {
        model: what.to_string(),
        source: Box::new(e),
    }
}

/// An LLM loaded on its first call.
pub struct LazyLlm {
    name: String,
    loader: Loader<Arc<dyn Llm>>,
    cell: Mutex<Option<Arc<dyn Llm>>>,
}

impl std::fmt::Debug for LazyLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyLlm")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LazyLlm {
    /// An LLM called `name` until loaded by `loader`.
    pub fn new(
        name: impl Into<String>,
        loader: impl Fn() -> Result<Arc<dyn Llm>, ModelsError> + Send + Sync + 'static,
    ) -> Self {
        LazyLlm {
            name: name.into(),
            loader: Box::new(loader),
            cell: Mutex::new(None),
        }
    }

    fn get(&self) -> Result<Arc<dyn Llm>, ServiceError> {
        let mut cell = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cell.as_ref() {
            return Ok(l.clone());
        }
        tracing::info!(llm = %self.name, "loading LLM");
        let l = (self.loader)().map_err(|e| load_err(&self.name, e))?;
        *cell = Some(l.clone());
        Ok(l)
    }
}

#[async_trait]
impl Llm for LazyLlm {
    fn name(&self) -> &str {
        &self.name
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        let llm = self.get()?;
        llm.complete(request).await
    }
    /// Loads the model (a caller asking for the capability is about to use
    /// it) and passes its capability through; `None` if loading fails.
    fn prefix_caching(&self) -> Option<Arc<dyn PrefixCaching>> {
        match self.get() {
            Ok(llm) => llm.prefix_caching(),
            Err(e) => {
                tracing::warn!(error = %e, "LLM unavailable; no prefix caching");
                None
            }
        }
    }
}

/// An embedder loaded on first use.
pub struct LazyEmbedder {
    name: String,
    loader: Loader<Arc<dyn Embedder>>,
    cell: Mutex<Option<Arc<dyn Embedder>>>,
}

impl std::fmt::Debug for LazyEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyEmbedder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LazyEmbedder {
    /// An embedder called `name` until loaded by `loader`.
    pub fn new(
        name: impl Into<String>,
        loader: impl Fn() -> Result<Arc<dyn Embedder>, ModelsError> + Send + Sync + 'static,
    ) -> Self {
        LazyEmbedder {
            name: name.into(),
            loader: Box::new(loader),
            cell: Mutex::new(None),
        }
    }

    fn get(&self) -> Result<Arc<dyn Embedder>, ServiceError> {
        let mut cell = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cell.as_ref() {
            return Ok(l.clone());
        }
        tracing::info!(embedder = %self.name, "loading embedder");
        let l = (self.loader)().map_err(|e| load_err(&self.name, e))?;
        *cell = Some(l.clone());
        Ok(l)
    }
}

#[async_trait]
impl Embedder for LazyEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    /// Loads the model to learn its dimension; 0 (with an error logged) when
    /// it cannot be loaded — the next `embed` then reports the error.
    fn dimension(&self) -> usize {
        match self.get() {
            Ok(e) => e.dimension(),
            Err(err) => {
                tracing::error!(embedder = %self.name, error = %err, "cannot load the embedder");
                0
            }
        }
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError> {
        let e = self.get()?;
        e.embed(texts).await
    }
}
