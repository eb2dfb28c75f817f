//! What one run task works with: a fresh substrate instance whose services
//! report to its own meter, the write-then-manage step every task runs, and
//! the training bank of the cross-episode regime (built once per substrate,
//! persisted, restored into every test episode).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use indicatif::ProgressBar;
use submem::{Meter, MeteredSubstrate};
use submem_core::{
    ChatRequest, Completion, Event, Llm, Namespace, ServiceError, Services, Substrate, TokenCounter,
};

use crate::context::{lock, Ctx};
use crate::items::WriteRecord;
use crate::{BenchError, Result};
use submem::registry::SubstrateSpec;
use submem::RegistryError;

/// An LLM wrapper counting calls and tokens, so that a read's own LLM use can
/// be told apart cheaply (the meter's snapshot sorts every latency sample).
#[derive(Debug)]
pub(crate) struct Counting {
    inner: Arc<dyn Llm>,
    pub(crate) calls: AtomicU64,
    pub(crate) tokens: AtomicU64,
}

#[async_trait]
impl Llm for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<Completion, ServiceError> {
        let out = self.inner.complete(request).await;
        if let Ok(c) = &out {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.tokens.fetch_add(
                c.usage.input_tokens + c.usage.output_tokens,
                Ordering::Relaxed,
            );
        }
        out
    }
    /// Passed through: without it M11 would never see the local model's KV
    /// prefix cache in a bench run and would silently re-prefill every read.
    /// (The meter above this wrapper counts the prefills.)
    fn prefix_caching(&self) -> Option<Arc<dyn submem_core::PrefixCaching>> {
        self.inner.prefix_caching()
    }
    fn choice_scoring(&self) -> Option<Arc<dyn submem_core::ChoiceScoring>> {
        self.inner.choice_scoring()
    }
}

/// The namespace every episode of the cross-episode regime is written to
/// and read from: one agent's memory.
pub const AGENT_NAMESPACE: &str = "agent";

/// The `conversation` of the write record that holds the cost of building
/// the training bank (once per substrate in the cross-episode regime).
pub const TRAINING_BANK: &str = "(training bank)";

/// A substrate instance with its own meter, as one task uses it.
pub(crate) struct Instance {
    pub(crate) sub: MeteredSubstrate<Arc<dyn Substrate>>,
    pub(crate) meter: Arc<Meter>,
    /// The memory LLM's call counter (to tell a read's own calls apart).
    pub(crate) counting: Option<Arc<Counting>>,
    pub(crate) family: String,
    /// The metered token counter.
    pub(crate) tokens: Arc<dyn TokenCounter>,
}

/// Builds a fresh instance of `spec` whose services report to a fresh meter:
/// base LLM -> counting -> metered. `Ok(Err(reason))` when the run cannot
/// build it (no memory LLM, no local weights): the substrate is skipped.
pub(crate) fn instance(
    ctx: &Ctx,
    spec: &SubstrateSpec,
) -> Result<std::result::Result<Instance, String>> {
    build_instance(&ctx.models.services, &ctx.factory, spec)
}

/// [`instance`] from the run's services and registry alone (the agentic
/// harness has no QA context).
pub(crate) fn build_instance(
    services: &Services,
    factory: &submem::Registry,
    spec: &SubstrateSpec,
) -> Result<std::result::Result<Instance, String>> {
    let counting = services.llm.as_ref().map(|llm| {
        Arc::new(Counting {
            inner: llm.clone(),
            calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
        })
    });
    let base = Services {
        llm: counting.clone().map(|c| c as Arc<dyn Llm>),
        embedder: services.embedder.clone(),
        tokens: services.tokens.clone(),
    };
    let mut tokens = None;
    let built = MeteredSubstrate::build(&base, |services| {
        tokens = Some(services.tokens.clone());
        factory.build(spec, services)
    });
    let sub = match built {
        Ok(s) => s,
        Err(RegistryError::NeedsLlm { substrate }) => {
            let msg =
                format!("{substrate}: needs a memory LLM and the run has none (--memory-llm none)");
            tracing::warn!("{msg}; skipped");
            return Ok(Err(msg));
        }
        Err(RegistryError::NeedsLocalModel { substrate, reason }) => {
            let msg = format!("{substrate}: needs the local model weights: {reason}");
            tracing::warn!("{msg}; skipped");
            return Ok(Err(msg));
        }
        Err(e) => return Err(e.into()),
    };
    let tokens = tokens.unwrap_or_else(|| base.tokens.clone());
    Ok(Ok(Instance {
        family: sub.info().family.to_string(),
        meter: sub.meter().clone(),
        sub,
        counting,
        tokens,
    }))
}

/// What writing a history and managing once cost.
pub(crate) struct Written {
    events: usize,
    write_seconds: f64,
    samples: Vec<f64>,
    manage_seconds: f64,
}

impl Written {
    pub(crate) fn record(
        self,
        sub: &MeteredSubstrate<Arc<dyn Substrate>>,
        meter: &Meter,
        substrate: &str,
        family: String,
        dataset: &str,
        conversation: &str,
    ) -> WriteRecord {
        let fp = sub.footprint();
        let snap = meter.snapshot();
        WriteRecord {
            substrate: substrate.to_string(),
            family,
            dataset: dataset.to_string(),
            conversation: conversation.to_string(),
            events: self.events,
            write_seconds: self.write_seconds,
            write_latency_samples: self.samples,
            manage_seconds: self.manage_seconds,
            restore_seconds: 0.0,
            write: snap.write,
            manage: snap.manage,
            memory_bytes: fp.memory_bytes,
            disk_bytes: fp.disk_bytes,
            stored_tokens: fp.stored_tokens,
            input_tokens: fp.input_tokens,
            diagnostics: sub.diagnostics(),
        }
    }
}

/// Writes `batches` (session-sized) into `ns`, then manages once. Each
/// batch and the manage pass are shown on `progress` and logged at info
/// level, so an hour of LLM writes is not silent: `task` names the work.
pub(crate) async fn write_and_manage(
    sub: &MeteredSubstrate<Arc<dyn Substrate>>,
    ns: &Namespace,
    batches: impl Iterator<Item = Vec<Event>>,
    progress: &ProgressBar,
    task: &str,
) -> submem_core::Result<Written> {
    let mut w = Written {
        events: 0,
        write_seconds: 0.0,
        samples: Vec::new(),
        manage_seconds: 0.0,
    };
    let batches: Vec<Vec<Event>> = batches.filter(|b| !b.is_empty()).collect();
    let n = batches.len();
    for (i, batch) in batches.iter().enumerate() {
        progress.set_message(format!("{task} · writing batch {}/{n}", i + 1));
        let t = Instant::now();
        sub.write(ns, batch).await?;
        let dt = t.elapsed().as_secs_f64();
        tracing::info!(
            task,
            batch = i + 1,
            of = n,
            events = batch.len(),
            seconds = dt,
            "batch written"
        );
        w.write_seconds += dt;
        w.samples.push(dt / batch.len() as f64);
        w.events += batch.len();
    }
    progress.set_message(format!("{task} · managing"));
    let t = Instant::now();
    sub.manage().await?;
    w.manage_seconds = t.elapsed().as_secs_f64();
    tracing::info!(task, seconds = w.manage_seconds, "managed");
    Ok(w)
}

/// The persisted training bank of `spec` (cross-episode regime): built once
/// per run from the training episodes, in dataset order, into the agent
/// namespace, managed, and persisted under `<out>/banks/`; every test
/// episode restores it into a fresh instance. Its write and manage cost is
/// logged once, as the write record of [`TRAINING_BANK`]. A resumed run
/// reuses a bank whose record was logged.
pub(crate) async fn training_bank(
    ctx: &Ctx,
    spec: &SubstrateSpec,
) -> Result<std::result::Result<PathBuf, String>> {
    let label = spec.to_string();
    let cell = {
        let mut banks = lock(&ctx.banks);
        banks.entry(label.clone()).or_default().clone()
    };
    cell.get_or_try_init(|| build_bank(ctx, spec, label))
        .await
        .cloned()
}

async fn build_bank(
    ctx: &Ctx,
    spec: &SubstrateSpec,
    label: String,
) -> Result<std::result::Result<PathBuf, String>> {
    let dataset = ctx.dataset.name.clone();
    let dir = ctx.opts.out.join("banks").join(file_safe(&label));
    let key = (label.clone(), dataset.clone(), TRAINING_BANK.to_string());
    if ctx.writes_done.contains(&key) && dir.is_dir() {
        tracing::info!(substrate = %label, dir = %dir.display(), "reusing the training bank");
        return Ok(Ok(dir));
    }
    let Instance {
        sub, meter, family, ..
    } = match instance(ctx, spec)? {
        Ok(i) => i,
        Err(skip) => return Ok(Err(skip)),
    };
    let sub_err = |e: submem_core::Error| BenchError::Substrate {
        substrate: label.clone(),
        conversation: TRAINING_BANK.into(),
        source: e,
    };
    let ns = Namespace::new(AGENT_NAMESPACE)?;
    let batches = ctx.train.iter().flat_map(|c| c.history.batches());
    let task = format!("{label} · training bank");
    let written = write_and_manage(&sub, &ns, batches, &ctx.progress, &task)
        .await
        .map_err(sub_err)?;
    keep_memory(&sub, &dir).await?;
    let rec = written.record(&sub, &meter, &label, family, &dataset, TRAINING_BANK);
    lock(&ctx.writes_log).append(&rec)?;
    lock(&ctx.new_writes).push(rec);
    Ok(Ok(dir))
}

/// Where a task's written memory is kept (see
/// [`crate::runner::RunOptions::keep_memories`]).
pub(crate) fn kept_memory_dir(out: &Path, substrate: &str, conversation: &str) -> PathBuf {
    out.join("memories")
        .join(file_safe(substrate))
        .join(file_safe(conversation))
}

/// Persists `sub` into `dir`, replacing what was there only once the new
/// copy is complete ([`submem::kit::dir::Staged`]): a crash leaves the old
/// copy or the new one, never a torn one.
pub(crate) async fn keep_memory(
    sub: &MeteredSubstrate<Arc<dyn Substrate>>,
    dir: &Path,
) -> Result<()> {
    let t = Instant::now();
    let staged = submem::kit::dir::Staged::new(dir)?;
    sub.persist(staged.path())
        .await
        .map_err(|e| BenchError::Substrate {
            substrate: sub.info().name,
            conversation: dir.display().to_string(),
            source: e,
        })?;
    staged.commit()?;
    tracing::info!(dir = %dir.display(), seconds = t.elapsed().as_secs_f64(), "memory kept");
    Ok(())
}

/// A substrate label as a file name (`m1:k=5` -> `m1_k_5`).
pub(crate) fn file_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A task's memory, written (or restored) and managed, ready to read.
pub(crate) struct Prepared {
    pub(crate) instance: Instance,
    pub(crate) namespace: Namespace,
    pub(crate) label: String,
}

impl Prepared {
    pub(crate) fn error(&self, conversation: &str, e: submem_core::Error) -> BenchError {
        BenchError::Substrate {
            substrate: self.label.clone(),
            conversation: conversation.to_string(),
            source: e,
        }
    }
}
