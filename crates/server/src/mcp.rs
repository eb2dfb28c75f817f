//! MCP tools over the official Rust SDK (`rmcp`): `remember`, `recall`,
//! `forget` and `list_namespaces`, served over stdio (`submem mcp`) and over
//! streamable HTTP at `/mcp` on the HTTP server.
//!
//! Over HTTP the bearer key is checked by the same layer as `/v1` and the
//! tools see only the key's namespaces; over stdio the client is the local
//! user who started the process, with the whole data directory. Tool errors
//! (unknown namespace, bad budget, duplicate source ids) are tool results
//! with `isError: true` and the API's error JSON as text, so a model can read
//! and correct them; they never end the session.
//!
//! The tools call the operations of [`crate::service`]; when another node
//! owns the namespace (PostgreSQL store), the tool sends the equivalent
//! `/v1` call to that node with the caller's key.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use submem_core::{Event, Turn};

use crate::auth::Caller;
use crate::namespace::Submitted;
use crate::service::AppState;
use crate::service::{self, ReadRequest};
use crate::{Result, ServerError};

/// `remember`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RememberArgs {
    /// The namespace (created with `substrate` if it does not exist).
    pub namespace: String,
    /// Plain text to remember, stored as one conversational turn.
    #[serde(default)]
    pub text: Option<String>,
    /// Who said `text` (default `user`).
    #[serde(default)]
    pub speaker: Option<String>,
    /// Events in the core shapes (`{"kind": "turn", "session_id", "speaker", "text", "source_id"}` or
    /// `{"kind": "step", "step", "action", "observation", "source_id"}`), instead of `text`.
    #[serde(default)]
    pub events: Option<Vec<Value>>,
    /// Substrate for a namespace this call creates (default `m2`, BM25).
    #[serde(default)]
    pub substrate: Option<String>,
}

/// `recall`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RecallArgs {
    /// The namespace.
    pub namespace: String,
    /// What to recall memory for.
    pub question: String,
    /// Token budget of the memory block's context (default 2048).
    #[serde(default)]
    pub budget: Option<usize>,
    /// Items to retrieve (default 10).
    #[serde(default)]
    pub k: Option<usize>,
}

/// `forget`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ForgetArgs {
    /// The namespace.
    pub namespace: String,
    /// Source ids of the events to forget.
    pub source_ids: Vec<String>,
}

/// `list_namespaces`'s arguments (none).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListArgs {}

/// The MCP server.
#[derive(Debug, Clone)]
pub struct MemoryTools {
    state: Arc<AppState>,
    /// `true` over stdio: every namespace is the caller's.
    local: bool,
    tool_router: ToolRouter<Self>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn result(r: Result<Value>) -> CallToolResult {
    match r {
        Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.body().to_string())]),
    }
}

impl MemoryTools {
    /// Tools over `state`; `local` for stdio (no key, whole scope).
    pub fn new(state: Arc<AppState>, local: bool) -> Self {
        MemoryTools {
            state,
            local,
            tool_router: Self::tool_router(),
        }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller> {
        if self.local {
            return Ok(Caller::unrestricted());
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>().cloned())
            .ok_or_else(|| ServerError::Unauthorized("no authenticated caller".into()))
    }

    /// Runs `here`; when another node owns the namespace, sends `path` with
    /// `body` there instead (with the caller's key) and returns its JSON.
    async fn routed(
        &self,
        ctx: &RequestContext<RoleServer>,
        here: Result<Value>,
        path: String,
        body: Option<Value>,
    ) -> Result<Value> {
        let (node, forwarder) = match (&here, &self.state.forwarder) {
            (Err(ServerError::Elsewhere { node, .. }), Some(f)) => (node.clone(), f),
            _ => return here,
        };
        let authorization = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get(http::header::AUTHORIZATION));
        forwarder
            .json(
                &node,
                http::Method::POST,
                &path,
                authorization,
                body.as_ref(),
            )
            .await
    }

    async fn remember_inner(
        &self,
        ctx: &RequestContext<RoleServer>,
        a: RememberArgs,
    ) -> Result<Value> {
        let caller = &self.caller(ctx)?;
        let events: Vec<Event> = match (a.text, a.events) {
            (Some(text), None) => {
                let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros())
                    .unwrap_or(0);
                vec![Event::Turn(Turn {
                    session_id: "mcp".into(),
                    session_date: None,
                    speaker: a.speaker.unwrap_or_else(|| "user".into()),
                    text,
                    source_id: format!("mcp-{stamp}-{n}"),
                })]
            }
            (None, Some(values)) => values
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    serde_json::from_value(v)
                        .map_err(|e| ServerError::BadJson(format!("at `events[{i}]`: {e}")))
                })
                .collect::<Result<_>>()?,
            _ => {
                return Err(ServerError::BadRequest(
                    "give exactly one of `text` and `events`".into(),
                ))
            }
        };
        service::check_events(&self.state, &events)?;
        if caller.covers(&a.namespace) && self.state.store.meta(&a.namespace).await?.is_none() {
            let substrate = Value::String(a.substrate.unwrap_or_else(|| "m2".into()));
            match service::create(&self.state, caller, &a.namespace, &substrate).await {
                // Created by a concurrent call.
                Ok(_) | Err(ServerError::NamespaceExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let ids: Vec<String> = events.iter().map(|e| e.source_id().to_string()).collect();
        let body = json!({ "events": events });
        let here = service::write(&self.state, caller, &a.namespace, events)
            .await
            .map(|s| match s {
                Submitted::Done(r) => json!({"events": r.events, "units": r.units}),
                Submitted::Job(job) => json!({"job": job}),
            });
        let path = format!("/v1/namespaces/{}/events", encode(&a.namespace));
        let answer = self.routed(ctx, here, path, Some(body)).await?;
        Ok(match answer.get("job") {
            Some(job) => json!({"job": job, "source_ids": ids}),
            None => json!({"stored": answer["events"], "source_ids": ids}),
        })
    }

    async fn recall_inner(&self, ctx: &RequestContext<RoleServer>, a: RecallArgs) -> Result<Value> {
        let caller = &self.caller(ctx)?;
        let req = ReadRequest {
            question: Some(a.question),
            task: None,
            observation: None,
            budget: a.budget.unwrap_or(2048),
            k: a.k,
            fixed_prompt_tokens: None,
            trace: None,
        };
        let here = service::read(&self.state, caller, &a.namespace, &req)
            .await
            .and_then(|r| {
                serde_json::to_value(r).map_err(|e| ServerError::Internal(e.to_string()))
            });
        let path = format!("/v1/namespaces/{}/read", encode(&a.namespace));
        let body = serde_json::to_value(&req).map_err(|e| ServerError::Internal(e.to_string()))?;
        let r = self.routed(ctx, here, path, Some(body)).await?;
        let ids: Vec<Value> = r["sources"]
            .as_array()
            .map(|s| s.iter().map(|h| h["source_id"].clone()).collect())
            .unwrap_or_default();
        Ok(json!({"text": r["text"], "tokens": r["tokens"], "source_ids": ids}))
    }

    async fn forget_inner(&self, ctx: &RequestContext<RoleServer>, a: ForgetArgs) -> Result<Value> {
        let caller = &self.caller(ctx)?;
        let body = json!({ "source_ids": a.source_ids });
        let here = service::forget(&self.state, caller, &a.namespace, a.source_ids)
            .await
            .map(|n| json!({ "forgotten": n }));
        let path = format!("/v1/namespaces/{}/forget", encode(&a.namespace));
        self.routed(ctx, here, path, Some(body)).await
    }
}

/// A namespace name as one URL path segment.
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[tool_router(router = tool_router)]
impl MemoryTools {
    /// Stores text or events in a namespace (durably, before it answers).
    #[tool(
        description = "Remember text (one turn) or a batch of events in a namespace; creates the namespace (substrate m2 unless given) if needed. Returns the source ids stored."
    )]
    pub async fn remember(
        &self,
        Parameters(args): Parameters<RememberArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        result(self.remember_inner(&ctx, args).await)
    }

    /// Recalls memory for a question under a token budget.
    #[tool(
        description = "Recall what a namespace remembers about a question, as a text block within a token budget, with the source ids shown."
    )]
    pub async fn recall(
        &self,
        Parameters(args): Parameters<RecallArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        result(self.recall_inner(&ctx, args).await)
    }

    /// Forgets events by source id.
    #[tool(
        description = "Forget events of a namespace by source id; they never show again. Returns how many were removed."
    )]
    pub async fn forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        result(self.forget_inner(&ctx, args).await)
    }

    /// Lists the caller's namespaces.
    #[tool(
        description = "List the namespaces this client may use, with their substrate and event count."
    )]
    pub async fn list_namespaces(
        &self,
        Parameters(_args): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let listed = async {
            let caller = self.caller(&ctx)?;
            let out = service::list(&self.state, &caller).await?;
            Ok(json!({ "namespaces": out }))
        };
        result(listed.await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("submem", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Long-term memory: `remember` stores text or events in a namespace, `recall` \
                 returns what is relevant to a question within a token budget, `forget` removes \
                 events by source id, `list_namespaces` shows what exists.",
            )
    }
}
