//! Substrate snapshots of a namespace: `persist` into a temporary directory,
//! `fsync`, then an atomic rename to `snap-<offset>-<stamp>`, where `offset`
//! is the log offset the snapshot covers. Older snapshots are removed only
//! after the new one is in place.
//!
//! On open the newest snapshot that restores is used; a torn or refused one
//! (a crash mid-persist leaves only a `.tmp` directory, which is never read)
//! is skipped for the next older, and with none the log is replayed from the
//! start. The log is the source of truth, so no snapshot can lose an
//! acknowledged event: at worst a restart replays more.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use submem_core::Substrate;

use crate::log::sync_dir;
use crate::{Result, ServerError};

const PREFIX: &str = "snap-";

/// The whole snapshots in `dir`, newest first, with the offset each covers.
pub fn list(dir: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let rest = name.strip_prefix(PREFIX)?;
            if rest.ends_with(".tmp") {
                return None;
            }
            let offset = rest.split('-').next()?.parse::<u64>().ok()?;
            Some((offset, name, e.path()))
        })
        .collect();
    // Zero-padded names sort by offset, then by time.
    out.sort_by(|a, b| b.1.cmp(&a.1));
    out.into_iter().map(|(o, _, p)| (o, p)).collect()
}

/// Restores the newest snapshot of `dir` that covers at most `log_end` and
/// restores cleanly; returns the offset it covers (0: none, replay all).
pub async fn restore_newest(dir: &Path, substrate: &dyn Substrate, log_end: u64) -> u64 {
    for (offset, path) in list(dir) {
        if offset > log_end {
            tracing::warn!(snapshot = %path.display(), offset, log_end, "snapshot is ahead of the log; skipped");
            continue;
        }
        match substrate.restore(&path).await {
            Ok(()) => return offset,
            Err(e) => {
                tracing::warn!(snapshot = %path.display(), error = %e, "snapshot refused; trying an older one")
            }
        }
    }
    0
}

/// Persists `substrate` as the snapshot covering `offset`, then removes the
/// older ones.
pub async fn take(dir: &Path, substrate: &dyn Substrate, offset: u64) -> Result<PathBuf> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("{PREFIX}{offset:020}-{stamp:024}");
    let tmp = dir.join(format!("{name}.tmp"));
    let done = dir.join(&name);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| ServerError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| ServerError::io(&tmp, e))?;
    substrate
        .persist(&tmp)
        .await
        .map_err(|source| ServerError::Storage {
            path: tmp.clone(),
            message: source.to_string(),
        })?;
    let sync_tmp = tmp.clone();
    tokio::task::spawn_blocking(move || sync_tree(&sync_tmp))
        .await
        .map_err(|e| ServerError::Storage {
            path: tmp.clone(),
            message: e.to_string(),
        })??;
    std::fs::rename(&tmp, &done).map_err(|e| ServerError::io(&done, e))?;
    sync_dir(dir)?;
    for (_, old) in list(dir).into_iter().filter(|(_, p)| *p != done) {
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(snapshot = %old.display(), error = %e, "cannot remove an old snapshot");
        }
    }
    remove_stale_tmp(dir);
    tracing::debug!(snapshot = %done.display(), offset, "snapshot taken");
    Ok(done)
}

/// Removes every snapshot of `dir` (before the log is rewritten: their
/// offsets would name positions of the old log), durably.
pub fn remove_all(dir: &Path) -> Result<()> {
    for (_, path) in list(dir) {
        std::fs::remove_dir_all(&path).map_err(|e| ServerError::io(&path, e))?;
    }
    sync_dir(dir)
}

/// Removes `.tmp` snapshot directories a crash left behind.
pub fn remove_stale_tmp(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(PREFIX) && name.ends_with(".tmp") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `fsync` of every file and directory under `dir`.
fn sync_tree(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| ServerError::io(dir, e))? {
        let e = e.map_err(|e| ServerError::io(dir, e))?;
        let path = e.path();
        let ft = e.file_type().map_err(|e| ServerError::io(&path, e))?;
        if ft.is_dir() {
            sync_tree(&path)?;
        } else if ft.is_file() {
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| ServerError::io(&path, e))?;
        }
    }
    sync_dir(dir)
}
