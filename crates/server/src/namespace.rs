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
//! forget of its ids, so a replay ends in the same state. Every
//! `snapshot_every` applied records, and after each manage pass, the applier
//! persists the substrate (see [`crate::snapshot`]); a restart restores the
//! newest whole snapshot and replays the log after the offset it covers.

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

use submem_core::{Event, Footprint, Forget, ManageReport, Meter, MeterSnapshot, Query, Recall};
use submem_core::{MeteredSubstrate, Namespace, Substrate, WriteReport};

use crate::jobs::Jobs;
use crate::log::{EventLog, FileLog, LogRecord};
use crate::snapshot;
use crate::{Result, ServerError};

/// The metered substrate of a namespace.
pub type Metered = MeteredSubstrate<Arc<dyn Substrate>>;

/// What is stored about a namespace besides its log and snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceMeta {
    /// The namespace's name.
    pub name: String,
    /// The substrate spec it was created with (`m2`, `flexa:rho=0.2`).
    pub substrate: String,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
}

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
    dir: PathBuf,
    substrate: Arc<Metered>,
    log: Arc<dyn EventLog>,
    sources: Arc<Mutex<HashSet<String>>>,
    offsets: Arc<Offsets>,
    ops: mpsc::UnboundedSender<Op>,
}

/// Everything the applier task owns.
struct Applier {
    ns: Namespace,
    dir: PathBuf,
    substrate: Arc<Metered>,
    log: Arc<dyn EventLog>,
    sources: Arc<Mutex<HashSet<String>>>,
    offsets: Arc<Offsets>,
    jobs: Arc<Jobs>,
    snapshot_every: u64,
}

impl NamespaceHandle {
    /// Opens the namespace stored in `dir` with a freshly built `substrate`:
    /// restores the newest whole snapshot, replays the log after it, and
    /// starts the applier.
    pub async fn open(
        dir: &Path,
        meta: NamespaceMeta,
        substrate: Arc<Metered>,
        background: bool,
        jobs: Arc<Jobs>,
        snapshot_every: u64,
    ) -> Result<Arc<Self>> {
        let ns = Namespace::new(meta.name.clone())
            .map_err(|e| ServerError::BadRequest(e.to_string()))?;
        let log: Arc<dyn EventLog> = Arc::new(FileLog::open(&dir.join("events.log"))?);
        let covered = snapshot::restore_newest(dir, substrate.as_ref(), log.end()).await;
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
        tracing::info!(namespace = %ns, snapshot = covered, replayed, events = sources.len(), "namespace opened");
        let offsets = Arc::new(Offsets {
            applied: AtomicU64::new(end),
            snapshot: AtomicU64::new(covered),
        });
        let sources = Arc::new(Mutex::new(sources));
        let (tx, rx) = mpsc::unbounded_channel();
        let applier = Applier {
            ns: ns.clone(),
            dir: dir.to_path_buf(),
            substrate: substrate.clone(),
            log: log.clone(),
            sources: sources.clone(),
            offsets: offsets.clone(),
            jobs,
            snapshot_every,
        };
        tokio::spawn(applier.run(rx));
        Ok(Arc::new(NamespaceHandle {
            meta,
            ns,
            background,
            dir: dir.to_path_buf(),
            substrate,
            log,
            sources,
            offsets,
            ops: tx,
        }))
    }

    /// The directory holding the namespace's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn send(&self, op: Op) -> Result<()> {
        self.ops
            .send(op)
            .map_err(|_| ServerError::Closed(self.meta.name.clone()))
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

    /// The substrate's trace of `query` for `source_ids`.
    pub async fn trace(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<Option<submem_core::ReadTrace>> {
        self.substrate
            .trace(query, source_ids)
            .await
            .map_err(|e| self.err(e))
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

impl Applier {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Op>) {
        let mut since_snapshot = 0u64;
        // A forget was applied and its text is still in the log.
        let mut compaction_due = false;
        while let Some(op) = rx.recv().await {
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
                since_snapshot += 1;
            }
            compaction_due |= matches!(out, Ok(Outcome::Forgotten(n)) if n > 0);
            let managed = matches!(out, Ok(Outcome::Managed(_)));
            let snap_now = managed
                || (since_snapshot >= self.snapshot_every
                    && !matches!(out, Ok(Outcome::Snapshotted)));
            if let Some(j) = &op.job {
                self.jobs
                    .finish(j, out.as_ref().err().map(|e| e.to_string()));
            }
            if matches!(out, Ok(Outcome::Snapshotted)) {
                since_snapshot = 0;
            }
            if let Some(reply) = op.reply {
                let _ = reply.send(out);
            }
            if compaction_due {
                match self.compact().await {
                    Ok(true) => {
                        compaction_due = false;
                        since_snapshot = 0;
                        continue;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        compaction_due = false;
                        tracing::error!(namespace = %self.ns, error = %e,
                            "log compaction failed; forgotten text stays in the log until the next forget")
                    }
                }
            }
            if snap_now {
                since_snapshot = 0;
                if let Err(e) = self.snapshot(managed).await {
                    tracing::error!(namespace = %self.ns, error = %e, "snapshot failed; the log still holds every event");
                }
            }
        }
        tracing::debug!(namespace = %self.ns, "applier stopped");
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
        snapshot::remove_all(&self.dir)?;
        self.offsets.snapshot.store(0, Ordering::SeqCst);
        let new_end = self.log.rewrite(&live).await?;
        self.offsets.applied.store(new_end, Ordering::SeqCst);
        snapshot::take(&self.dir, self.substrate.as_ref(), new_end).await?;
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
        snapshot::take(&self.dir, self.substrate.as_ref(), applied).await?;
        self.offsets.snapshot.store(applied, Ordering::SeqCst);
        Ok(())
    }
}
