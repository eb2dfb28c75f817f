//! Services that load their model on first use, so that a run whose
//! substrates never embed (M2, M10, the baselines) or never call an LLM does
//! not pay for loading (or fetching) one. The command line, the server and the
//! Python package all build their services here.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};

use crate::config::{Config, LlmKind};
use crate::error::ModelsError;
use submem_core::Services;
use submem_core::{
    ChatRequest, Completion, EmbedCounts, Embedder, Llm, PrefixCaching, ServiceError,
};

type Loader<T> = Box<dyn Fn() -> Result<T, ModelsError> + Send + Sync>;

/// A model called `name` until its loader runs, on first use; a failed load
/// is retried at the next use. [`LazyLlm`] and [`LazyEmbedder`] are the two
/// kinds there are.
pub struct Lazy<T: Loadable> {
    name: String,
    loader: Loader<T>,
    cell: Mutex<Option<T>>,
}

/// What a [`Lazy`] can hold: a shared model service, named for logs.
pub trait Loadable: Clone + Send + Sync + 'static {
    /// The kind of model, as logs name it (`LLM`, `embedder`).
    const KIND: &'static str;
}

impl Loadable for Arc<dyn Llm> {
    const KIND: &'static str = "LLM";
}

impl Loadable for Arc<dyn Embedder> {
    const KIND: &'static str = "embedder";
}

/// An LLM loaded on its first call.
pub type LazyLlm = Lazy<Arc<dyn Llm>>;

/// An embedder loaded on first use.
pub type LazyEmbedder = Lazy<Arc<dyn Embedder>>;

impl<T: Loadable> std::fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy")
            .field("name", &self.name)
            .field("kind", &T::KIND)
            .finish_non_exhaustive()
    }
}

impl<T: Loadable> Lazy<T> {
    /// A model called `name` until loaded by `loader`.
    pub fn new(
        name: impl Into<String>,
        loader: impl Fn() -> Result<T, ModelsError> + Send + Sync + 'static,
    ) -> Self {
        Lazy {
            name: name.into(),
            loader: Box::new(loader),
            cell: Mutex::new(None),
        }
    }

    fn get(&self) -> Result<T, ServiceError> {
        let mut cell = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cell.as_ref() {
            return Ok(m.clone());
        }
        tracing::info!(model = %self.name, kind = T::KIND, "loading model");
        let m = (self.loader)().map_err(|e| ServiceError::Model {
            model: self.name.clone(),
            source: Box::new(e),
        })?;
        *cell = Some(m.clone());
        Ok(m)
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
    /// Loads the model and passes its capability through; `None` if
    /// loading fails (the next `complete` then reports why).
    fn choice_scoring(&self) -> Option<Arc<dyn submem_core::ChoiceScoring>> {
        match self.get() {
            Ok(llm) => llm.choice_scoring(),
            Err(e) => {
                tracing::warn!(error = %e, "LLM unavailable; no choice scoring");
                None
            }
        }
    }
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
    async fn embed_counted(
        &self,
        texts: &[String],
    ) -> Result<(Vec<Vec<f32>>, EmbedCounts), ServiceError> {
        let e = self.get()?;
        e.embed_counted(texts).await
    }
}

impl Config {
    /// An LLM of `kind` loaded on its first call, named for its `role`
    /// (`memory`, `reader`, `judge`); `None` for [`LlmKind::None`]. A
    /// misconfiguration (an OpenAI LLM with no chat model) surfaces at that
    /// first call as a [`ServiceError`].
    pub fn lazy_llm(&self, kind: LlmKind, role: &str) -> Option<Arc<dyn Llm>> {
        let name = match kind {
            LlmKind::None => return None,
            LlmKind::Local => format!("local SmolLM2 ({role})"),
            LlmKind::Openai => format!(
                "openai {} ({role})",
                self.openai
                    .chat_model
                    .clone()
                    .unwrap_or_else(|| "<no model set>".into())
            ),
        };
        let cfg = self.clone();
        Some(Arc::new(LazyLlm::new(name, move || {
            cfg.llm(kind)?
                .ok_or_else(|| ModelsError::Config("no LLM configured".into()))
        })))
    }

    /// The OpenAI-compatible server `[servers.NAME]` as an LLM loaded on its
    /// first call, named `NAME: openai MODEL (ROLE)`; an error now when the
    /// configuration has no such server or it names no chat model.
    pub fn lazy_server_llm(&self, server: &str, role: &str) -> crate::Result<Arc<dyn Llm>> {
        let cfg = self.server(server)?.clone();
        let name = format!(
            "{server}: openai {} ({role})",
            cfg.chat_model.as_deref().unwrap_or_default()
        );
        Ok(Arc::new(LazyLlm::new(name, move || {
            Ok(Arc::new(crate::OpenAiClient::new(&cfg)?) as Arc<dyn Llm>)
        })))
    }

    /// The configured embedder, loaded on first use.
    pub fn lazy_embedder(&self) -> Arc<dyn Embedder> {
        let cfg = self.clone();
        Arc::new(LazyEmbedder::new(
            format!("{:?} embedder", self.services.embedder).to_lowercase(),
            move || cfg.embedder(),
        ))
    }

    /// The services substrates are built with (memory LLM per `[services]`),
    /// each model loaded on first use; only the token counter is built now.
    pub fn lazy_services(&self) -> crate::Result<Services> {
        Ok(Services {
            llm: self.lazy_llm(self.services.memory_llm, "memory"),
            embedder: self.lazy_embedder(),
            tokens: self.token_counter()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lazy_service_reports_its_load_error_at_first_use() {
        let cfg = Config::default();
        assert!(cfg.lazy_llm(LlmKind::None, "memory").is_none());
        // OpenAI with no chat model: building is fine, the first call says why.
        let llm = cfg.lazy_llm(LlmKind::Openai, "reader").expect("an LLM");
        assert_eq!(llm.name(), "openai <no model set> (reader)");
        let err = llm
            .complete(&ChatRequest::new(vec![submem_core::ChatMessage::user(
                "hi",
            )]))
            .await
            .expect_err("no chat model is configured");
        assert!(err.to_string().contains("chat model"), "{err}");
    }
}
