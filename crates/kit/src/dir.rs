//! Replacing a directory whole: a substrate's saved state, a bench run's
//! kept memory or a Python `Memory.save` is written into a staging
//! directory beside its target and swapped in only once complete, so a
//! reader of the target never sees a torn copy.
//!
//! [`Staged::commit`] moves the old target aside (to [`aside_path`]),
//! renames the staging directory into place and removes the old copy. A
//! crash leaves the target whole, old or new, except between those two
//! renames, when the old copy waits at [`aside_path`] (and a loader can say
//! so). A [`Staged`] dropped without a commit (the write failed) removes
//! its staging directory. [`Staged::commit_durably`] also survives a power
//! cut: every file and directory written is flushed to disk before the
//! swap, and the parent directory after it (the server's snapshots need
//! that; a bench run's kept memory does not).
//!
//! ```
//! # fn main() -> submem_core::Result<()> {
//! use submem_kit::dir::Staged;
//! let root = tempfile::tempdir().map_err(|e| submem_core::Error::io("tmp", e))?;
//! let target = root.path().join("memory");
//! let staged = Staged::new(&target)?;
//! std::fs::write(staged.path().join("state.json"), "{}")
//!     .map_err(|e| submem_core::Error::io(staged.path(), e))?;
//! staged.commit()?;
//! assert!(target.join("state.json").is_file());
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};

use submem_core::{Error, Result};

/// Where [`Staged::commit`] moves the old target while it swaps the new one
/// in: `<target>.old`.
pub fn aside_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    target.with_file_name(name)
}

/// A directory being written to replace `target` (see the module docs).
#[derive(Debug)]
pub struct Staged {
    dir: tempfile::TempDir,
    target: PathBuf,
}

impl Staged {
    /// A fresh, empty staging directory beside `target` (its parent is
    /// created if missing), hidden by a leading dot.
    pub fn new(target: &Path) -> Result<Self> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{name}.staging-"))
            .tempdir_in(&parent)
            .map_err(|e| Error::io(&parent, e))?;
        Ok(Staged {
            dir,
            target: target.to_path_buf(),
        })
    }

    /// The staging directory to write into.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// [`commit`](Self::commit) after flushing every file and directory
    /// written to disk, then flushes the parent directory so that the swap
    /// itself is on disk when this returns.
    pub fn commit_durably(self) -> Result<()> {
        sync_tree(self.path())?;
        let parent = self.dir.path().parent().map(Path::to_path_buf);
        self.commit()?;
        match parent {
            Some(parent) => sync_dir(&parent),
            None => Ok(()),
        }
    }

    /// Swaps the staging directory in as the target: the old target moved
    /// aside, the new one renamed into place, the old one removed.
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        let staged = self.dir.keep();
        if target.exists() {
            let old = aside_path(&target);
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
            }
            std::fs::rename(&target, &old).map_err(|e| Error::io(&target, e))?;
            std::fs::rename(&staged, &target).map_err(|e| Error::io(&target, e))?;
            // The swap is done: an old copy that cannot be removed is only
            // space, and the next commit removes it first.
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&staged, &target).map_err(|e| Error::io(&target, e))?;
        }
        Ok(())
    }
}

/// Whether `name` is a staging directory [`Staged::new`] made for a target
/// whose name starts with `prefix` (for sweeping what a crash left).
pub fn is_staging_name(name: &str, prefix: &str) -> bool {
    name.strip_prefix('.')
        .is_some_and(|rest| rest.starts_with(prefix) && rest.contains(".staging-"))
}

/// Flushes every file below `dir` and every directory, `dir` included, to
/// disk.
pub fn sync_tree(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    sync_dir(dir)
}

/// Flushes a directory's entries (names added, renamed or removed) to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_target_whole_and_leaves_nothing_beside_it() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("mem");
        for round in ["first", "second"] {
            let staged = Staged::new(&target).unwrap();
            std::fs::write(staged.path().join(format!("{round}.json")), round).unwrap();
            staged.commit().unwrap();
            assert_eq!(entries(&target), vec![format!("{round}.json")]);
        }
        assert_eq!(entries(root.path()), vec!["mem"]);
    }

    #[test]
    fn an_uncommitted_write_leaves_the_old_target_and_no_staging() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("mem");
        let staged = Staged::new(&target).unwrap();
        std::fs::write(staged.path().join("a"), "old").unwrap();
        staged.commit().unwrap();
        {
            let staged = Staged::new(&target).unwrap();
            std::fs::write(staged.path().join("b"), "torn").unwrap();
            // The write failed: dropped without a commit.
        }
        assert_eq!(entries(&target), vec!["a"]);
        assert_eq!(entries(root.path()), vec!["mem"]);
    }

    #[test]
    fn a_durable_commit_to_a_new_name_leaves_only_the_target() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("snap-7");
        let staged = Staged::new(&target).unwrap();
        let name = staged
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(is_staging_name(&name, "snap-"), "{name}");
        assert!(!is_staging_name("snap-7", "snap-") && !is_staging_name(&name, "mem"));
        std::fs::create_dir_all(staged.path().join("inner")).unwrap();
        std::fs::write(staged.path().join("inner/state.json"), "{}").unwrap();
        staged.commit_durably().unwrap();
        assert_eq!(entries(&target.join("inner")), vec!["state.json"]);
        assert_eq!(entries(root.path()), vec!["snap-7"]);
    }

    #[test]
    fn a_stale_aside_copy_does_not_block_the_next_commit() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("mem");
        std::fs::create_dir_all(aside_path(&target)).unwrap();
        std::fs::create_dir_all(&target).unwrap();
        let staged = Staged::new(&target).unwrap();
        std::fs::write(staged.path().join("new"), "x").unwrap();
        staged.commit().unwrap();
        assert_eq!(entries(&target), vec!["new"]);
        assert_eq!(aside_path(&target), root.path().join("mem.old"));
        assert!(!aside_path(&target).exists());
    }
}
