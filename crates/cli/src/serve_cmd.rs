//! `submem serve` (HTTP + MCP over streamable HTTP) and `submem mcp` (MCP
//! over stdio): the server of `submem-server` with the CLI's services.
//!
//! The services are the bench's: the configured embedder and memory LLM,
//! each loaded on first use (a server whose namespaces are all BM25 never
//! loads a model), and the o200k token counter. `--config FILE` is one TOML
//! file: its `[server]` table (keys, limits, snapshot interval) goes to the
//! server, the rest is the models' configuration.

use clap::Args;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use submem::registry::Registry;
use submem_models::Config;
use submem_server::config::{hash_key, split_config, ServerConfig};
use submem_server::Server;

use crate::AnyError;

/// `submem serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Directory of the namespaces' event logs and snapshots (created if
    /// missing); with a PostgreSQL store, this node's scratch space.
    #[arg(long, value_name = "DIR", required_unless_present = "hash_key")]
    pub data_dir: Option<PathBuf>,
    /// Where namespaces are stored: `file` (under --data-dir, the default)
    /// or a `postgres://user@host/db` URL shared by several nodes
    /// (overrides `[server] store`).
    #[arg(long, value_name = "file|postgres://…", env = "SUBMEM_STORE")]
    pub store: Option<String>,
    /// This node's URL as the other nodes reach it (PostgreSQL store): they
    /// forward requests for the namespaces this node owns there
    /// (overrides `[server] advertise`).
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// Bench output the inspector at /ui can open: a `submem bench --out`
    /// directory or a directory of them (overrides `[server] reports_dir`).
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// Print the SHA-256 of an API key for `[[server.keys]]` and exit.
    #[arg(long, value_name = "KEY")]
    pub hash_key: Option<String>,
}

/// `submem mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Directory of the namespaces' event logs and snapshots (created if missing).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
}

/// The server's and the models' configuration from one file.
pub fn load_config(path: Option<&Path>) -> Result<(ServerConfig, Config), AnyError> {
    let Some(path) = path else {
        return Ok((ServerConfig::new(), Config::load(None)?));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (server, rest) = split_config(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut models =
        Config::from_toml_str(&rest).map_err(|e| format!("{}: {e}", path.display()))?;
    models.apply_env_from(|k| std::env::var(k).ok())?;
    Ok((server, models))
}

async fn open(
    data_dir: &Path,
    server_config: ServerConfig,
    models: &Config,
    registry: Arc<Registry>,
) -> Result<Server, AnyError> {
    let services = models.lazy_services()?;
    Ok(Server::open(data_dir, registry, services, server_config).await?)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutting down: snapshotting every namespace");
}

/// Runs `submem serve`.
pub async fn serve(
    args: ServeArgs,
    config: Option<&Path>,
    registry: Arc<Registry>,
) -> Result<ExitCode, AnyError> {
    if let Some(key) = &args.hash_key {
        println!("{}", hash_key(key));
        return Ok(ExitCode::SUCCESS);
    }
    let data_dir = args
        .data_dir
        .as_deref()
        .ok_or("--data-dir DIR is required")?;
    let (mut server_config, models) = load_config(config)?;
    if let Some(store) = args.store {
        server_config.store = store;
    }
    if let Some(url) = args.advertise {
        server_config.advertise = Some(url);
    }
    if let Some(dir) = args.reports {
        server_config.reports_dir = Some(dir);
    }
    server_config.validate()?;
    // Before anything is opened: no keys, no public address.
    submem_server::check_bind(args.addr, !server_config.keys.is_empty())?;
    let server = open(data_dir, server_config, &models, registry).await?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let addr = listener.local_addr()?;
    // Scripts wait for this line (and may read the port from it).
    println!("submem: serving http://{addr} (MCP at http://{addr}/mcp)");
    server.serve_listener(listener, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `submem mcp` (MCP over stdin/stdout; logs go to stderr).
pub async fn mcp(
    args: McpArgs,
    config: Option<&Path>,
    registry: Arc<Registry>,
) -> Result<ExitCode, AnyError> {
    let (server_config, models) = load_config(config)?;
    let server = open(&args.data_dir, server_config, &models, registry).await?;
    server.serve_mcp_stdio().await?;
    Ok(ExitCode::SUCCESS)
}
