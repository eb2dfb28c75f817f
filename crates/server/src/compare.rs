//! Side by side (`POST /v1/namespaces/{ns}/compare`): one namespace's live
//! history rendered by up to [`MAX_SUBSTRATES`] substrates for the same
//! question and budget, for the web inspector ([`crate::ui`]).
//!
//! Each substrate is built from the registry with the server's services,
//! given the namespace's logged events (written, not forgotten), and read.
//! Built instances are kept per (namespace, spec, log end) in a small
//! bounded cache ([`CompareCache`], held in the server's state), so asking
//! again at another budget does not rebuild them; any write or forget moves
//! the log's end and so invalidates them.

use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Instant;

use crate::auth::Caller;
pub use crate::compare_cache::{CompareCache, CACHE_ENTRIES};
use crate::service::{self, AppState, ReadRequest};
use crate::{Result, ServerError};
use submem_core::Substrate;

/// Most substrates one comparison renders.
pub const MAX_SUBSTRATES: usize = 4;

/// `POST /v1/namespaces/{ns}/compare`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareRequest {
    /// Substrates as in `POST /v1/namespaces` (`"m2"`, `"m1-fill:k=10"`,
    /// `{"name", "settings"}`), 1 to [`MAX_SUBSTRATES`].
    pub substrates: Vec<Value>,
    /// The question.
    pub question: String,
    /// The token budget.
    pub budget: usize,
    /// Source ids to look for in each recall (the gold evidence).
    #[serde(default)]
    pub gold: Vec<String>,
    /// Most hits a retrieving substrate considers (default 10).
    pub k: Option<usize>,
}

/// Renders the namespace `name` with each requested substrate; one JSON
/// object per substrate with its recall, latency and gold coverage.
pub async fn compare(
    state: &AppState,
    caller: &Caller,
    name: &str,
    req: &CompareRequest,
) -> Result<Value> {
    if req.substrates.is_empty() || req.substrates.len() > MAX_SUBSTRATES {
        return Err(ServerError::BadRequest(format!(
            "give 1 to {MAX_SUBSTRATES} substrates, got {}",
            req.substrates.len()
        )));
    }
    if req.gold.len() > service::MAX_K {
        return Err(ServerError::TooLarge(format!(
            "at most {} gold source ids",
            service::MAX_K
        )));
    }
    let read = ReadRequest {
        question: Some(req.question.clone()),
        task: None,
        observation: None,
        budget: req.budget,
        k: req.k,
        fixed_prompt_tokens: None,
        trace: None,
    };
    service::check_read(state, &read)?;
    // Every spec is checked before any work.
    let mut specs = Vec::new();
    for v in &req.substrates {
        let spec = service::spec_of(v)?;
        if state.store.registry().resolve(&spec.name).is_none() {
            return Err(ServerError::BadSubstrate(format!(
                "unknown substrate {:?}; known substrates: {}",
                spec.name,
                state.store.registry().known().join(", ")
            )));
        }
        specs.push(spec);
    }
    let h = service::open(state, caller, name).await?;
    let query = service::query_of(&h, &read)?;
    let (log_end, _, _) = h.offsets();
    let mut events = None;
    let mut out = Vec::new();
    for spec in specs {
        let label = format!("{spec:?}");
        let key = (name.to_string(), label, log_end);
        let (substrate, built_ms) = match state.compare.get(&key) {
            Some(s) => (s, 0.0),
            None => {
                let start = Instant::now();
                let s = state.store.build_detached(&spec)?;
                if events.is_none() {
                    events = Some(h.live_events().await?);
                }
                let all = events.as_deref().unwrap_or_default();
                let batch = state.store.config.limits.max_batch.max(1);
                for chunk in all.chunks(batch) {
                    s.write(&h.ns, chunk)
                        .await
                        .map_err(|e| ServerError::Internal(format!("{}: {e}", spec.name)))?;
                }
                state.compare.put(key, s.clone());
                (s, start.elapsed().as_secs_f64() * 1e3)
            }
        };
        let start = Instant::now();
        let recall = substrate
            .read(&query)
            .await
            .map_err(|e| ServerError::Internal(format!("{}: {e}", spec.name)))?;
        let latency_ms = start.elapsed().as_secs_f64() * 1e3;
        let gold: Vec<Value> = req
            .gold
            .iter()
            .map(|g| {
                let hit = recall.sources.iter().find(|s| &s.source_id == g);
                json!({"source_id": g, "shown": hit.is_some(),
                    "whole": hit.is_some_and(|s| s.resolution == submem_core::Resolution::Raw),
                    "resolution": hit.map(|s| s.resolution)})
            })
            .collect();
        out.push(json!({
            "substrate": v_name(&spec),
            "text": recall.text,
            "tokens": recall.tokens,
            "sources": recall.sources,
            "latency_ms": latency_ms,
            "build_ms": built_ms,
            "gold": gold,
        }));
    }
    Ok(json!({"namespace": name, "budget": req.budget, "results": out}))
}

fn v_name(spec: &submem::registry::SubstrateSpec) -> String {
    if spec.settings.is_empty() {
        spec.name.clone()
    } else {
        let s: Vec<String> = spec
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}:{}", spec.name, s.join(","))
    }
}
