//! Background jobs: writes (and manage passes) of substrates that call an LLM.
//!
//! Such a write can take minutes (one LLM call per turn or chunk), so the
//! server logs the batch durably, answers `202 Accepted` with a job id at
//! once, and applies the batch in the namespace's order in the background.
//! `GET /v1/jobs/{id}` reports the job's state and progress. A job is visible
//! only to keys whose scope covers its namespace (404 otherwise, as for
//! namespaces). Comparisons build their substrates as jobs too (kind
//! `build`, see [`crate::compare`]): those report events done as they go and
//! can be cancelled (`DELETE /v1/jobs/{id}`). Finished jobs are kept in memory, the newest
//! [`KEEP_FINISHED`], and are lost on restart; the events are not (they are in
//! the log before the job is created, and a restart replays them).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Finished jobs remembered.
pub const KEEP_FINISHED: usize = 10_000;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Logged; waiting behind earlier work of its namespace.
    Queued,
    /// Being applied to the substrate.
    Running,
    /// Applied.
    Done,
    /// The substrate refused or failed; the batch was forgotten again (the
    /// log records that), so the namespace holds none of it.
    Failed,
    /// Cancelled by a client (comparison builds only); what it had built is
    /// dropped.
    Cancelled,
}

/// A job as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// The id.
    pub id: String,
    /// Its namespace.
    pub namespace: String,
    /// `write`, `manage` or `build` (a comparison's substrate).
    pub kind: String,
    /// The substrate a `build` job builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substrate: Option<String>,
    /// Its state.
    pub state: JobState,
    /// Events in the batch (0 for manage).
    pub events: usize,
    /// Events applied so far (all or none: a substrate write is atomic).
    pub events_done: usize,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
    /// End time, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_unix: Option<u64>,
    /// Milliseconds it has run (`build` jobs, updated with their progress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
}

/// Every job of the process.
#[derive(Debug, Default)]
pub struct Jobs {
    next: AtomicU64,
    table: Mutex<(BTreeMap<String, Job>, VecDeque<String>)>,
    /// Cancel flags of unfinished `build` jobs.
    cancels: Mutex<BTreeMap<String, Arc<AtomicBool>>>,
}

/// Why a job could not be cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelRefused {
    /// No such job.
    Unknown,
    /// It is not a comparison build (writes are applied whole or not at all).
    NotABuild(String),
    /// It has already finished.
    Finished(JobState),
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Jobs {
    /// Registers a queued job and returns its id.
    pub fn create(&self, namespace: &str, kind: &str, events: usize) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("job-{n}");
        let job = Job {
            id: id.clone(),
            namespace: namespace.to_string(),
            kind: kind.to_string(),
            substrate: None,
            state: JobState::Queued,
            events,
            events_done: 0,
            error: None,
            created_unix: now(),
            finished_unix: None,
            elapsed_ms: None,
        };
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.0.insert(id.clone(), job);
        id
    }

    /// Registers a running `build` job of `substrate` over `events` events
    /// and returns its id and its cancel flag.
    pub fn create_build(
        &self,
        namespace: &str,
        substrate: &str,
        events: usize,
    ) -> (String, Arc<AtomicBool>) {
        let id = self.create(namespace, "build", events);
        let flag = Arc::new(AtomicBool::new(false));
        self.update(&id, |j| {
            j.substrate = Some(substrate.to_string());
            j.state = JobState::Running;
            j.elapsed_ms = Some(0);
        });
        self.cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), flag.clone());
        (id, flag)
    }

    /// Records a build's progress.
    pub fn progress(&self, id: &str, events_done: usize, elapsed_ms: u64) {
        self.update(id, |j| {
            j.events_done = events_done;
            j.elapsed_ms = Some(elapsed_ms);
        });
    }

    /// Asks the build `id` to stop; it finishes as cancelled at its next
    /// batch.
    pub fn cancel(&self, id: &str) -> Result<Job, CancelRefused> {
        let job = self.get(id).ok_or(CancelRefused::Unknown)?;
        if job.kind != "build" {
            return Err(CancelRefused::NotABuild(job.kind));
        }
        if !matches!(job.state, JobState::Queued | JobState::Running) {
            return Err(CancelRefused::Finished(job.state));
        }
        if let Some(flag) = self
            .cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            flag.store(true, Ordering::SeqCst);
        }
        Ok(job)
    }

    /// Marks the build `id` cancelled.
    pub fn finish_cancelled(&self, id: &str) {
        self.update(id, |j| j.state = JobState::Cancelled);
        self.retire(id);
    }

    /// The job `id`.
    pub fn get(&self, id: &str) -> Option<Job> {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.0.get(id).cloned()
    }

    /// Marks `id` running.
    pub fn start(&self, id: &str) {
        self.update(id, |j| j.state = JobState::Running);
    }

    /// Marks `id` finished: done, or failed with `error`.
    pub fn finish(&self, id: &str, error: Option<String>) {
        self.update(id, |j| {
            j.finished_unix = Some(now());
            match error {
                None => {
                    j.state = JobState::Done;
                    j.events_done = j.events;
                }
                Some(e) => {
                    j.state = JobState::Failed;
                    j.error = Some(e);
                }
            }
        });
        self.retire(id);
    }

    /// Stamps `id`'s end, drops its cancel flag, and forgets the oldest
    /// finished jobs beyond [`KEEP_FINISHED`].
    fn retire(&self, id: &str) {
        self.update(id, |j| {
            j.finished_unix.get_or_insert_with(now);
        });
        self.cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.1.push_back(id.to_string());
        while t.1.len() > KEEP_FINISHED {
            if let Some(old) = t.1.pop_front() {
                t.0.remove(&old);
            }
        }
    }

    /// Jobs not yet finished, by state.
    pub fn pending(&self) -> (usize, usize) {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.0.values().fold((0, 0), |(q, r), j| match j.state {
            JobState::Queued => (q + 1, r),
            JobState::Running => (q, r + 1),
            _ => (q, r),
        })
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Job)) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(j) = t.0.get_mut(id) {
            f(j);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lifecycle() {
        let jobs = Jobs::default();
        let id = jobs.create("ns", "write", 3);
        assert_eq!(jobs.get(&id).unwrap().state, JobState::Queued);
        jobs.start(&id);
        assert_eq!(jobs.pending(), (0, 1));
        jobs.finish(&id, None);
        let j = jobs.get(&id).unwrap();
        assert_eq!((j.state, j.events_done), (JobState::Done, 3));
        let f = jobs.create("ns", "write", 1);
        jobs.finish(&f, Some("boom".into()));
        assert_eq!(jobs.get(&f).unwrap().error.as_deref(), Some("boom"));
        assert_eq!(
            jobs.cancel(&f),
            Err(CancelRefused::NotABuild("write".into()))
        );
        assert_eq!(jobs.cancel("job-99"), Err(CancelRefused::Unknown));
    }

    #[test]
    fn builds_report_progress_and_can_be_cancelled_once() {
        let jobs = Jobs::default();
        let (id, flag) = jobs.create_build("ns", "flexa", 40);
        jobs.progress(&id, 16, 1200);
        let j = jobs.get(&id).unwrap();
        assert_eq!(
            (j.state, j.events_done, j.elapsed_ms, j.substrate.as_deref()),
            (JobState::Running, 16, Some(1200), Some("flexa"))
        );
        assert!(!flag.load(Ordering::SeqCst));
        assert!(jobs.cancel(&id).is_ok());
        assert!(flag.load(Ordering::SeqCst));
        jobs.finish_cancelled(&id);
        let j = jobs.get(&id).unwrap();
        assert_eq!(j.state, JobState::Cancelled);
        assert!(j.finished_unix.is_some());
        assert_eq!(
            jobs.cancel(&id),
            Err(CancelRefused::Finished(JobState::Cancelled))
        );
        assert_eq!(jobs.pending(), (0, 0));
    }
}
