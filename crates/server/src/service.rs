//! The server's operations, one function each, called by the HTTP handlers
//! ([`crate::api`]) and the MCP tools ([`crate::mcp`]) alike: scope checks,
//! limits, and the request and response shapes live here once.
//!
//! Every operation on a namespace checks the caller's scope first (outside
//! it a namespace is `404`, whether or not it exists), then sizes and
//! budgets against [`crate::config::Limits`], and only then opens the
//! namespace ([`crate::store::Store::acquire`]). An operation on a namespace
//! another node owns fails with [`ServerError::Elsewhere`], which the HTTP
//! layer forwards ([`crate::forward`]) and the MCP tools send on as the
//! equivalent `/v1` call.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Instant;

use submem_core::query::{MAX_BUDGET, MIN_BUDGET};
use submem_core::{
    explain_evidences, Event, EvidenceReport, ManageReport, Query, ReadTrace, Recall, SourceHit,
    WriteReport,
};

use crate::auth::{Caller, KeyTable};
use crate::compare_cache::CompareCache;
use crate::forward::Forwarder;
use crate::metrics::Metrics;
use crate::namespace::{NamespaceHandle, NamespaceMeta, Submitted};
use crate::store::Store;
use crate::store::{spec_from_json, Access, Using};
use crate::{Result, ServerError};

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The namespaces.
    pub store: Store,
    /// The configured keys.
    pub keys: KeyTable,
    /// Request counters.
    pub metrics: Metrics,
    /// When the server started.
    pub started: std::time::Instant,
    /// How this node reaches the others (PostgreSQL store with several
    /// nodes); `None` for the file store.
    pub forwarder: Option<Forwarder>,
    /// Substrates built for side-by-side comparisons ([`crate::compare`]),
    /// shared with the build jobs that fill it.
    pub compare: std::sync::Arc<CompareCache>,
}

/// Largest `k` a read may ask for.
pub const MAX_K: usize = 1000;

/// A namespace as the API shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// The name.
    pub name: String,
    /// The substrate spec.
    pub substrate: String,
    /// Whether writes run as background jobs.
    pub background: bool,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
    /// When its log last changed (a write, a forget), Unix seconds, as the
    /// store tells without opening it; absent before any write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_write_unix: Option<u64>,
    /// Whether the namespace is open on the node that answered. The fields
    /// below are its live counters, present only then (listing and metadata
    /// never open a namespace).
    pub resident: bool,
    /// Events stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<usize>,
    /// Size of the event log (bytes for the file store, records for
    /// PostgreSQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
    /// Log offset applied to the substrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_offset: Option<u64>,
    /// Log offset the newest snapshot covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_offset: Option<u64>,
}

/// `POST /v1/namespaces/{ns}/read`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// A question (conversational regime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The task (agentic regime, with `observation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The newest observation (agentic regime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
    /// Token budget of the whole reader context.
    pub budget: usize,
    /// Items to retrieve (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// Tokens of the reader's fixed prompt around the memory block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_prompt_tokens: Option<usize>,
    /// Source ids to trace (how they ranked and why they were or were not shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<String>>,
}

/// What a read returns.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReadResponse {
    /// The rendered memory block.
    pub text: String,
    /// Its tokens (never above the allowance).
    pub tokens: usize,
    /// The events shown, most relevant first.
    pub sources: Vec<SourceHit>,
    /// The trace, when asked for and the substrate keeps one (the substrates
    /// that rank: M1, M2, the hybrids, FlexA-Mem, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<ReadTrace>,
    /// For each traced source id, in the order asked: how the read showed it
    /// (whole, in part, through a record, not at all), its place among the
    /// sources, its rank and the room it needed, and why, in one sentence
    /// ([`submem_core::evidence`], the vocabulary of `submem bench --trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<EvidenceReport>>,
    /// Time the substrate took, milliseconds.
    pub latency_ms: f64,
}

/// The namespace `name` open here for the caller, or why not: `404` outside
/// the caller's scope or when it does not exist, [`ServerError::Elsewhere`]
/// when another node owns it.
pub async fn open(state: &AppState, caller: &Caller, name: &str) -> Result<Using> {
    if !caller.covers(name) {
        return Err(ServerError::NamespaceNotFound(name.into()));
    }
    match state.store.acquire(name).await? {
        Access::Local(using) => Ok(using),
        Access::Remote(node) => Err(ServerError::Elsewhere {
            namespace: name.into(),
            node,
        }),
    }
}

/// The API view of a namespace, with live counters when it is open here.
pub async fn info_of(
    state: &AppState,
    meta: &NamespaceMeta,
    open: Option<&NamespaceHandle>,
) -> NamespaceInfo {
    let mut info = NamespaceInfo {
        name: meta.name.clone(),
        substrate: meta.substrate.clone(),
        background: state.store.background(meta),
        created_unix: meta.created_unix,
        last_write_unix: meta.last_write_unix,
        resident: false,
        events: None,
        log_bytes: None,
        applied_offset: None,
        snapshot_offset: None,
    };
    if let Some(h) = open {
        let (log, applied, snapshot) = h.offsets();
        info.resident = true;
        info.background = h.background;
        info.events = Some(h.event_count().await);
        info.log_bytes = Some(log);
        info.applied_offset = Some(applied);
        info.snapshot_offset = Some(snapshot);
    }
    info
}

/// A substrate spec from the API's JSON: `"m2"`, `"flexa:rho=0.2"` or
/// `{"name": "flexa", "settings": {"rho": 0.2}}`.
pub fn spec_of(substrate: &Value) -> Result<submem::registry::SubstrateSpec> {
    Ok(match substrate {
        Value::String(s) => spec_from_json(s, None)?,
        Value::Object(m) => {
            let name = m.get("name").and_then(Value::as_str).ok_or_else(|| {
                ServerError::BadSubstrate("substrate object needs a string `name`".into())
            })?;
            if let Some(k) = m.keys().find(|k| *k != "name" && *k != "settings") {
                return Err(ServerError::BadSubstrate(format!(
                    "unknown field {k:?} in substrate (expected name, settings)"
                )));
            }
            spec_from_json(name, m.get("settings"))?
        }
        other => {
            return Err(ServerError::BadSubstrate(format!(
                "substrate must be a string such as \"m2\" or an object {{name, settings}}, got {other}"
            )))
        }
    })
}

/// Creates a namespace; `substrate` is `"m2"`, `"flexa:rho=0.2"` or
/// `{"name": "flexa", "settings": {"rho": 0.2}}`.
pub async fn create(
    state: &AppState,
    caller: &Caller,
    name: &str,
    substrate: &Value,
) -> Result<NamespaceInfo> {
    if !caller.covers(name) {
        return Err(ServerError::Forbidden(format!(
            "this key may only create namespaces starting with {}",
            caller
                .prefixes
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    }
    let spec = spec_of(substrate)?;
    let meta = state.store.create(name, spec).await?;
    let mut info = info_of(state, &meta, None).await;
    // A new namespace is empty; say so without opening it.
    info.events = Some(0);
    Ok(info)
}

/// The caller's namespaces, none opened.
pub async fn list(state: &AppState, caller: &Caller) -> Result<Vec<NamespaceInfo>> {
    let mut out = Vec::new();
    for meta in state.store.list().await? {
        if caller.covers(&meta.name) {
            let open = state.store.resident(&meta.name);
            out.push(info_of(state, &meta, open.as_deref()).await);
        }
    }
    Ok(out)
}

/// One namespace's metadata, without opening it.
pub async fn info(state: &AppState, caller: &Caller, name: &str) -> Result<NamespaceInfo> {
    if !caller.covers(name) {
        return Err(ServerError::NamespaceNotFound(name.into()));
    }
    let meta = state
        .store
        .meta(name)
        .await?
        .ok_or_else(|| ServerError::NamespaceNotFound(name.into()))?;
    let open = state.store.resident(name);
    Ok(info_of(state, &meta, open.as_deref()).await)
}

/// Deletes a namespace (on the node that owns it).
pub async fn delete(state: &AppState, caller: &Caller, name: &str) -> Result<()> {
    let using = open(state, caller, name).await?;
    if !state.store.delete(name, using).await? {
        return Err(ServerError::NamespaceNotFound(name.into()));
    }
    Ok(())
}

/// Checks a batch against the limits.
pub fn check_events(state: &AppState, events: &[Event]) -> Result<()> {
    let limits = &state.store.config.limits;
    if events.is_empty() {
        return Err(ServerError::BadRequest("`events` is empty".into()));
    }
    if events.len() > limits.max_batch {
        return Err(ServerError::TooLarge(format!(
            "batch of {} events; at most {} per request",
            events.len(),
            limits.max_batch
        )));
    }
    for e in events {
        let len = e.content().len();
        if len > limits.max_text_bytes {
            return Err(ServerError::TooLarge(format!(
                "event {:?} has {len} bytes of text; at most {}",
                e.source_id(),
                limits.max_text_bytes
            )));
        }
        if e.source_id().len() > 256 {
            return Err(ServerError::BadRequest(format!(
                "source id of {} bytes; at most 256",
                e.source_id().len()
            )));
        }
    }
    Ok(())
}

/// Writes a batch: the substrate's report, or a job id for a substrate
/// that calls an LLM.
pub async fn write(
    state: &AppState,
    caller: &Caller,
    name: &str,
    events: Vec<Event>,
) -> Result<Submitted<WriteReport>> {
    check_events(state, &events)?;
    let h = open(state, caller, name).await?;
    h.write(events, &state.store.jobs).await
}

/// Checks a read request's texts, budget and `k` (before any namespace is
/// opened).
pub fn check_read(state: &AppState, req: &ReadRequest) -> Result<()> {
    let max = state.store.config.limits.max_text_bytes;
    for t in [&req.question, &req.task, &req.observation]
        .into_iter()
        .flatten()
    {
        if t.len() > max {
            return Err(ServerError::TooLarge(format!(
                "query text of {} bytes; at most {max}",
                t.len()
            )));
        }
    }
    if !(MIN_BUDGET..=MAX_BUDGET).contains(&req.budget) {
        return Err(ServerError::BadRequest(format!(
            "budget must be in {MIN_BUDGET}..={MAX_BUDGET} tokens, got {}",
            req.budget
        )));
    }
    let k = req.k.unwrap_or(10);
    if !(1..=MAX_K).contains(&k) {
        return Err(ServerError::BadRequest(format!(
            "k must be in 1..={MAX_K}, got {k}"
        )));
    }
    if req.trace.as_ref().is_some_and(|t| t.len() > MAX_K) {
        return Err(ServerError::TooLarge(format!(
            "at most {MAX_K} source ids to trace"
        )));
    }
    Ok(())
}

/// The query of a checked read request.
pub fn query_of(h: &NamespaceHandle, req: &ReadRequest) -> Result<Query> {
    let q = match (&req.question, &req.task, &req.observation) {
        (Some(q), None, None) => Query::question(h.ns.clone(), q.clone(), req.budget),
        (None, Some(t), o) => Query::agentic(
            h.ns.clone(),
            t.clone(),
            o.clone().unwrap_or_default(),
            req.budget,
        ),
        (None, None, Some(o)) => Query::agentic(h.ns.clone(), String::new(), o.clone(), req.budget),
        (None, None, None) => {
            return Err(ServerError::BadRequest(
                "give `question`, or `task` and/or `observation`".into(),
            ))
        }
        _ => {
            return Err(ServerError::BadRequest(
                "`question` cannot be combined with `task` or `observation`".into(),
            ))
        }
    };
    let fixed = req.fixed_prompt_tokens.unwrap_or(0);
    if fixed >= q.filled_budget() {
        return Err(ServerError::BadRequest(format!(
            "fixed_prompt_tokens {fixed} leaves no room in a budget of {}",
            req.budget
        )));
    }
    Ok(q.with_top_k(req.k.unwrap_or(10))
        .with_fixed_prompt_tokens(fixed))
}

/// Renders memory for a query under its budget.
pub async fn read(
    state: &AppState,
    caller: &Caller,
    name: &str,
    req: &ReadRequest,
) -> Result<ReadResponse> {
    check_read(state, req)?;
    let h = open(state, caller, name).await?;
    let query = query_of(&h, req)?;
    let ids = req.trace.as_deref().unwrap_or_default();
    let start = Instant::now();
    // An explained read ranks once where the substrate allows (its latency
    // then includes the little the trace adds).
    let (recall, trace) = if ids.is_empty() {
        (h.read(&query).await?, None)
    } else {
        h.read_traced(&query, ids).await?
    };
    let latency_ms = start.elapsed().as_secs_f64() * 1e3;
    let evidence = if ids.is_empty() {
        None
    } else {
        let texts = texts_of(&h.live_events().await?, ids);
        Some(explain_all(ids, &texts, &recall, trace.as_ref()))
    };
    Ok(ReadResponse {
        text: recall.text,
        tokens: recall.tokens,
        sources: recall.sources,
        trace,
        evidence,
        latency_ms,
    })
}

/// The text each of `ids` was written with, for those `events` holds: a
/// turn's words (without its speaker, as the gold evidence of a dataset is
/// matched), a step's action and observation.
pub(crate) fn texts_of(
    events: &[Event],
    ids: &[String],
) -> std::collections::HashMap<String, String> {
    let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    events
        .iter()
        .filter(|e| wanted.contains(e.source_id()))
        .map(|e| {
            let text = match e {
                Event::Turn(t) => t.text.clone(),
                Event::Step(_) => e.content(),
            };
            (e.source_id().to_string(), text)
        })
        .collect()
}

/// [`explain_evidences`] for each of `ids`, with their texts from `texts`.
pub(crate) fn explain_all(
    ids: &[String],
    texts: &std::collections::HashMap<String, String>,
    recall: &Recall,
    trace: Option<&ReadTrace>,
) -> Vec<EvidenceReport> {
    explain_evidences(
        ids.iter()
            .map(|id| (id.as_str(), texts.get(id).map(String::as_str))),
        recall,
        trace,
    )
}

/// Most events one `GET /v1/namespaces/{ns}/events` answers.
pub const MAX_EVENTS_PAGE: usize = 1000;

/// Whether source id `id` answers the search `needle` (both lower case): the
/// id itself, or ids under it at a `:` boundary (`d1` and `d1:` find `d1:2`,
/// `d1:2` does not find `d1:20`).
fn source_id_matches(id: &str, needle: &str) -> bool {
    match id.strip_prefix(needle) {
        Some(rest) => rest.is_empty() || needle.ends_with(':') || rest.starts_with(':'),
        None => false,
    }
}

/// The live logged events of a namespace whose source id is `q` (or lies
/// under it, see [`source_id_matches`]) or whose content contains `q`
/// (case-insensitive; all when empty), oldest first: the total matching
/// and the page `offset..offset + limit`.
pub async fn events(
    state: &AppState,
    caller: &Caller,
    name: &str,
    q: &str,
    offset: usize,
    limit: usize,
) -> Result<(usize, Vec<Event>)> {
    if limit == 0 || limit > MAX_EVENTS_PAGE {
        return Err(ServerError::BadRequest(format!(
            "limit must be 1..={MAX_EVENTS_PAGE}, got {limit}"
        )));
    }
    let h = open(state, caller, name).await?;
    let needle = q.to_lowercase();
    let matching: Vec<Event> = h
        .live_events()
        .await?
        .iter()
        .filter(|e| {
            needle.is_empty()
                || source_id_matches(&e.source_id().to_lowercase(), &needle)
                || e.content().to_lowercase().contains(&needle)
        })
        .cloned()
        .collect();
    let total = matching.len();
    let page = matching.into_iter().skip(offset).take(limit).collect();
    Ok((total, page))
}

/// Forgets events by source id; how many were stored.
pub async fn forget(
    state: &AppState,
    caller: &Caller,
    name: &str,
    source_ids: Vec<String>,
) -> Result<usize> {
    let max = state.store.config.limits.max_forget;
    if source_ids.len() > max {
        return Err(ServerError::TooLarge(format!(
            "{} source ids; at most {max} per request",
            source_ids.len()
        )));
    }
    let h = open(state, caller, name).await?;
    h.forget(source_ids).await
}

/// Runs a manage pass.
pub async fn manage(
    state: &AppState,
    caller: &Caller,
    name: &str,
) -> Result<Submitted<ManageReport>> {
    let h = open(state, caller, name).await?;
    h.manage(&state.store.jobs).await
}

/// Sizes of a namespace (it is opened).
pub async fn footprint(state: &AppState, caller: &Caller, name: &str) -> Result<Value> {
    let h = open(state, caller, name).await?;
    let f = h.footprint();
    let (log_bytes, _, _) = h.offsets();
    Ok(serde_json::json!({
        "events": h.event_count().await,
        "log_bytes": log_bytes,
        "memory_bytes": f.memory_bytes,
        "disk_bytes": f.disk_bytes,
        "stored_tokens": f.stored_tokens,
        "input_tokens": f.input_tokens,
    }))
}

/// Per-phase calls, tokens and latency of a namespace (it is opened).
pub async fn meter(state: &AppState, caller: &Caller, name: &str) -> Result<Value> {
    let h = open(state, caller, name).await?;
    let m = h.meter();
    Ok(serde_json::json!({
        "write": m.write, "read": m.read, "manage": m.manage,
        "total_calls": m.total_calls(), "total_tokens": m.total_tokens(),
    }))
}

/// A background job, if the caller may see its namespace.
pub fn job(state: &AppState, caller: &Caller, id: &str) -> Result<crate::jobs::Job> {
    match state.store.jobs.get(id) {
        Some(j) if caller.covers(&j.namespace) => Ok(j),
        _ => Err(ServerError::JobNotFound(id.into())),
    }
}

/// Cancels the comparison build `id`, if the caller may see its namespace.
pub fn cancel_job(state: &AppState, caller: &Caller, id: &str) -> Result<crate::jobs::Job> {
    use crate::jobs::CancelRefused;
    job(state, caller, id)?;
    state.store.jobs.cancel(id).map_err(|why| match why {
        CancelRefused::Unknown => ServerError::JobNotFound(id.into()),
        CancelRefused::NotABuild(kind) => ServerError::BadRequest(format!(
            "{id} is a {kind} job: only comparison builds can be cancelled (a write is applied \
             whole or not at all)"
        )),
        CancelRefused::Finished(state) => {
            ServerError::BadRequest(format!("{id} has already finished ({state:?})"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::source_id_matches;

    #[test]
    fn a_source_id_search_stops_at_a_boundary() {
        for (id, needle, want) in [
            ("d1:2", "d1:2", true),
            ("d1:20", "d1:2", false),
            ("d1:2", "d1", true),
            ("d1:2", "d1:", true),
            ("d10:2", "d1", false),
            ("game-s1:3", "game-s1", true),
            ("game-s11:3", "game-s1", false),
        ] {
            assert_eq!(source_id_matches(id, needle), want, "{id} for {needle}");
        }
    }
}
