//! Substrate snapshots of a namespace: `persist` into a hidden staging
//! directory, `fsync`, then an atomic rename to `snap-<offset>-<stamp>`
//! (`submem_kit::dir::Staged::commit_durably`), where `offset` is the log
//! offset the snapshot covers. Older snapshots are removed only after the
//! new one is in place.
//!
//! On open the newest snapshot that restores is used; a torn or refused one
//! (a crash mid-persist leaves only a hidden staging directory, which is
//! never read) is skipped for the next older, and with none the log is replayed from the
//! start. The log is the source of truth, so no snapshot can lose an
//! acknowledged event: at worst a restart replays more.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use submem_core::Substrate;

use submem::kit::dir::{is_staging_name, Staged};

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
    let done = dir.join(format!("{PREFIX}{offset:020}-{stamp:024}"));
    let storage = |path: &Path, message: String| ServerError::Storage {
        path: path.to_path_buf(),
        message,
    };
    // A hidden staging directory beside `done`, removed if the persist fails.
    let staged = Staged::new(&done).map_err(|e| storage(dir, e.to_string()))?;
    substrate
        .persist(staged.path())
        .await
        .map_err(|e| storage(staged.path(), e.to_string()))?;
    let target = done.clone();
    tokio::task::spawn_blocking(move || staged.commit_durably())
        .await
        .map_err(|e| storage(&target, e.to_string()))?
        .map_err(|e| storage(&target, e.to_string()))?;
    for (_, old) in list(dir).into_iter().filter(|(_, p)| *p != done) {
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(snapshot = %old.display(), error = %e, "cannot remove an old snapshot");
        }
    }
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

/// Removes the staging directories a crash mid-snapshot left (and the
/// `snap-*.tmp` ones of versions before snapshots were staged by the kit).
pub fn remove_stale_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        let old_style = name.starts_with(PREFIX) && name.ends_with(".tmp");
        if old_style || is_staging_name(&name, PREFIX) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
