//! The embedded default store: one directory per namespace.
//!
//! ```text
//! DIR/namespaces/<sha256 of the name>/meta.json     name, substrate spec (written atomically)
//! DIR/namespaces/<sha256 of the name>/events.log    the append-only event log
//! DIR/namespaces/<sha256 of the name>/snap-<offset>-<stamp>/   the newest substrate snapshot
//! DIR/trash/                                         deleted namespaces, removed in the background
//! ```
//!
//! A namespace is created in a temporary directory and renamed into place,
//! so a crash never leaves one without its metadata. Directory names are
//! hashes because a namespace name may be 256 bytes of any script, and
//! because they let a request find its namespace's files without listing
//! the directory.

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use submem_core::Substrate;

use super::{Backend, NamespaceMeta, NamespaceStorage, OpenOutcome, SnapshotStore, SoleOwner};
use crate::config::hash_key;
use crate::log::{sync_dir, FileLog};
use crate::{snapshot, Result, ServerError};

/// What a crash left in a data directory, claimed before the first request:
/// creations cut short (`namespaces/.<hash>.tmp`, which the rename never
/// moved into place) are moved into the trash, and the trash's entries as
/// they are now are returned for removal. The removal then never shares a
/// path with a request that comes after: a create of the same name stages
/// in a fresh `.tmp`, a delete moves into a new, uniquely named trash entry
/// (sweeping the directories instead raced both: a namespace created just
/// after a start lost its staging directory). Best effort: what cannot be
/// listed is left for the next start.
fn claim_leftovers(spaces: &Path, trash: &Path) -> Vec<PathBuf> {
    let staged: Vec<(String, PathBuf)> = entries(spaces)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, _)| name.starts_with('.') && name.ends_with(".tmp"))
        .collect();
    for (name, path) in staged {
        let target = trash.join(format!("{}-{}", name.trim_matches('.'), now_nanos()));
        let moved = std::fs::create_dir_all(trash).and_then(|()| std::fs::rename(&path, &target));
        if moved.is_err() {
            // Not movable: removed now, before a create can reuse the path.
            let _ = std::fs::remove_dir_all(&path);
        }
    }
    entries(trash).map(|e| e.path()).collect()
}

/// The readable entries of `dir`; none when it cannot be listed.
fn entries(dir: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
}

/// Namespaces in a data directory.
#[derive(Debug)]
pub struct FileBackend {
    root: PathBuf,
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A namespace's log file, under its directory.
const LOG_FILE: &str = "events.log";

/// The namespace's metadata, with the time its log last changed (the log
/// file's modification time: appends and rewrites both set it).
fn read_meta(dir: &Path) -> Result<NamespaceMeta> {
    let path = dir.join("meta.json");
    let mut meta: NamespaceMeta =
        submem::persist::read_json(&path).map_err(|e| ServerError::Storage {
            path,
            message: e.to_string(),
        })?;
    meta.last_write_unix = std::fs::metadata(dir.join(LOG_FILE))
        .ok()
        .filter(|m| m.len() > 0)
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    Ok(meta)
}

impl FileBackend {
    /// Opens (or creates) the data directory `root`. Leftovers of a crash
    /// (deleted namespaces not yet removed, creations cut short) are
    /// removed in the background: the server answers at once whatever
    /// their size.
    pub fn open(root: &Path) -> Result<Self> {
        let spaces = root.join("namespaces");
        std::fs::create_dir_all(&spaces).map_err(|e| ServerError::io(&spaces, e))?;
        let leftovers = claim_leftovers(&spaces, &root.join("trash"));
        if !leftovers.is_empty() {
            std::thread::spawn(move || {
                for path in leftovers {
                    if let Err(e) = std::fs::remove_dir_all(&path) {
                        tracing::warn!(dir = %path.display(), error = %e, "cannot remove a crash's leftover");
                    }
                }
            });
        }
        Ok(FileBackend {
            root: root.to_path_buf(),
        })
    }

    fn spaces(&self) -> PathBuf {
        self.root.join("namespaces")
    }

    fn dir_of(&self, name: &str) -> PathBuf {
        self.spaces().join(hash_key(name))
    }

    fn list_blocking(spaces: &Path) -> Result<Vec<NamespaceMeta>> {
        let entries = std::fs::read_dir(spaces).map_err(|e| ServerError::io(spaces, e))?;
        let mut out = Vec::new();
        for e in entries.filter_map(|e| e.ok()) {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match read_meta(&e.path()) {
                Ok(m) => out.push(m),
                Err(err) => {
                    tracing::error!(dir = %e.path().display(), error = %err, "namespace without readable metadata")
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

async fn blocking<T: Send + 'static>(
    what: &Path,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServerError::Storage {
            path: what.to_path_buf(),
            message: format!("storage task failed: {e}"),
        })?
}

#[async_trait]
impl Backend for FileBackend {
    fn kind(&self) -> &'static str {
        "file"
    }

    async fn list(&self) -> Result<Vec<NamespaceMeta>> {
        let spaces = self.spaces();
        blocking(&spaces.clone(), move || Self::list_blocking(&spaces)).await
    }

    async fn meta(&self, name: &str) -> Result<Option<NamespaceMeta>> {
        let dir = self.dir_of(name);
        let name = name.to_string();
        blocking(&dir.clone(), move || {
            if !dir.join("meta.json").exists() {
                return Ok(None);
            }
            let meta = read_meta(&dir)?;
            // A hash collision would be a SHA-256 collision; checked anyway.
            Ok((meta.name == name).then_some(meta))
        })
        .await
    }

    async fn count(&self) -> Result<usize> {
        let spaces = self.spaces();
        blocking(&spaces.clone(), move || {
            let entries = std::fs::read_dir(&spaces).map_err(|e| ServerError::io(&spaces, e))?;
            Ok(entries
                .filter_map(|e| e.ok())
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count())
        })
        .await
    }

    async fn create(&self, meta: &NamespaceMeta) -> Result<()> {
        let dir = self.dir_of(&meta.name);
        let parent = self.spaces();
        let tmp = parent.join(format!(".{}.tmp", hash_key(&meta.name)));
        let meta = meta.clone();
        blocking(&dir.clone(), move || {
            if dir.exists() {
                return Err(ServerError::NamespaceExists(meta.name.clone()));
            }
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(&tmp).map_err(|e| ServerError::io(&tmp, e))?;
            submem::persist::write_json(&tmp.join("meta.json"), &meta).map_err(|e| {
                ServerError::Storage {
                    path: tmp.clone(),
                    message: e.to_string(),
                }
            })?;
            sync_dir(&tmp)?;
            // Renaming over an existing (non-empty) directory fails: two
            // creates of one name cannot both succeed.
            if let Err(e) = std::fs::rename(&tmp, &dir) {
                let _ = std::fs::remove_dir_all(&tmp);
                if dir.exists() {
                    return Err(ServerError::NamespaceExists(meta.name.clone()));
                }
                return Err(ServerError::io(&dir, e));
            }
            sync_dir(&parent)
        })
        .await
    }

    async fn delete(&self, name: &str) -> Result<bool> {
        let dir = self.dir_of(name);
        let trash = self.root.join("trash");
        let spaces = self.spaces();
        let target = trash.join(format!("{}-{}", hash_key(name), now_nanos()));
        let moved = blocking(&dir.clone(), move || {
            if !dir.exists() {
                return Ok(None);
            }
            std::fs::create_dir_all(&trash).map_err(|e| ServerError::io(&trash, e))?;
            std::fs::rename(&dir, &target).map_err(|e| ServerError::io(&target, e))?;
            sync_dir(&spaces)?;
            Ok(Some(target))
        })
        .await?;
        let Some(target) = moved else {
            return Ok(false);
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = std::fs::remove_dir_all(&target) {
                tracing::warn!(dir = %target.display(), error = %e, "cannot remove a deleted namespace's files");
            }
        });
        Ok(true)
    }

    async fn open(&self, meta: &NamespaceMeta) -> Result<OpenOutcome> {
        let dir = self.dir_of(&meta.name);
        let log_path = dir.join(LOG_FILE);
        let (log, dir) = blocking(&dir.clone(), move || {
            snapshot::remove_stale_staging(&dir);
            Ok((FileLog::open(&log_path)?, dir))
        })
        .await?;
        Ok(OpenOutcome::Opened(NamespaceStorage {
            log: Arc::new(log),
            snapshots: Arc::new(FileSnapshots { dir }),
            lease: Arc::new(SoleOwner),
        }))
    }

    async fn ready(&self) -> Result<()> {
        let spaces = self.spaces();
        if spaces.is_dir() {
            Ok(())
        } else {
            Err(ServerError::Storage {
                path: spaces,
                message: "the data directory is gone".into(),
            })
        }
    }
}

/// Snapshot directories beside a namespace's log (see [`crate::snapshot`]).
#[derive(Debug)]
pub struct FileSnapshots {
    dir: PathBuf,
}

#[async_trait]
impl SnapshotStore for FileSnapshots {
    async fn restore_newest(&self, substrate: &dyn Substrate, log_end: u64) -> Result<u64> {
        Ok(snapshot::restore_newest(&self.dir, substrate, log_end).await)
    }

    async fn take(&self, substrate: &dyn Substrate, offset: u64) -> Result<()> {
        snapshot::take(&self.dir, substrate, offset)
            .await
            .map(|_| ())
    }

    async fn remove_all(&self) -> Result<()> {
        snapshot::remove_all(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn meta(name: &str) -> NamespaceMeta {
        NamespaceMeta {
            name: name.into(),
            substrate: "m2".into(),
            created_unix: 1,
            last_write_unix: None,
        }
    }

    /// A crash's leftovers are claimed before `open` returns, so a create
    /// of the name whose creation the crash cut short, and a delete, both
    /// made at once after a start, keep their files; the leftovers go.
    #[tokio::test]
    async fn a_start_claims_a_crashs_leftovers_before_any_request() {
        let root = tempfile::tempdir().unwrap();
        let spaces = root.path().join("namespaces");
        let staged = spaces.join(format!(".{}.tmp", hash_key("alice")));
        std::fs::create_dir_all(&staged).unwrap();
        std::fs::write(staged.join("meta.json"), "{").unwrap();
        let deleted = root.path().join("trash").join("old-1");
        std::fs::create_dir_all(&deleted).unwrap();
        std::fs::write(deleted.join("events.log"), "x").unwrap();

        let store = FileBackend::open(root.path()).unwrap();
        assert!(
            !staged.exists(),
            "the cut-short creation is claimed by open"
        );
        store.create(&meta("alice")).await.unwrap();
        store.create(&meta("bob")).await.unwrap();
        assert!(store.delete("bob").await.unwrap());
        let names: Vec<String> = store
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["alice"]);

        // The background removal ends; nothing it removes is the store's.
        let trash = root.path().join("trash");
        for _ in 0..500 {
            if std::fs::read_dir(&trash).unwrap().next().is_none() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(std::fs::read_dir(&trash).unwrap().count(), 0);
        assert_eq!(store.list().await.unwrap().len(), 1);
    }
}
