//! One served namespace: its substrate, its event log, the order in which
//! changes reach the substrate, and its snapshots.
//!
//! A change (a write or a forget) goes through three steps, the first two
//! under the namespace's writer lock, so concurrent writers are serialised:
//! it is checked (no source id repeated or already stored), appended to the
//! log (fsynced: from here it is acknowledged) and queued; one applier task
//! per namespace then applies the queue to the substrate in log order. A
//! substrate that calls no LLM is waited for, so the response carries the
//! substrate's report; one that calls an LLM is not: the response is a job
//! id (see [`crate::jobs`]). Reads never take a lock: they run concurrently
//! on the substrate, which is shared (`&self` methods).
//!
//! A batch the substrate refuses after it was logged is undone by logging a
//! forget of its ids, so a replay ends in the same state. The applier
//! persists the substrate (see [`crate::storage::SnapshotStore`]) after each
//! manage pass and whenever the unsnapshotted tail of the log grows past
//! [`SnapshotPolicy`]: a record count, or the time its records took to apply,
//! which is what replaying them on a cold open will take again (embedding
//! substrates recompute every vector). A cold open restores the newest whole
//! snapshot and replays the log after the offset it covers.
//!
//! A handle counts the requests using it and the operations queued on it, so
//! the resident set ([`crate::store`]) closes only idle namespaces:
//! [`NamespaceHandle::close`] drains the queue, snapshots what is not yet
//! snapshotted and releases the namespace's lease.

use futures::FutureExt;
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, Mutex};

use submem::MeteredSubstrate;
use submem::{Meter, MeterSnapshot};
use submem_core::{Event, Footprint, Forget, ManageReport, Query, Recall};
use submem_core::{Namespace, Substrate, WriteReport};

use crate::jobs::Jobs;
use crate::log::{EventLog, LogRecord};
pub use crate::storage::NamespaceMeta;
use crate::storage::{Lease, NamespaceStorage, SnapshotStore};
use crate::{Result, ServerError};

/// The metered substrate of a namespace.
pub type Metered = MeteredSubstrate<Arc<dyn Substrate>>;

/// The outcome of a submitted change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted<T> {
    /// Applied; the substrate's report.
    Done(T),
    /// Logged and queued as a background job.
    Job(String),
}

/// What the applier does.
#[derive(Debug)]
enum OpKind {
    Write(Vec<Event>),
    Forget(Vec<String>),
    Manage,
    Snapshot,
}

#[derive(Debug)]
enum Outcome {
    Written(WriteReport),
    Forgotten(usize),
    Managed(ManageReport),
    Snapshotted,
}

#[derive(Debug)]
struct Op {
    kind: OpKind,
    /// Offset after the op's log record (0 for unlogged ops).
    end: u64,
    job: Option<String>,
    reply: Option<oneshot::Sender<Result<Outcome>>>,
}

/// Counters shared by the handle and its applier.
#[derive(Debug, Default)]
struct Offsets {
    applied: AtomicU64,
    snapshot: AtomicU64,
    /// Operations sent to the applier and not finished.
    queued: AtomicUsize,
}

/// When the applier snapshots: whichever limit the unsnapshotted tail of
/// the log passes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Log records (writes and forgets) applied since the last snapshot.
    pub every_records: u64,
    /// Time spent applying them: a cold open replays the same records and
    /// pays it again, so this bounds the replay part of a cold open.
    pub apply_time: Duration,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            every_records: 256,
            apply_time: Duration::from_millis(500),
        }
    }
}

/// A live namespace.
#[derive(Debug)]
pub struct NamespaceHandle {
    /// Its stored description.
    pub meta: NamespaceMeta,
    /// Its name as the substrate sees it.
    pub ns: Namespace,
    /// Whether writes and manage passes run as background jobs (the
    /// substrate calls an LLM).
    pub background: bool,
    substrate: Arc<Metered>,
    log: Arc<dyn EventLog>,
    snapshots: Arc<dyn SnapshotStore>,
    lease: Arc<dyn Lease>,
    sources: Arc<Mutex<HashSet<String>>>,
    offsets: Arc<Offsets>,
    /// `None` once closed.
    ops: std::sync::Mutex<Option<mpsc::UnboundedSender<Op>>>,
    applier: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Requests holding the handle (see [`crate::store`]).
    pub(crate) users: AtomicUsize,
    /// When it was last handed to a request, as ms since `opened`.
    last_used_ms: AtomicU64,
    opened: Instant,
    /// How long the cold open took (restore and replay).
    pub open_time: Duration,
    /// The live history as of a log end, kept after the first request that
    /// needs it (the events listing, traces, comparisons) so that paging
    /// through it or tracing does not replay the log each time; a write or
    /// forget moves the end and the next request replays again. Namespaces
    /// nobody inspects never hold it.
    history: std::sync::Mutex<Option<(u64, Arc<Vec<Event>>)>>,
}

/// Everything the applier task owns.
struct Applier {
    ns: Namespace,
    substrate: Arc<Metered>,
    log: Arc<dyn EventLog>,
    snapshots: Arc<dyn SnapshotStore>,
    sources: Arc<Mutex<HashSet<String>>>,
    offsets: Arc<Offsets>,
    jobs: Arc<Jobs>,
    policy: SnapshotPolicy,
}

impl NamespaceHandle {
    /// Opens the namespace over `storage` with a freshly built `substrate`:
    /// restores the newest whole snapshot, replays the log after it, and
    /// starts the applier.
    pub async fn open(
        meta: NamespaceMeta,
        storage: NamespaceStorage,
        substrate: Arc<Metered>,
        background: bool,
        jobs: Arc<Jobs>,
        policy: SnapshotPolicy,
    ) -> Result<Arc<Self>> {
        let started = Instant::now();
        let ns = Namespace::new(meta.name.clone())
            .map_err(|e| ServerError::BadRequest(e.to_string()))?;
        let NamespaceStorage {
            log,
            snapshots,
            lease,
        } = storage;
        let covered = snapshots
            .restore_newest(substrate.as_ref(), log.end())
            .await?;
        let mut sources = HashSet::new();
        let mut replayed = 0usize;
        for (end, record) in log.replay(0).await? {
            match &record {
                LogRecord::Write { events } => {
                    sources.extend(events.iter().map(|e| e.source_id().to_string()))
                }
                LogRecord::Forget { source_ids } => {
                    for id in source_ids {
                        sources.remove(id);
                    }
                }
            }
            if end > covered {
                replayed += 1;
                // A batch refused (or panicked on) when first applied is
                // followed in the log by a forget of its ids.
                match AssertUnwindSafe(apply_record(&ns, substrate.as_ref(), record))
                    .catch_unwind()
                    .await
                {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(namespace = %ns, offset = end, error = %e, "replayed record refused")
                    }
                    Err(_) => {
                        tracing::error!(namespace = %ns, offset = end, "substrate panicked on a replayed record")
                    }
                }
            }
        }
        let end = log.end();
        let open_time = started.elapsed();
        tracing::info!(namespace = %ns, snapshot = covered, replayed, events = sources.len(),
            ms = open_time.as_secs_f64() * 1e3, "namespace opened");
        let offsets = Arc::new(Offsets {
            applied: AtomicU64::new(end),
            snapshot: AtomicU64::new(covered),
            queued: AtomicUsize::new(0),
        });
        let sources = Arc::new(Mutex::new(sources));
        let (tx, rx) = mpsc::unbounded_channel();
        let applier = Applier {
            ns: ns.clone(),
            substrate: substrate.clone(),
            log: log.clone(),
            snapshots: snapshots.clone(),
            sources: sources.clone(),
            offsets: offsets.clone(),
            jobs,
            policy,
        };
        let task = tokio::spawn(applier.run(rx));
        Ok(Arc::new(NamespaceHandle {
            meta,
            ns,
            background,
            substrate,
            log,
            snapshots,
            lease,
            sources,
            offsets,
            ops: std::sync::Mutex::new(Some(tx)),
            applier: std::sync::Mutex::new(Some(task)),
            users: AtomicUsize::new(0),
            last_used_ms: AtomicU64::new(0),
            opened: started,
            open_time,
            history: std::sync::Mutex::new(None),
        }))
    }

    /// Marks the handle used now.
    pub(crate) fn touch(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.last_used_ms.store(ms, Ordering::Relaxed);
    }

    /// How long since a request last took the handle.
    pub fn idle_for(&self) -> Duration {
        let now = self.opened.elapsed();
        now.saturating_sub(Duration::from_millis(
            self.last_used_ms.load(Ordering::Relaxed),
        ))
    }

    /// Whether no request holds the handle and nothing is queued on it.
    pub fn is_idle(&self) -> bool {
        self.users.load(Ordering::SeqCst) == 0 && self.offsets.queued.load(Ordering::SeqCst) == 0
    }

    /// Whether this process lost the right to write the namespace.
    pub fn lease_lost(&self) -> bool {
        self.lease.lost()
    }

    /// Stops the namespace without snapshotting (it is being deleted): the
    /// applier stops after what is queued, the lease is released.
    pub async fn discard(&self) {
        let sender = self.ops.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(sender);
        let task = self
            .applier
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
        self.snapshots.close().await;
        self.lease.release().await;
    }

    /// Closes the namespace: the queued work is finished, what is not
    /// snapshotted yet is snapshotted (unless the lease is lost: then
    /// nothing is written), the applier stops and the lease is released.
    /// Requests still holding the handle get `namespace_closed` for changes
    /// and keep reading the substrate.
    pub async fn close(&self) {
        if !self.lease.lost() {
            if let Err(e) = self.snapshot().await {
                tracing::error!(namespace = %self.ns, error = %e, "snapshot at close failed; the log still holds every event");
            }
        }
        self.discard().await;
        tracing::debug!(namespace = %self.ns, "namespace closed");
    }

    /// Refuses a change before it is logged once the handle is closed.
    fn check_open(&self) -> Result<()> {
        let closed =
            self.lease.lost() || self.ops.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        if closed {
            return Err(ServerError::Closed(self.meta.name.clone()));
        }
        Ok(())
    }

    fn send(&self, op: Op) -> Result<()> {
        if self.lease.lost() {
            return Err(ServerError::Closed(self.meta.name.clone()));
        }
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        let sender = ops
            .as_ref()
            .ok_or_else(|| ServerError::Closed(self.meta.name.clone()))?;
        self.offsets.queued.fetch_add(1, Ordering::SeqCst);
        sender.send(op).map_err(|_| {
            self.offsets.queued.fetch_sub(1, Ordering::SeqCst);
            ServerError::Closed(self.meta.name.clone())
        })
    }

    /// Queues `kind`; the receiver answers when it is applied (none for a job).
    fn enqueue(
        &self,
        kind: OpKind,
        end: u64,
        job: Option<String>,
    ) -> Result<Option<oneshot::Receiver<Result<Outcome>>>> {
        if job.is_some() {
            self.send(Op {
                kind,
                end,
                job,
                reply: None,
            })?;
            return Ok(None);
        }
        let (tx, rx) = oneshot::channel();
        self.send(Op {
            kind,
            end,
            job: None,
            reply: Some(tx),
        })?;
        Ok(Some(rx))
    }

    async fn wait(
        &self,
        rx: Option<oneshot::Receiver<Result<Outcome>>>,
    ) -> Result<Option<Outcome>> {
        match rx {
            None => Ok(None),
            Some(rx) => {
                Ok(Some(rx.await.map_err(|_| {
                    ServerError::Closed(self.meta.name.clone())
                })??))
            }
        }
    }

    async fn submit(&self, kind: OpKind, end: u64, job: Option<String>) -> Result<Option<Outcome>> {
        let rx = self.enqueue(kind, end, job)?;
        self.wait(rx).await
    }

    /// Checks, logs (durably) and applies or queues a batch.
    pub async fn write(&self, events: Vec<Event>, jobs: &Jobs) -> Result<Submitted<WriteReport>> {
        let mut sources = self.sources.lock().await;
        let mut seen = HashSet::with_capacity(events.len());
        for e in &events {
            e.validate()
                .map_err(|e| ServerError::BadRequest(e.to_string()))?;
            let id = e.source_id();
            if !seen.insert(id) {
                return Err(ServerError::DuplicateSource(format!(
                    "source id {id:?} appears twice in the batch"
                )));
            }
            if sources.contains(id) {
                return Err(ServerError::DuplicateSource(format!(
                    "source id {id:?} is already stored in namespace {:?}",
                    self.meta.name
                )));
            }
        }
        let ids: Vec<String> = seen.into_iter().map(str::to_string).collect();
        self.check_open()?;
        let record = LogRecord::Write { events };
        let end = self.log.append(&record).await?;
        sources.extend(ids);
        let LogRecord::Write { events } = record else {
            return Err(ServerError::BadRequest("unreachable record kind".into()));
        };
        let job = self
            .background
            .then(|| jobs.create(&self.meta.name, "write", events.len()));
        // Queued in log order under the lock; waited for without it (the
        // applier takes it to undo a refused batch).
        let rx = self.enqueue(OpKind::Write(events), end, job.clone());
        drop(sources);
        match (self.wait(rx?).await?, job) {
            (Some(Outcome::Written(r)), _) => Ok(Submitted::Done(r)),
            (_, Some(job)) => Ok(Submitted::Job(job)),
            _ => Err(ServerError::Closed(self.meta.name.clone())),
        }
    }

    /// Forgets `ids` (those stored; the others are ignored), durably.
    pub async fn forget(&self, ids: Vec<String>) -> Result<usize> {
        let mut sources = self.sources.lock().await;
        let mut known: Vec<String> = ids.into_iter().filter(|i| sources.contains(i)).collect();
        known.sort();
        known.dedup();
        if known.is_empty() {
            return Ok(0);
        }
        self.check_open()?;
        let record = LogRecord::Forget { source_ids: known };
        let end = self.log.append(&record).await?;
        let LogRecord::Forget { source_ids } = record else {
            return Err(ServerError::BadRequest("unreachable record kind".into()));
        };
        for id in &source_ids {
            sources.remove(id);
        }
        let rx = self.enqueue(OpKind::Forget(source_ids), end, None);
        drop(sources);
        match self.wait(rx?).await? {
            Some(Outcome::Forgotten(n)) => Ok(n),
            _ => Err(ServerError::Closed(self.meta.name.clone())),
        }
    }

    /// Runs a manage pass (a background job when the substrate calls an LLM)
    /// and snapshots after it.
    pub async fn manage(&self, jobs: &Jobs) -> Result<Submitted<ManageReport>> {
        let job = self
            .background
            .then(|| jobs.create(&self.meta.name, "manage", 0));
        match (self.submit(OpKind::Manage, 0, job.clone()).await?, job) {
            (Some(Outcome::Managed(r)), _) => Ok(Submitted::Done(r)),
            (_, Some(job)) => Ok(Submitted::Job(job)),
            _ => Err(ServerError::Closed(self.meta.name.clone())),
        }
    }

    /// Persists a snapshot now, after everything queued before it.
    pub async fn snapshot(&self) -> Result<()> {
        self.submit(OpKind::Snapshot, 0, None).await.map(|_| ())
    }

    /// Renders memory for `query` (concurrently with other reads and with writes).
    pub async fn read(&self, query: &Query) -> Result<Recall> {
        self.substrate.read(query).await.map_err(|e| self.err(e))
    }

    /// A read of `query` with the substrate's trace of `source_ids`
    /// ([`submem_core::Substrate::read_traced`]).
    pub async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<submem_core::ReadTrace>)> {
        self.substrate
            .read_traced(query, source_ids)
            .await
            .map_err(|e| self.err(e))
    }

    /// The live history from the log: every event written and not
    /// forgotten, oldest first (what a fresh substrate would be given).
    pub async fn live_events(&self) -> Result<Arc<Vec<Event>>> {
        let end = self.log.end();
        if let Some((at, events)) = &*self.history.lock().unwrap_or_else(|e| e.into_inner()) {
            if *at == end {
                return Ok(events.clone());
            }
        }
        // Read before the replay: a write landing meanwhile makes the kept
        // history newer than its key, never older, and the next request
        // (seeing a later end) replays again.
        let records = self.log.replay(0).await?;
        let events: Arc<Vec<Event>> = Arc::new(
            crate::log::live_history(records.into_iter().map(|(_, r)| r))
                .into_iter()
                .flat_map(|r| match r {
                    LogRecord::Write { events } => events,
                    LogRecord::Forget { .. } => Vec::new(),
                })
                .collect(),
        );
        *self.history.lock().unwrap_or_else(|e| e.into_inner()) = Some((end, events.clone()));
        Ok(events)
    }

    /// Events stored (written and not forgotten).
    pub async fn event_count(&self) -> usize {
        self.sources.lock().await.len()
    }

    /// Whether `id` is stored.
    pub async fn has_source(&self, id: &str) -> bool {
        self.sources.lock().await.contains(id)
    }

    /// The substrate's size.
    pub fn footprint(&self) -> Footprint {
        self.substrate.footprint()
    }

    /// The meter's counts.
    pub fn meter(&self) -> MeterSnapshot {
        self.substrate.meter().snapshot()
    }

    /// The meter itself.
    pub fn meter_handle(&self) -> &Arc<Meter> {
        self.substrate.meter()
    }

    /// Log bytes, the offset applied to the substrate, and the offset the
    /// newest snapshot covers.
    pub fn offsets(&self) -> (u64, u64, u64) {
        (
            self.log.end(),
            self.offsets.applied.load(Ordering::SeqCst),
            self.offsets.snapshot.load(Ordering::SeqCst),
        )
    }

    fn err(&self, source: submem_core::Error) -> ServerError {
        ServerError::Substrate {
            namespace: self.meta.name.clone(),
            source,
        }
    }
}

fn source_ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.source_id().to_string()).collect()
}

async fn apply_record(ns: &Namespace, s: &Metered, record: LogRecord) -> submem_core::Result<()> {
    match record {
        LogRecord::Write { events } => s.write(ns, &events).await.map(|_| ()),
        LogRecord::Forget { source_ids } => s
            .forget(&Forget::Sources {
                namespace: ns.clone(),
                source_ids,
            })
            .await
            .map(|_| ()),
    }
}

/// The log's tail since the last snapshot.
#[derive(Debug, Default)]
struct Tail {
    records: u64,
    apply_time: Duration,
}

impl Applier {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Op>) {
        let mut tail = Tail::default();
        // A forget was applied and its text is still in the log.
        let mut compaction_due = false;
        while let Some(op) = rx.recv().await {
            self.step(op, &mut tail, &mut compaction_due).await;
            self.offsets.queued.fetch_sub(1, Ordering::SeqCst);
        }
        tracing::debug!(namespace = %self.ns, "applier stopped");
    }

    /// Applies one operation, then compacts or snapshots when due.
    async fn step(&self, op: Op, tail: &mut Tail, compaction_due: &mut bool) {
        {
            if let Some(j) = &op.job {
                self.jobs.start(j);
            }
            let logged = op.end > 0;
            let ids = match &op.kind {
                OpKind::Write(events) => Some(source_ids(events)),
                _ => None,
            };
            // A panicking substrate fails this op, not the namespace; a
            // batch it panicked on is undone like a refused one.
            let started = Instant::now();
            let out = match AssertUnwindSafe(self.apply(op.kind, op.end))
                .catch_unwind()
                .await
            {
                Ok(out) => out,
                Err(_) => {
                    if let Some(ids) = ids {
                        // The write may have stored part of the batch.
                        let forget = Forget::Sources {
                            namespace: self.ns.clone(),
                            source_ids: ids.clone(),
                        };
                        let _ = AssertUnwindSafe(self.substrate.forget(&forget))
                            .catch_unwind()
                            .await;
                        self.undo(ids).await;
                    }
                    Err(ServerError::Internal(format!(
                        "the substrate of namespace {:?} panicked",
                        self.ns.as_str()
                    )))
                }
            };
            if logged {
                tail.records += 1;
                tail.apply_time += started.elapsed();
            }
            *compaction_due |= matches!(out, Ok(Outcome::Forgotten(n)) if n > 0);
            let managed = matches!(out, Ok(Outcome::Managed(_)));
            let snap_now = managed
                || ((tail.records >= self.policy.every_records
                    || tail.apply_time >= self.policy.apply_time)
                    && !matches!(out, Ok(Outcome::Snapshotted)));
            if let Some(j) = &op.job {
                self.jobs
                    .finish(j, out.as_ref().err().map(|e| e.to_string()));
            }
            if matches!(out, Ok(Outcome::Snapshotted)) {
                *tail = Tail::default();
            }
            if let Some(reply) = op.reply {
                let _ = reply.send(out);
            }
            if *compaction_due {
                match self.compact().await {
                    Ok(true) => {
                        *compaction_due = false;
                        *tail = Tail::default();
                        return;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        *compaction_due = false;
                        tracing::error!(namespace = %self.ns, error = %e,
                            "log compaction failed; forgotten text stays in the log until the next forget")
                    }
                }
            }
            if snap_now {
                *tail = Tail::default();
                if let Err(e) = self.snapshot(managed).await {
                    tracing::error!(namespace = %self.ns, error = %e, "snapshot failed; the log still holds every event");
                }
            }
        }
    }

    async fn apply(&self, kind: OpKind, end: u64) -> Result<Outcome> {
        let err = |source| ServerError::Substrate {
            namespace: self.ns.to_string(),
            source,
        };
        let out = match kind {
            OpKind::Write(events) => match self.substrate.write(&self.ns, &events).await {
                Ok(r) => Outcome::Written(r),
                Err(e) => {
                    self.undo(source_ids(&events)).await;
                    return Err(err(e));
                }
            },
            OpKind::Forget(ids) => Outcome::Forgotten(
                self.substrate
                    .forget(&Forget::Sources {
                        namespace: self.ns.clone(),
                        source_ids: ids,
                    })
                    .await
                    .map_err(err)?,
            ),
            OpKind::Manage => Outcome::Managed(self.substrate.manage().await.map_err(err)?),
            OpKind::Snapshot => {
                self.snapshot(false).await?;
                Outcome::Snapshotted
            }
        };
        if end > 0 {
            self.offsets.applied.store(end, Ordering::SeqCst);
        }
        Ok(out)
    }

    /// Logs a forget of a batch the substrate refused, so that a replay
    /// (which may accept it) ends where the live server did.
    async fn undo(&self, ids: Vec<String>) {
        let mut sources = self.sources.lock().await;
        let record = LogRecord::Forget {
            source_ids: ids.clone(),
        };
        match self.log.append(&record).await {
            Ok(_) => {
                for id in &ids {
                    sources.remove(id);
                }
            }
            Err(e) => tracing::error!(namespace = %self.ns, error = %e,
                "cannot log the undo of a refused batch; a restart will replay it"),
        }
    }

    /// Rewrites the log to the live history (no forgotten event, no forget
    /// record) and snapshots the substrate over it, so a forget leaves none
    /// of the forgotten text in the namespace's files. Waits (`false`) while
    /// a logged record is not applied yet, since queued operations carry
    /// offsets of the old log. Snapshots go first: their offsets would name
    /// positions in the old log, and a crash before the new snapshot then
    /// only means a full replay.
    async fn compact(&self) -> Result<bool> {
        let _appends = self.sources.lock().await;
        let end = self.log.end();
        if self.offsets.applied.load(Ordering::SeqCst) != end {
            return Ok(false);
        }
        let records = self.log.replay(0).await?;
        let live = crate::log::live_history(records.into_iter().map(|(_, r)| r));
        self.snapshots.remove_all().await?;
        self.offsets.snapshot.store(0, Ordering::SeqCst);
        let new_end = self.log.rewrite(&live).await?;
        self.offsets.applied.store(new_end, Ordering::SeqCst);
        self.snapshots
            .take(self.substrate.as_ref(), new_end)
            .await?;
        self.offsets.snapshot.store(new_end, Ordering::SeqCst);
        tracing::info!(namespace = %self.ns, from = end, to = new_end, "log compacted after a forget");
        Ok(true)
    }

    /// Persists the substrate unless the newest snapshot already covers
    /// everything applied (`force`: it changed without a record, by manage).
    async fn snapshot(&self, force: bool) -> Result<()> {
        let applied = self.offsets.applied.load(Ordering::SeqCst);
        if !force && applied == self.offsets.snapshot.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.snapshots
            .take(self.substrate.as_ref(), applied)
            .await?;
        self.offsets.snapshot.store(applied, Ordering::SeqCst);
        Ok(())
    }
}
