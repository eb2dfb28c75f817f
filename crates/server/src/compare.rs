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
//!
//! Each column also says, for every gold id, how it was shown and why
//! (`evidence`, from the substrate's ranking trace where it keeps one), and
//! for every source it shows how many columns show it too (`shown_by`), with
//! the sources and whole-turn tokens no other column showed (`only_here`).

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::auth::Caller;
pub use crate::compare_cache::{CompareCache, CACHE_ENTRIES};
use crate::service::{self, AppState, ReadRequest};
use crate::{Result, ServerError};
use submem_core::{Resolution, SourceHit, Substrate};

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
/// object per substrate with its recall, latency, gold fates and diff.
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
    let events = h.live_events().await?;
    let mut columns = Vec::new();
    for spec in specs {
        let label = format!("{spec:?}");
        let key = (name.to_string(), label, log_end);
        let (substrate, built_ms) = match state.compare.get(&key) {
            Some(s) => (s, 0.0),
            None => {
                let start = Instant::now();
                let s = state.store.build_detached(&spec)?;
                let batch = state.store.config.limits.max_batch.max(1);
                for chunk in events.chunks(batch) {
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
        let trace = if req.gold.is_empty() {
            None
        } else {
            substrate
                .trace(&query, &req.gold)
                .await
                .map_err(|e| ServerError::Internal(format!("{}: {e}", spec.name)))?
        };
        columns.push((spec, recall, trace, latency_ms, built_ms));
    }
    let texts = service::texts_of(&events, &req.gold);
    let rendered: HashMap<&str, String> =
        events.iter().map(|e| (e.source_id(), e.render())).collect();
    // How many columns show each source: the diff the page marks.
    let mut shown_by: HashMap<&str, usize> = HashMap::new();
    for (_, recall, ..) in &columns {
        let ids: HashSet<&str> = recall.source_ids().collect();
        for id in ids {
            *shown_by.entry(id).or_default() += 1;
        }
    }
    let tokens = state.store.tokens();
    let mut out = Vec::new();
    for (spec, recall, trace, latency_ms, built_ms) in &columns {
        let gold: Vec<Value> = req
            .gold
            .iter()
            .map(|g| {
                let hit = recall.sources.iter().find(|s| &s.source_id == g);
                json!({"source_id": g, "shown": hit.is_some(),
                    "whole": hit.is_some_and(|s| s.resolution == Resolution::Raw),
                    "resolution": hit.map(|s| s.resolution)})
            })
            .collect();
        let evidence = service::explain_all(&req.gold, &texts, recall, trace.as_ref());
        let by: Vec<usize> = recall
            .sources
            .iter()
            .map(|s| shown_by.get(s.source_id.as_str()).copied().unwrap_or(0))
            .collect();
        // Whole turns only this substrate showed, counted as rendered; an
        // excerpt or a record shows an unknown share of its turn.
        let only: Vec<&SourceHit> = recall
            .sources
            .iter()
            .zip(&by)
            .filter(|(_, n)| **n == 1)
            .map(|(s, _)| s)
            .collect();
        let only_tokens: usize = only
            .iter()
            .filter(|s| s.resolution == Resolution::Raw)
            .filter_map(|s| rendered.get(s.source_id.as_str()))
            .map(|t| tokens.count(t))
            .sum();
        out.push(json!({
            "substrate": v_name(spec),
            "text": recall.text,
            "tokens": recall.tokens,
            "sources": recall.sources,
            "shown_by": by,
            "only_here": {"sources": only.len(), "raw_tokens": only_tokens},
            "latency_ms": latency_ms,
            "build_ms": built_ms,
            "gold": gold,
            "evidence": evidence,
        }));
    }
    Ok(
        json!({"namespace": name, "question": req.question, "budget": req.budget,
        "substrates": out.len(), "results": out}),
    )
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
