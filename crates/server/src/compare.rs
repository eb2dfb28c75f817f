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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::Caller;
use crate::compare_cache::Key;
pub use crate::compare_cache::{CompareCache, CACHE_ENTRIES};
use crate::jobs::{Job, JobState};
use crate::service::{self, AppState, ReadRequest};
use crate::{Result, ServerError};
use submem::registry::SubstrateSpec;
use submem_core::{Event, Resolution, SourceHit, Substrate};

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

/// Events a build writes per call: its progress and cancel granularity.
const BUILD_BATCH: usize = 16;

/// What a comparison answers: the columns, or (while some substrate is
/// still being built) the build jobs to follow.
#[derive(Debug)]
pub enum Compared {
    /// Every substrate was read (`200`).
    Done(Value),
    /// Some builds outlasted the wait (`202`): `pending` lists their jobs.
    Building(Value),
}

/// How long a comparison waits for its builds before answering with their
/// progress: half the request timeout, at most 5 s.
fn build_wait(state: &AppState) -> Duration {
    Duration::from_millis((state.store.config.request_timeout_s * 500).min(5_000))
}

/// Renders the namespace `name` with each requested substrate; one JSON
/// object per substrate with its recall, latency, gold fates and diff. A
/// substrate not yet built for the namespace's current history is built by a
/// background job ([`crate::jobs`], kind `build`) whose result is kept; when
/// a build outlasts [`build_wait`] the answer is [`Compared::Building`].
pub async fn compare(
    state: &AppState,
    caller: &Caller,
    name: &str,
    req: &CompareRequest,
) -> Result<Compared> {
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
    let key_of = |spec: &SubstrateSpec| (name.to_string(), format!("{spec:?}"), log_end);
    let mut jobs = Vec::new();
    for spec in &specs {
        let key = key_of(spec);
        if state.compare.get(&key).is_some() {
            continue;
        }
        let job = match state.compare.building(&key) {
            Some(job) => job,
            None => start_build(state, &h.ns, spec, key, events.clone())?,
        };
        jobs.push(job);
    }
    // Wait a while for the builds; an answer must come before the request
    // times out, so a longer build is followed through its job instead.
    let deadline = Instant::now() + build_wait(state);
    loop {
        let states: Vec<Job> = jobs
            .iter()
            .filter_map(|id| state.store.jobs.get(id))
            .collect();
        if let Some(failed) = states
            .iter()
            .find(|j| matches!(j.state, JobState::Failed | JobState::Cancelled))
        {
            let what = failed.substrate.as_deref().unwrap_or("a substrate");
            return Err(match failed.state {
                JobState::Cancelled => ServerError::BadRequest(format!(
                    "the build of {what} ({}) was cancelled; compare again to rebuild it",
                    failed.id
                )),
                _ => ServerError::Internal(format!(
                    "building {what}: {}",
                    failed.error.as_deref().unwrap_or("failed")
                )),
            });
        }
        let running: Vec<&Job> = states
            .iter()
            .filter(|j| matches!(j.state, JobState::Queued | JobState::Running))
            .collect();
        if running.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Ok(Compared::Building(json!({
                "namespace": name, "question": req.question, "budget": req.budget,
                "pending": running,
            })));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut columns = Vec::new();
    for spec in specs {
        let (substrate, built_ms) = match state.compare.get(&key_of(&spec)) {
            Some(s) => (s, 0.0),
            // Evicted between its build and now (more than CACHE_ENTRIES
            // substrates compared at once): built again, inline.
            None => {
                let start = Instant::now();
                let s = state.store.build_detached(&spec)?;
                for chunk in events.chunks(state.store.config.limits.max_batch.max(1)) {
                    s.write(&h.ns, chunk)
                        .await
                        .map_err(|e| ServerError::Internal(format!("{}: {e}", spec.name)))?;
                }
                (s, start.elapsed().as_secs_f64() * 1e3)
            }
        };
        let built_ms = jobs
            .iter()
            .filter_map(|id| state.store.jobs.get(id))
            .find(|j| j.substrate.as_deref() == Some(v_name(&spec).as_str()))
            .and_then(|j| j.elapsed_ms)
            .map_or(built_ms, |ms| ms as f64);
        let start = Instant::now();
        let (recall, trace) = substrate
            .read_traced(&query, &req.gold)
            .await
            .map_err(|e| ServerError::Internal(format!("{}: {e}", spec.name)))?;
        let latency_ms = start.elapsed().as_secs_f64() * 1e3;
        columns.push((spec, recall, trace, latency_ms, built_ms));
    }
    let texts = service::texts_of(&events, &req.gold);
    let by_id: HashMap<&str, &Event> = events.iter().map(|e| (e.source_id(), e)).collect();
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
            .filter_map(|s| by_id.get(s.source_id.as_str()))
            .map(|e| tokens.count(&e.render()))
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
    Ok(Compared::Done(
        json!({"namespace": name, "question": req.question,
        "budget": req.budget, "substrates": out.len(), "results": out}),
    ))
}

/// Starts the background build of `spec` over `events` for `key`: a job of
/// kind `build` that writes the events [`BUILD_BATCH`] at a time, reporting
/// progress and stopping when cancelled, and keeps the built substrate in
/// the comparison cache. Returns the job's id.
fn start_build(
    state: &AppState,
    ns: &submem_core::Namespace,
    spec: &SubstrateSpec,
    key: Key,
    events: Arc<Vec<Event>>,
) -> Result<String> {
    let substrate = state.store.build_detached(spec)?;
    let (id, cancel) = state
        .store
        .jobs
        .create_build(&key.0, &v_name(spec), events.len());
    state.compare.start_building(key.clone(), id.clone());
    let (jobs, cache, ns, job) = (
        state.store.jobs.clone(),
        state.compare.clone(),
        ns.clone(),
        id.clone(),
    );
    let label = spec.name.clone();
    let (jobs2, cache2, key2, job2) = (jobs.clone(), cache.clone(), key.clone(), job.clone());
    let work = tokio::spawn(async move {
        let start = Instant::now();
        let mut done = 0;
        for chunk in events.chunks(BUILD_BATCH) {
            if cancel.load(Ordering::SeqCst) {
                tracing::info!(job = %job, substrate = %label, done, "comparison build cancelled");
                cache.stop_building(&key);
                jobs.finish_cancelled(&job);
                return;
            }
            if let Err(e) = substrate.write(&ns, chunk).await {
                cache.stop_building(&key);
                jobs.finish(&job, Some(format!("{label}: {e}")));
                return;
            }
            done += chunk.len();
            jobs.progress(&job, done, start.elapsed().as_millis() as u64);
        }
        cache.put(key.clone(), substrate);
        cache.stop_building(&key);
        jobs.progress(&job, done, start.elapsed().as_millis() as u64);
        jobs.finish(&job, None);
    });
    // A substrate that panics mid-build fails its job instead of leaving it
    // running forever.
    tokio::spawn(async move {
        if let Err(e) = work.await {
            cache2.stop_building(&key2);
            jobs2.finish(&job2, Some(format!("the build stopped: {e}")));
        }
    });
    Ok(id)
}

fn v_name(spec: &SubstrateSpec) -> String {
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
