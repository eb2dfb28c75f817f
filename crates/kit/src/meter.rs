//! Metering: wrappers that count every LLM call, token, embedding call and
//! second per phase (write / read / manage), so that every substrate gets the
//! efficiency metrics E2–E15 the same way, without counting anything itself.
//!
//! One [`Meter`] belongs to one substrate instance. [`MeteredSubstrate`] sets
//! the meter's current phase around each call and [`MeteredLlm`] /
//! [`MeteredEmbedder`] attribute their calls to it. Calls of one phase may run
//! concurrently; calls of *different* phases on the same meter at the same time
//! would be attributed to whichever phase began last, so the harness runs the
//! phases of one instance one after another.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use submem_core::{
    ChatMessage, ChatRequest, Completion, EmbedCounts, Embedder, Event, Footprint, Forget, Llm,
    ManageReport, Namespace, PrefilledLlm, PrefixCaching, Query, ReadTrace, Recall, Result,
    ServiceError, Services, Substrate, SubstrateInfo, Usage, WriteReport,
};

/// The phase a cost belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Ingesting history.
    Write,
    /// Answering a query.
    Read,
    /// Maintenance.
    Manage,
}

impl Phase {
    const ALL: [Phase; 3] = [Phase::Write, Phase::Read, Phase::Manage];

    fn index(self) -> usize {
        self as usize
    }
}

/// Mean and percentiles of a set of durations, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Number of samples.
    pub count: usize,
    /// Sum of the samples.
    pub total: f64,
    /// Mean (0 when there are no samples).
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
}

impl LatencyStats {
    /// Computes the statistics of `samples` (seconds).
    pub fn from_samples(samples: &[f64]) -> Self {
        if samples.is_empty() {
            return LatencyStats::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let total: f64 = sorted.iter().sum();
        LatencyStats {
            count: sorted.len(),
            total,
            mean: total / sorted.len() as f64,
            p50: percentile(&sorted, 0.5),
            p90: percentile(&sorted, 0.9),
        }
    }
}

/// Nearest-rank percentile of an ascending slice (`q` in 0..=1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Costs of one phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// LLM calls that returned.
    pub llm_calls: u64,
    /// LLM calls that failed.
    pub llm_failures: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Embedding batches.
    pub embed_calls: u64,
    /// Texts embedded: what the substrate asked for, its cost on a cold
    /// embedding cache.
    pub embed_items: u64,
    /// Of those, texts the embedding cache answered (`embed_items -
    /// embed_cached` were computed by the model).
    #[serde(default)]
    pub embed_cached: u64,
    /// Latency of each substrate operation of this phase.
    pub operation_latency: LatencyStats,
    /// Latency of each LLM call.
    pub llm_latency: LatencyStats,
    /// Latency of each embedding batch.
    pub embed_latency: LatencyStats,
}

impl PhaseStats {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// A frozen copy of a meter's counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeterSnapshot {
    /// Write phase.
    pub write: PhaseStats,
    /// Read phase.
    pub read: PhaseStats,
    /// Manage phase.
    pub manage: PhaseStats,
}

impl MeterSnapshot {
    /// The stats of `phase`.
    pub fn phase(&self, phase: Phase) -> &PhaseStats {
        match phase {
            Phase::Write => &self.write,
            Phase::Read => &self.read,
            Phase::Manage => &self.manage,
        }
    }
    /// LLM calls over all phases (E13).
    pub fn total_calls(&self) -> u64 {
        Phase::ALL.iter().map(|p| self.phase(*p).llm_calls).sum()
    }
    /// Tokens over all phases (E12).
    pub fn total_tokens(&self) -> u64 {
        Phase::ALL
            .iter()
            .map(|p| self.phase(*p).total_tokens())
            .sum()
    }
    /// Wall time of all operations (E14 before generation time is added).
    pub fn total_seconds(&self) -> f64 {
        Phase::ALL
            .iter()
            .map(|p| self.phase(*p).operation_latency.total)
            .sum()
    }
}

#[derive(Debug, Default)]
struct RawPhase {
    llm_calls: u64,
    llm_failures: u64,
    input_tokens: u64,
    output_tokens: u64,
    embed_calls: u64,
    embed_items: u64,
    embed_cached: u64,
    operation_seconds: Vec<f64>,
    llm_seconds: Vec<f64>,
    embed_seconds: Vec<f64>,
}

impl RawPhase {
    fn stats(&self) -> PhaseStats {
        PhaseStats {
            llm_calls: self.llm_calls,
            llm_failures: self.llm_failures,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            embed_calls: self.embed_calls,
            embed_items: self.embed_items,
            embed_cached: self.embed_cached,
            operation_latency: LatencyStats::from_samples(&self.operation_seconds),
            llm_latency: LatencyStats::from_samples(&self.llm_seconds),
            embed_latency: LatencyStats::from_samples(&self.embed_seconds),
        }
    }
}

/// Counts calls, tokens and time per phase.
#[derive(Debug, Default)]
pub struct Meter {
    phase: AtomicU8,
    phases: Mutex<[RawPhase; 3]>,
}

impl Meter {
    /// A new meter in the write phase.
    pub fn new() -> Arc<Self> {
        Arc::new(Meter::default())
    }

    /// Sets the phase later calls are attributed to.
    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::SeqCst);
    }

    /// The phase calls are attributed to now.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::SeqCst) {
            1 => Phase::Read,
            2 => Phase::Manage,
            _ => Phase::Write,
        }
    }

    fn lock(&self) -> MutexGuard<'_, [RawPhase; 3]> {
        // A panic while holding the lock cannot leave the counters half-updated
        // in a way that matters, so a poisoned lock is still usable.
        self.phases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an LLM call of the current phase.
    pub fn record_llm(&self, outcome: std::result::Result<&Completion, ()>, elapsed: Duration) {
        let phase = self.phase().index();
        let mut phases = self.lock();
        let p = &mut phases[phase];
        match outcome {
            Ok(c) => {
                p.llm_calls += 1;
                p.input_tokens += c.usage.input_tokens;
                p.output_tokens += c.usage.output_tokens;
            }
            Err(()) => p.llm_failures += 1,
        }
        p.llm_seconds.push(elapsed.as_secs_f64());
    }

    /// Records an embedding batch of the current phase.
    pub fn record_embed(&self, items: usize, elapsed: Duration) {
        self.record_embed_counted(items, 0, elapsed);
    }

    /// Records an embedding batch of the current phase of which `cached`
    /// texts came from the embedding cache.
    pub fn record_embed_counted(&self, items: usize, cached: u64, elapsed: Duration) {
        let phase = self.phase().index();
        let mut phases = self.lock();
        let p = &mut phases[phase];
        p.embed_calls += 1;
        p.embed_items += items as u64;
        p.embed_cached += cached;
        p.embed_seconds.push(elapsed.as_secs_f64());
    }

    /// Records one substrate operation of `phase`.
    pub fn record_operation(&self, phase: Phase, elapsed: Duration) {
        self.lock()[phase.index()]
            .operation_seconds
            .push(elapsed.as_secs_f64());
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> MeterSnapshot {
        let phases = self.lock();
        MeterSnapshot {
            write: phases[0].stats(),
            read: phases[1].stats(),
            manage: phases[2].stats(),
        }
    }

    /// Clears every count.
    pub fn reset(&self) {
        *self.lock() = Default::default();
    }

    /// Wraps every service of `services` with this meter.
    pub fn wrap_services(self: &Arc<Self>, services: &Services) -> Services {
        Services {
            llm: services
                .llm
                .as_ref()
                .map(|llm| Arc::new(MeteredLlm::new(llm.clone(), self.clone())) as Arc<dyn Llm>),
            embedder: Arc::new(MeteredEmbedder::new(
                services.embedder.clone(),
                self.clone(),
            )),
            tokens: services.tokens.clone(),
        }
    }
}

/// An [`Llm`] that records every call in a [`Meter`].
#[derive(Debug, Clone)]
pub struct MeteredLlm {
    inner: Arc<dyn Llm>,
    meter: Arc<Meter>,
}

impl MeteredLlm {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Llm>, meter: Arc<Meter>) -> Self {
        MeteredLlm { inner, meter }
    }
}

#[async_trait]
impl Llm for MeteredLlm {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn complete(
        &self,
        request: &ChatRequest,
    ) -> std::result::Result<Completion, ServiceError> {
        let start = Instant::now();
        let out = self.inner.complete(request).await;
        self.meter
            .record_llm(out.as_ref().map_err(|_| ()), start.elapsed());
        out
    }
    /// Passed through unmetered: only an agent's policy scores choices, and
    /// the harness counts policies itself, as it counts readers.
    fn choice_scoring(&self) -> Option<Arc<dyn submem_core::ChoiceScoring>> {
        self.inner.choice_scoring()
    }
    fn prefix_caching(&self) -> Option<Arc<dyn PrefixCaching>> {
        self.inner.prefix_caching().map(|inner| {
            Arc::new(MeteredPrefixCaching {
                inner,
                meter: self.meter.clone(),
            }) as Arc<dyn PrefixCaching>
        })
    }
}

/// Counts each prefill as one LLM call of the current phase whose input
/// tokens are the head's model tokens. The prefilled model it returns is not
/// metered: it is a reader, and the harness counts readers itself.
#[derive(Debug)]
struct MeteredPrefixCaching {
    inner: Arc<dyn PrefixCaching>,
    meter: Arc<Meter>,
}

#[async_trait]
impl PrefixCaching for MeteredPrefixCaching {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn prefill(
        &self,
        head: &[ChatMessage],
    ) -> std::result::Result<Arc<dyn PrefilledLlm>, ServiceError> {
        let start = Instant::now();
        let out = self.inner.prefill(head).await;
        let as_call = out.as_ref().map(|p| Completion {
            text: String::new(),
            usage: Usage {
                input_tokens: p.prefix_tokens() as u64,
                output_tokens: 0,
            },
        });
        self.meter
            .record_llm(as_call.as_ref().map_err(|_| ()), start.elapsed());
        out
    }
}

/// An [`Embedder`] that records every batch in a [`Meter`].
#[derive(Debug, Clone)]
pub struct MeteredEmbedder {
    inner: Arc<dyn Embedder>,
    meter: Arc<Meter>,
}

impl MeteredEmbedder {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Embedder>, meter: Arc<Meter>) -> Self {
        MeteredEmbedder { inner, meter }
    }
}

#[async_trait]
impl Embedder for MeteredEmbedder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, ServiceError> {
        self.embed_counted(texts).await.map(|(out, _)| out)
    }
    async fn embed_counted(
        &self,
        texts: &[String],
    ) -> std::result::Result<(Vec<Vec<f32>>, EmbedCounts), ServiceError> {
        let start = Instant::now();
        let out = self.inner.embed_counted(texts).await;
        let cached = out.as_ref().map_or(0, |(_, c)| c.cached);
        self.meter
            .record_embed_counted(texts.len(), cached, start.elapsed());
        out
    }
}

/// A substrate whose phases are timed and whose services' calls are
/// attributed to the phase of the operation that made them.
///
/// [`MeteredSubstrate::build`] sets both up with one meter: the services the
/// substrate is built with, and the wrapper that times its phases.
///
#[derive(Debug)]
pub struct MeteredSubstrate<S> {
    inner: S,
    meter: Arc<Meter>,
}

impl<S: Substrate> MeteredSubstrate<S> {
    /// Wraps `inner`; its services must report to `meter` (see
    /// [`MeteredSubstrate::build`], which does both).
    pub fn new(inner: S, meter: Arc<Meter>) -> Self {
        MeteredSubstrate { inner, meter }
    }

    /// Builds a substrate metered end to end by one fresh meter: `build`
    /// receives `services` wrapped by that meter, and the result is wrapped
    /// to time its phases with the same meter.
    pub fn build<E>(
        services: &Services,
        build: impl FnOnce(Services) -> std::result::Result<S, E>,
    ) -> std::result::Result<Self, E> {
        let meter = Meter::new();
        let inner = build(meter.wrap_services(services))?;
        Ok(MeteredSubstrate { inner, meter })
    }
    /// The meter.
    pub fn meter(&self) -> &Arc<Meter> {
        &self.meter
    }
    /// The wrapped substrate.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    async fn timed<T, F>(&self, phase: Phase, fut: F) -> T
    where
        F: std::future::Future<Output = T>,
    {
        self.meter.set_phase(phase);
        let start = Instant::now();
        let out = fut.await;
        self.meter.record_operation(phase, start.elapsed());
        out
    }
}

#[async_trait]
impl<S: Substrate> Substrate for MeteredSubstrate<S> {
    fn info(&self) -> SubstrateInfo {
        self.inner.info()
    }
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        self.timed(Phase::Write, self.inner.write(namespace, events))
            .await
    }
    async fn read(&self, query: &Query) -> Result<Recall> {
        self.timed(Phase::Read, self.inner.read(query)).await
    }
    async fn manage(&self) -> Result<ManageReport> {
        self.timed(Phase::Manage, self.inner.manage()).await
    }
    fn footprint(&self) -> Footprint {
        self.inner.footprint()
    }
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.inner.persist(dir).await
    }
    async fn restore(&self, dir: &Path) -> Result<()> {
        self.inner.restore(dir).await
    }
    async fn forget(&self, target: &Forget) -> Result<usize> {
        self.timed(Phase::Manage, self.inner.forget(target)).await
    }
    /// Not timed: a trace is a diagnosis, not an operation. Model calls it
    /// makes (a query embedding) count in the current phase.
    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        self.inner.trace(query, source_ids).await
    }
    /// Timed as a read: where the substrate ranks once for both, the trace's
    /// share cannot be told apart (it is small: the ranking is the read's).
    async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<ReadTrace>)> {
        self.timed(Phase::Read, self.inner.read_traced(query, source_ids))
            .await
    }
    fn diagnostics(&self) -> submem_core::Diagnostics {
        self.inner.diagnostics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::{CachingLlm, ScriptedLlm};
    use submem_core::PrefixReuse;

    #[test]
    fn percentiles_by_nearest_rank() {
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let st = LatencyStats::from_samples(&s);
        assert_eq!(st.count, 10);
        assert_eq!(st.mean, 5.5);
        assert_eq!(st.p50, 5.0);
        assert_eq!(st.p90, 9.0);
        assert_eq!(LatencyStats::from_samples(&[]).count, 0);
        assert_eq!(LatencyStats::from_samples(&[2.0]).p90, 2.0);
    }

    #[tokio::test]
    async fn caching_llm_counts_hits_and_meters_prefills() {
        let llm = CachingLlm::from_fn(|_| Ok("ok".into()));
        let meter = Meter::new();
        let metered = MeteredLlm::new(Arc::new(llm.clone()), meter.clone());
        meter.set_phase(Phase::Manage);
        let head = vec![ChatMessage::system("S"), ChatMessage::user("Memory: a b")];
        let cache = metered
            .prefix_caching()
            .unwrap()
            .prefill(&head)
            .await
            .unwrap();
        assert_eq!(llm.prefills(), 1);
        let manage = meter.snapshot().manage;
        assert_eq!(manage.llm_calls, 1);
        assert_eq!(manage.input_tokens, cache.prefix_tokens() as u64);
        let reader = cache.clone().into_llm();
        let hit = ChatRequest::instructed("S", "Memory: a b\n\nQuestion: q");
        let miss = ChatRequest::new(vec![ChatMessage::user("other")]);
        assert_eq!(reader.complete(&hit).await.unwrap().text, "ok");
        reader.complete(&miss).await.unwrap();
        assert_eq!(cache.reuse(), PrefixReuse { hits: 1, misses: 1 });
        assert!(ScriptedLlm::new(vec![]).prefix_caching().is_none());
    }
}
