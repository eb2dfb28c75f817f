//! `submem serve`: memory substrates as a service, over a versioned HTTP API
//! (`/v1`, described at `/v1/openapi.json`) and MCP (streamable HTTP at
//! `/mcp`, stdio with `submem mcp`).
//!
//! One process serves many namespaces; each is bound to a substrate chosen
//! by name and settings from the registry (`m2`, `m1-fill:k=10`, `flexa`,
//! `router:...`) and built with the services the caller injects (the CLI
//! passes the embedded models, loaded on first use, or the OpenAI-compatible
//! ones of its configuration).
//!
//! - **Durability** ([`log`], [`snapshot`], [`namespace`], [`storage`]):
//!   every write and forget is appended to the namespace's event log and made
//!   durable (fsynced, or committed) before it is acknowledged; the substrate
//!   is snapshotted now and then; a cold open restores the newest whole
//!   snapshot and replays the log after it.
//! - **Scale** ([`store`], [`storage::postgres`], [`forward`]): namespaces open
//!   on first use and close when idle or over the memory cap, so memory
//!   follows use and a start opens nothing. With `store = "postgres://…"`
//!   any number of nodes share one database; each namespace has one owner
//!   node at a time (an advisory lock) and the others forward its requests.
//! - **Tenancy** ([`auth`]): bearer keys, stored as SHA-256 hashes, scoped to
//!   namespace prefixes; outside its scope a namespace is `404` for a key.
//!   Without keys the server binds only to loopback addresses.
//! - **Limits**: body size, batch size, text size and budgets are checked
//!   before any work, with JSON errors ([`error`]); substrates that call an
//!   LLM write in background jobs ([`jobs`]).
//! - **Inspector** ([`ui`]): a web page at `/ui`, embedded in the binary,
//!   that lists namespaces, writes and forgets, and renders a namespace
//!   under a budget through the same `/v1` API and keys.
//!
//! ```no_run
//! # async fn run(services: submem_core::Services) -> Result<(), submem_server::ServerError> {
//! use std::sync::Arc;
//! use submem::registry::Registry;
//! use submem_server::{config::ServerConfig, Server};
//! let server = Server::open("data".as_ref(), Arc::new(Registry::default()), services, ServerConfig::new()).await?;
//! server.serve("127.0.0.1:8080".parse().unwrap(), std::future::pending()).await
//! # }
//! ```
#![warn(missing_docs)]

pub mod api;
pub mod app;
pub mod auth;
pub mod compare;
mod compare_cache;
pub mod config;
pub mod error;
pub mod extract;
pub mod forward;
pub mod jobs;
pub mod log;
pub mod mcp;
pub mod metrics;
pub mod namespace;
pub mod openapi;
pub mod reports;
pub mod service;
pub mod snapshot;
pub mod storage;
pub mod store;
pub mod ui;

pub use error::{Result, ServerError};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use submem::registry::Registry;
use submem_core::Services;

use crate::auth::KeyTable;
use crate::config::ServerConfig;
use crate::forward::Forwarder;
use crate::mcp::MemoryTools;
use crate::metrics::Metrics;
use crate::service::AppState;
use crate::storage::{file::FileBackend, postgres::PgBackend, Backend};
use crate::store::Store;

/// A server over one data directory.
#[derive(Debug, Clone)]
pub struct Server {
    state: Arc<AppState>,
}

impl Server {
    /// Opens the store of `config` (`file`: namespaces under `data_dir`,
    /// created if missing; a `postgres://` URL: the shared database, with
    /// `data_dir` as node-local scratch space). Nothing is opened until it is
    /// used, so this returns at once whatever the number of namespaces.
    pub async fn open(
        data_dir: &Path,
        registry: Arc<Registry>,
        services: Services,
        config: ServerConfig,
    ) -> Result<Self> {
        config.validate()?;
        let keys = KeyTable::new(&config);
        let timeout = Duration::from_secs(config.request_timeout_s);
        let (backend, forwarder): (Arc<dyn Backend>, Option<Forwarder>) = if config.store == "file"
        {
            (Arc::new(FileBackend::open(data_dir)?), None)
        } else {
            std::fs::create_dir_all(data_dir).map_err(|e| ServerError::io(data_dir, e))?;
            let node = config.advertise.as_deref();
            let backend = PgBackend::connect(
                &config.store,
                node,
                config.owner_sessions,
                &data_dir.join("pg-scratch"),
            )
            .await?;
            let forwarder = Forwarder::new(node.unwrap_or(""), timeout)?;
            (Arc::new(backend), Some(forwarder))
        };
        let store = Store::new(
            backend,
            data_dir.join("policies"),
            registry,
            services,
            config,
        );
        let state = Arc::new(AppState {
            store,
            keys,
            metrics: Metrics::default(),
            started: Instant::now(),
            forwarder,
            compare: Default::default(),
        });
        tokio::spawn(close_idle_namespaces(Arc::downgrade(&state)));
        Ok(Server { state })
    }

    /// The shared state (for in-process use and tests).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The HTTP application with `/mcp` nested in.
    pub fn router(&self, addr: SocketAddr) -> axum::Router {
        let state = self.state.clone();
        let mut mcp_config = StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(self.state.store.config.limits.max_body_bytes);
        if !addr.ip().is_loopback() {
            // Authenticated by bearer key; the Host check guards only
            // unauthenticated loopback servers against DNS rebinding.
            mcp_config = mcp_config.disable_allowed_hosts();
        }
        let tools_state = state.clone();
        let mcp: StreamableHttpService<MemoryTools, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(MemoryTools::new(tools_state.clone(), false)),
                Default::default(),
                mcp_config,
            );
        let mcp = axum::Router::new()
            .nest_service("/mcp", mcp)
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                app::authenticate,
            ))
            .layer(axum::middleware::from_fn(app::mcp_delete_ok));
        app::router(state).merge(mcp)
    }

    /// Serves HTTP on `addr` until `shutdown` completes, then closes every
    /// open namespace (each is snapshotted). Without API keys only a loopback address is accepted.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        check_bind(addr, self.state.keys.enabled())?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServerError::Config(format!("cannot bind {addr}: {e}")))?;
        self.serve_listener(listener, shutdown).await
    }

    /// Serves on a bound listener (its address is checked like [`Server::serve`]'s).
    pub async fn serve_listener(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let addr = listener
            .local_addr()
            .map_err(|e| ServerError::Config(format!("listener has no address: {e}")))?;
        check_bind(addr, self.state.keys.enabled())?;
        tracing::info!(%addr, keys = self.state.keys.enabled(), "serving");
        axum::serve(listener, self.router(addr))
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| ServerError::Config(format!("server failed: {e}")))?;
        self.state.store.close_all().await;
        Ok(())
    }

    /// Serves MCP over stdin/stdout until the client closes it, then
    /// closes every open namespace.
    pub async fn serve_mcp_stdio(self) -> Result<()> {
        let tools = MemoryTools::new(self.state.clone(), true);
        let running = tools
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServerError::Config(format!("MCP initialisation failed: {e}")))?;
        if let Err(e) = running.waiting().await {
            tracing::warn!(error = %e, "MCP session ended with an error");
        }
        self.state.store.close_all().await;
        Ok(())
    }
}

/// Closes namespaces over the memory cap every second (open namespaces grow
/// with their writes, not only by opening) and idle ones every
/// `idle_close_s / 4` (1–30 s), until the server is dropped.
async fn close_idle_namespaces(state: Weak<AppState>) {
    let idle_every = match state.upgrade() {
        Some(s) => (s.store.config.idle_close_s / 4).clamp(1, 30),
        None => return,
    };
    for tick in 1u64.. {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        if tick % idle_every == 0 {
            state.store.close_idle().await;
        }
        state.store.enforce_cap().await;
    }
}
/// Refuses a non-loopback address when no API key is configured.
pub fn check_bind(addr: SocketAddr, keys: bool) -> Result<()> {
    if !keys && !addr.ip().is_loopback() {
        return Err(ServerError::Config(format!(
            "refusing to serve {addr} without API keys: anyone who can reach it could read every \
             namespace. Bind to 127.0.0.1 or configure [[server.keys]]"
        )));
    }
    Ok(())
}
