//! The append-only event log of a namespace: the source of truth its
//! substrate is rebuilt from.
//!
//! [`EventLog`] is deliberately small (append durably, replay from an offset,
//! say where the end is) so that another store (PostgreSQL for several server
//! nodes) can stand behind it; offsets are opaque, increasing positions.
//!
//! [`FileLog`] frames each record as `length (u32 LE) | CRC-32 (u32 LE) |
//! JSON payload` and calls `fsync` (`sync_data`) before an append returns, so
//! an acknowledged record survives a crash of the process or the machine. A
//! crash mid-append leaves a torn last frame; opening the log detects it (short
//! frame, impossible length or checksum mismatch), truncates the file to the
//! last whole record and says so in the logs. A failed append truncates its
//! own partial frame at once, so later records never follow a torn one.
//!
//! A forget must not leave the forgotten text on disk, so the log can be
//! rewritten whole ([`EventLog::rewrite`], [`live_history`]): the file log
//! writes the new records beside the old file, fsyncs them and renames them
//! over it, so a crash leaves one of the two logs whole, never a mix.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use submem_core::Event;

use crate::{Result, ServerError};

/// Largest record the log accepts (a frame claiming more is torn or foreign).
pub const MAX_RECORD_BYTES: u32 = 256 << 20;

const HEADER: usize = 8;

/// One change to a namespace's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LogRecord {
    /// A batch of events, oldest first.
    Write {
        /// The events.
        events: Vec<Event>,
    },
    /// Source ids forgotten.
    Forget {
        /// The ids.
        source_ids: Vec<String>,
    },
}

/// A durable, append-only sequence of [`LogRecord`]s.
#[async_trait]
pub trait EventLog: std::fmt::Debug + Send + Sync {
    /// Appends `record` and returns once it is durable, with the offset just
    /// after it.
    async fn append(&self, record: &LogRecord) -> Result<u64>;
    /// Every record after offset `from` (0: all), each with the offset just
    /// after it.
    async fn replay(&self, from: u64) -> Result<Vec<(u64, LogRecord)>>;
    /// The offset after the last record.
    fn end(&self) -> u64;
    /// Replaces the whole log with `records` atomically (a crash leaves the
    /// old log or the new one) and returns the new end. Offsets of the old
    /// log mean nothing afterwards; the caller stops appends meanwhile.
    async fn rewrite(&self, records: &[LogRecord]) -> Result<u64>;
}

/// The history `records` leave after their forgets: each write batch without
/// the events a later record forgets (empty batches dropped), in order, and
/// no forget records. Replaying it gives the live history, and none of the
/// forgotten text is in it.
pub fn live_history(records: impl IntoIterator<Item = LogRecord>) -> Vec<LogRecord> {
    use std::collections::HashMap;
    // Where each live source id sits: (batch, position in batch).
    let mut batches: Vec<Vec<Option<Event>>> = Vec::new();
    let mut at: HashMap<String, (usize, usize)> = HashMap::new();
    for record in records {
        match record {
            LogRecord::Write { events } => {
                let b = batches.len();
                for (i, e) in events.iter().enumerate() {
                    at.insert(e.source_id().to_string(), (b, i));
                }
                batches.push(events.into_iter().map(Some).collect());
            }
            LogRecord::Forget { source_ids } => {
                for id in source_ids {
                    if let Some((b, i)) = at.remove(&id) {
                        batches[b][i] = None;
                    }
                }
            }
        }
    }
    batches
        .into_iter()
        .map(|b| b.into_iter().flatten().collect::<Vec<Event>>())
        .filter(|events| !events.is_empty())
        .map(|events| LogRecord::Write { events })
        .collect()
}

/// An [`EventLog`] in one file.
#[derive(Debug, Clone)]
pub struct FileLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    file: Mutex<File>,
    end: AtomicU64,
}

impl FileLog {
    /// Runs `work` on the log off the async runtime (file I/O blocks); a
    /// task that panics or is cancelled is a storage error naming `what`.
    async fn blocking<T: Send + 'static>(
        &self,
        what: &str,
        work: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|e| ServerError::Storage {
                path: self.inner.path.clone(),
                message: format!("{what} task failed: {e}"),
            })?
    }

    /// Opens (or creates) the log at `path`, truncating a torn tail.
    pub fn open(path: &Path) -> Result<Self> {
        // A rewrite that crashed before its rename: the old log is whole.
        let staged = Self::staging_path(path);
        if staged.exists() {
            tracing::warn!(log = %path.display(), "removing an unfinished log rewrite");
            std::fs::remove_file(&staged).map_err(|e| ServerError::io(&staged, e))?;
        }
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| ServerError::io(path, e))?;
        if !existed {
            if let Some(parent) = path.parent() {
                sync_dir(parent)?;
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| ServerError::io(path, e))?;
        let (records, good) = scan(&bytes, 0);
        if (good as usize) < bytes.len() {
            tracing::warn!(
                log = %path.display(),
                records = records.len(),
                dropped_bytes = bytes.len() - good as usize,
                "event log has a torn tail (a crash mid-append); truncating it to the last whole record"
            );
            file.set_len(good).map_err(|e| ServerError::io(path, e))?;
            file.sync_all().map_err(|e| ServerError::io(path, e))?;
        }
        Ok(FileLog {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                file: Mutex::new(file),
                end: AtomicU64::new(good),
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Where a rewrite is staged before it is renamed over the log.
    fn staging_path(path: &Path) -> PathBuf {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".rewrite");
        path.with_file_name(name)
    }
}

/// Whole records of `bytes` from `start`, and the offset after the last one.
fn scan(bytes: &[u8], start: u64) -> (Vec<(u64, LogRecord)>, u64) {
    let mut out = Vec::new();
    let mut at = start as usize;
    while bytes.len() >= at + HEADER {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let crc = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        if len == 0 || len > MAX_RECORD_BYTES {
            break;
        }
        let body_end = at + HEADER + len as usize;
        if bytes.len() < body_end {
            break;
        }
        let body = &bytes[at + HEADER..body_end];
        if crc32fast::hash(body) != crc {
            break;
        }
        match serde_json::from_slice::<LogRecord>(body) {
            Ok(r) => out.push((body_end as u64, r)),
            Err(_) => break,
        }
        at = body_end;
    }
    (out, at as u64)
}

fn frame(record: &LogRecord) -> Result<Vec<u8>> {
    let body = serde_json::to_vec(record).map_err(|e| ServerError::BadRequest(e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| *l <= MAX_RECORD_BYTES)
        .ok_or_else(|| ServerError::TooLarge(format!("log record of {} bytes", body.len())))?;
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// `fsync` of a directory, so that a created or renamed entry is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ServerError::io(dir, e))
}

impl Inner {
    fn append_blocking(&self, bytes: &[u8]) -> Result<u64> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.end.load(Ordering::SeqCst);
        let written = file.write_all(bytes).and_then(|_| file.sync_data());
        if let Err(e) = written {
            // Never leave a partial frame for later records to follow.
            let _ = file.set_len(before);
            return Err(ServerError::io(&self.path, e));
        }
        let end = before + bytes.len() as u64;
        self.end.store(end, Ordering::SeqCst);
        Ok(end)
    }

    fn rewrite_blocking(&self, bytes: &[u8]) -> Result<u64> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let staged = FileLog::staging_path(&self.path);
        let io = |p: &Path, e| ServerError::io(p, e);
        {
            let mut f = File::create(&staged).map_err(|e| io(&staged, e))?;
            f.write_all(bytes)
                .and_then(|_| f.sync_all())
                .map_err(|e| io(&staged, e))?;
        }
        std::fs::rename(&staged, &self.path).map_err(|e| io(&self.path, e))?;
        if let Some(parent) = self.path.parent() {
            sync_dir(parent)?;
        }
        *file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io(&self.path, e))?;
        let end = bytes.len() as u64;
        self.end.store(end, Ordering::SeqCst);
        Ok(end)
    }

    fn replay_blocking(&self, from: u64) -> Result<Vec<(u64, LogRecord)>> {
        // The end and the file are taken together under the writer's lock: a
        // rewrite renames a shorter log over the path and then lowers the
        // end, so an end read before it with a file opened after it would
        // ask for bytes the new file does not have. The open file keeps
        // what it was opened on; appends after the lock only grow it.
        let (mut f, end) = {
            let _writer = self.file.lock().unwrap_or_else(|e| e.into_inner());
            let end = self.end.load(Ordering::SeqCst);
            if from >= end {
                return Ok(Vec::new());
            }
            let f = File::open(&self.path).map_err(|e| ServerError::io(&self.path, e))?;
            (f, end)
        };
        f.seek(SeekFrom::Start(from))
            .map_err(|e| ServerError::io(&self.path, e))?;
        let mut bytes = vec![0u8; (end - from) as usize];
        f.read_exact(&mut bytes)
            .map_err(|e| ServerError::io(&self.path, e))?;
        let (records, good) = scan(&bytes, 0);
        if good != end - from {
            return Err(ServerError::CorruptLog {
                path: self.path.clone(),
                message: format!(
                    "no whole record at offset {} (replay from {from}); the offset does not start a record",
                    from + good
                ),
            });
        }
        Ok(records.into_iter().map(|(o, r)| (o + from, r)).collect())
    }
}

#[async_trait]
impl EventLog for FileLog {
    async fn append(&self, record: &LogRecord) -> Result<u64> {
        let bytes = frame(record)?;
        self.blocking("append", move |inner| inner.append_blocking(&bytes))
            .await
    }

    async fn replay(&self, from: u64) -> Result<Vec<(u64, LogRecord)>> {
        self.blocking("replay", move |inner| inner.replay_blocking(from))
            .await
    }

    fn end(&self) -> u64 {
        self.inner.end.load(Ordering::SeqCst)
    }

    async fn rewrite(&self, records: &[LogRecord]) -> Result<u64> {
        let mut bytes = Vec::new();
        for r in records {
            bytes.extend_from_slice(&frame(r)?);
        }
        self.blocking("rewrite", move |inner| inner.rewrite_blocking(&bytes))
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use submem_core::Turn;

    fn write(id: &str) -> LogRecord {
        LogRecord::Write {
            events: vec![Event::Turn(Turn {
                session_id: "s".into(),
                session_date: None,
                speaker: "A".into(),
                text: format!("text of {id} é 🦀"),
                source_id: id.into(),
            })],
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replays_concurrent_with_rewrites_read_one_whole_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = std::sync::Arc::new(FileLog::open(&dir.path().join("events.log")).unwrap());
        let long: Vec<LogRecord> = (0..40).map(|i| write(&format!("long{i}"))).collect();
        let short = vec![write("short")];
        log.rewrite(&long).await.unwrap();
        let rewriter = {
            let log = log.clone();
            tokio::spawn(async move {
                for i in 0..300 {
                    let records = if i % 2 == 0 { &short } else { &long };
                    log.rewrite(records).await.unwrap();
                }
            })
        };
        let mut replays = 0;
        while !rewriter.is_finished() {
            let records = log.replay(0).await.unwrap();
            assert!(
                records.len() == 1 || records.len() == 40,
                "{}",
                records.len()
            );
            replays += 1;
        }
        rewriter.await.unwrap();
        assert!(replays > 0);
    }

    #[tokio::test]
    async fn appends_replay_and_a_torn_tail_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.log");
        let log = FileLog::open(&path).unwrap();
        let a = log.append(&write("a")).await.unwrap();
        let b = log
            .append(&LogRecord::Forget {
                source_ids: vec!["a".into()],
            })
            .await
            .unwrap();
        let c = log.append(&write("c")).await.unwrap();
        assert_eq!(log.replay(0).await.unwrap().len(), 3);
        let tail = log.replay(b).await.unwrap();
        assert_eq!(tail, vec![(c, write("c"))]);
        assert!(log.replay(a + 1).await.is_err(), "mid-record offset");
        drop(log);

        // A torn last frame (a crash mid-append) is dropped on open, and
        // appends continue after the last whole record.
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        drop(f);
        let log = FileLog::open(&path).unwrap();
        assert_eq!(log.end(), b);
        let d = log.append(&write("d")).await.unwrap();
        let all = log.replay(0).await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2], (d, write("d")));

        // A flipped byte in the last record fails its checksum.
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 2] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        let log = FileLog::open(&path).unwrap();
        assert_eq!(log.end(), b);
    }

    #[test]
    fn live_history_drops_forgotten_events_and_forget_records() {
        let batch = |ids: &[&str]| LogRecord::Write {
            events: ids
                .iter()
                .flat_map(|id| match write(id) {
                    LogRecord::Write { events } => events,
                    LogRecord::Forget { .. } => Vec::new(),
                })
                .collect(),
        };
        let forget = |ids: &[&str]| LogRecord::Forget {
            source_ids: ids.iter().map(|s| s.to_string()).collect(),
        };
        let live = live_history(vec![
            batch(&["a", "b"]),
            forget(&["a", "zz"]),
            batch(&["c"]),
            forget(&["c"]),
            batch(&["d", "e"]),
        ]);
        assert_eq!(live, vec![batch(&["b"]), batch(&["d", "e"])]);
    }

    #[tokio::test]
    async fn a_rewrite_replaces_the_log_whole_and_appends_follow_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.log");
        let log = FileLog::open(&path).unwrap();
        log.append(&write("secret")).await.unwrap();
        log.append(&write("kept")).await.unwrap();
        log.append(&LogRecord::Forget {
            source_ids: vec!["secret".into()],
        })
        .await
        .unwrap();
        let live = live_history(log.replay(0).await.unwrap().into_iter().map(|(_, r)| r));
        let end = log.rewrite(&live).await.unwrap();
        assert_eq!(end, std::fs::metadata(&path).unwrap().len());
        let more = log.append(&write("after")).await.unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("secret"));
        drop(log);
        let log = FileLog::open(&path).unwrap();
        assert_eq!(log.end(), more);
        let all: Vec<LogRecord> = log
            .replay(0)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        assert_eq!(all, vec![write("kept"), write("after")]);

        // A rewrite that crashed before its rename leaves the old log whole.
        std::fs::write(dir.path().join("events.log.rewrite"), b"partial").unwrap();
        drop(log);
        let log = FileLog::open(&path).unwrap();
        assert_eq!(log.replay(0).await.unwrap().len(), 2);
        assert!(!dir.path().join("events.log.rewrite").exists());
    }
}
