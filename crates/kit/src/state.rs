//! Persisting a per-namespace state map: the `persist`/`restore` steps that
//! every substrate keeping a `HashMap<Namespace, T>` repeats.
//!
//! A [`StateFile`] names the store (manifest name, format version, state file)
//! once; [`StateFile::save`] snapshots the map while its lock is held and
//! writes it after the lock is released; [`StateFile::load`] reads, checks and
//! validates the file before anything live is touched, and
//! [`StateFile::restore`] then swaps it in. The bytes on disk are exactly
//! those of [`crate::persist::save_states`].
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::{atomic::AtomicU64, RwLock};
//! use submem_core::Namespace;
//! use submem_kit::state::StateFile;
//!
//! const FILE: StateFile = StateFile::new("M0 example", 1, "example.json");
//! let dir = tempfile::tempdir().unwrap();
//! let (spaces, disk) = (RwLock::new(HashMap::new()), AtomicU64::new(0));
//! spaces.write().unwrap().insert(Namespace::new("alice").unwrap(), vec![1u32]);
//! FILE.save(dir.path(), None, spaces.read().unwrap(), &disk).unwrap();
//!
//! let copy: RwLock<HashMap<Namespace, Vec<u32>>> = RwLock::default();
//! FILE.restore(dir.path(), None, |_, _| Ok(()), || Ok(copy.write().unwrap()), &disk)
//!     .unwrap();
//! assert_eq!(*copy.read().unwrap(), *spaces.read().unwrap());
//! ```

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::persist::{load_states, save_states, NamespaceStates};
use serde::de::DeserializeOwned;
use serde::Serialize;
use submem_core::{Embedder, Namespace, Result};

/// Where and how a substrate persists its namespace map: the manifest's
/// substrate name and format version, and the state file's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateFile {
    /// The manifest's substrate name (checked on restore).
    pub substrate: &'static str,
    /// The manifest's format version (checked on restore).
    pub format_version: u32,
    /// The state file's name inside the persist directory.
    pub file: &'static str,
}

impl StateFile {
    /// A store named `substrate`, at `format_version`, kept in `file`.
    pub const fn new(substrate: &'static str, format_version: u32, file: &'static str) -> Self {
        Self {
            substrate,
            format_version,
            file,
        }
    }

    /// Snapshots the map behind `spaces` (a lock guard, released as soon as
    /// the snapshot is taken), tags it with `embedder` when the states hold
    /// its vectors, persists it into `dir` and records the file's size in
    /// `disk_bytes`.
    pub fn save<T, G>(
        &self,
        dir: &Path,
        embedder: Option<&dyn Embedder>,
        spaces: G,
        disk_bytes: &AtomicU64,
    ) -> Result<()>
    where
        T: Clone + Serialize,
        G: Deref<Target = HashMap<Namespace, T>>,
    {
        let saved =
            NamespaceStates::new(embedder, spaces.iter().map(|(k, v)| (k.clone(), v.clone())));
        drop(spaces);
        let bytes = save_states(dir, self.substrate, self.format_version, self.file, &saved)?;
        disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the state file of `dir` after checking its manifest, requires
    /// its vectors to come from `embedder` when one is given, and runs
    /// `check` on every namespace's state; returns the map and the file's
    /// size in bytes. Nothing live is touched.
    pub fn load<T, M>(
        &self,
        dir: &Path,
        embedder: Option<&dyn Embedder>,
        check: impl FnMut(&Namespace, &mut T) -> std::result::Result<(), String>,
    ) -> Result<(M, u64)>
    where
        T: DeserializeOwned,
        M: FromIterator<(Namespace, T)>,
    {
        let loaded = load_states::<T>(dir, self.substrate, self.format_version, self.file)?;
        let bytes = loaded.bytes;
        let restored = loaded.validated(embedder, check)?;
        Ok((restored.into_iter().collect(), bytes))
    }

    /// [`StateFile::load`], then takes the lock with `lock` and replaces the
    /// live map, recording the file's size in `disk_bytes`. A refused
    /// directory leaves the live map as it was (the lock is not even taken).
    pub fn restore<T, M, G>(
        &self,
        dir: &Path,
        embedder: Option<&dyn Embedder>,
        check: impl FnMut(&Namespace, &mut T) -> std::result::Result<(), String>,
        lock: impl FnOnce() -> Result<G>,
        disk_bytes: &AtomicU64,
    ) -> Result<()>
    where
        T: DeserializeOwned,
        M: FromIterator<(Namespace, T)>,
        G: DerefMut<Target = M>,
    {
        let (restored, bytes) = self.load(dir, embedder, check)?;
        *lock()? = restored;
        disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::RwLock;

    const FILE: StateFile = StateFile::new("M0 test", 3, "test-state.json");

    fn ns(name: &str) -> Namespace {
        Namespace::new(name).unwrap()
    }

    #[test]
    fn save_writes_what_save_states_writes_and_restore_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let mut map = HashMap::new();
        map.insert(ns("bob"), vec![2u32]);
        map.insert(ns("alice"), vec![1u32, 1]);
        let disk = AtomicU64::new(0);
        FILE.save(dir.path(), None, &map, &disk).unwrap();

        let plain = tempfile::tempdir().unwrap();
        let states = NamespaceStates::new(None, map.clone());
        save_states(plain.path(), "M0 test", 3, "test-state.json", &states).unwrap();
        let read = |d: &Path| std::fs::read(d.join("test-state.json")).unwrap();
        assert_eq!(read(dir.path()), read(plain.path()));
        assert_eq!(disk.load(Ordering::Relaxed), read(dir.path()).len() as u64);

        let live: RwLock<HashMap<Namespace, Vec<u32>>> = RwLock::default();
        let disk2 = AtomicU64::new(0);
        FILE.restore(
            dir.path(),
            None,
            |_, _| Ok(()),
            || Ok(live.write().unwrap()),
            &disk2,
        )
        .unwrap();
        assert_eq!(*live.read().unwrap(), map);
        assert_eq!(disk2.load(Ordering::Relaxed), disk.load(Ordering::Relaxed));
    }

    #[test]
    fn a_refused_restore_leaves_the_live_map_alone() {
        let dir = tempfile::tempdir().unwrap();
        let map = HashMap::from([(ns("alice"), vec![0u32])]);
        FILE.save(dir.path(), None, &map, &AtomicU64::new(0))
            .unwrap();

        let live = RwLock::new(HashMap::from([(ns("carol"), vec![9u32])]));
        let disk = AtomicU64::new(7);
        let err = FILE
            .restore(
                dir.path(),
                None,
                |_, v: &mut Vec<u32>| match v.first() {
                    Some(0) => Err("zero".to_string()),
                    _ => Ok(()),
                },
                || Ok(live.write().unwrap()),
                &disk,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("namespace alice: zero"), "{err}");
        assert!(live.read().unwrap().contains_key(&ns("carol")));
        assert_eq!(disk.load(Ordering::Relaxed), 7);

        let other = StateFile::new("M1 other", 3, "test-state.json");
        let loaded = other.load::<Vec<u32>, HashMap<_, _>>(dir.path(), None, |_, _| Ok(()));
        assert!(loaded.is_err());
    }
}
