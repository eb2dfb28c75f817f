//! Each namespace's state behind one lock: the map every substrate keeps,
//! with locks that survive poisoning, footprint totals and save/restore.
//!
//! Substrates keep a `HashMap<Namespace, T>` behind an `RwLock`, a counter of
//! the bytes their last persist wrote, and the same `persist`/`restore`
//! steps; [`Spaces`] is that, written once. Its locks never fail: every
//! change a substrate makes to its state is made whole after its checks, by
//! steps that cannot panic, so a lock poisoned by a panic elsewhere (a
//! caller's task, a test) still guards a consistent state and is used as is
//! ([`read()`], [`write()`] and [`lock()`] do the same for any other lock).
//!
//! ```
//! use submem_core::{Footprint, Namespace};
//! use submem_kit::spaces::Spaces;
//! use submem_kit::state::StateFile;
//!
//! const FILE: StateFile = StateFile::new("M0 example", 1, "example.json");
//! let spaces: Spaces<Vec<String>> = Spaces::new();
//! let alice = Namespace::new("alice")?;
//! spaces.write().entry(alice.clone()).or_default().push("Ana moved to Oslo.".into());
//!
//! let dir = tempfile::tempdir().unwrap();
//! spaces.save(&FILE, dir.path(), None)?;
//! let copy: Spaces<Vec<String>> = Spaces::new();
//! copy.restore(&FILE, dir.path(), None, |_, notes| {
//!     if notes.is_empty() { Err("a namespace without notes".to_string()) } else { Ok(()) }
//! })?;
//! assert_eq!(copy.read()[&alice].len(), 1);
//! let footprint = copy.footprint(|_, notes| Footprint {
//!     memory_bytes: notes.iter().map(|n| n.len() as u64).sum(),
//!     ..Footprint::default()
//! });
//! assert_eq!(footprint.memory_bytes, 18);
//! assert!(footprint.disk_bytes > 0, "the restored file's size");
//! # Ok::<(), submem_core::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::de::DeserializeOwned;
use serde::Serialize;
use submem_core::{Embedder, Footprint, Namespace, Result};

use crate::state::StateFile;

/// Read-locks `lock`, taking over a poisoned one (see the module docs for
/// why that is sound for substrate state).
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Write-locks `lock`, taking over a poisoned one (see [`read`]).
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// Locks `mutex`, taking over a poisoned one (see [`read`]).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Each namespace's state `T`, with the size of the last persisted file.
pub struct Spaces<T> {
    map: RwLock<HashMap<Namespace, T>>,
    disk_bytes: AtomicU64,
}

impl<T> Default for Spaces<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Spaces<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spaces")
            .field("namespaces", &self.read().len())
            .field("disk_bytes", &self.disk_bytes())
            .finish()
    }
}

impl<T> Spaces<T> {
    /// No namespace yet.
    pub fn new() -> Self {
        Spaces {
            map: RwLock::new(HashMap::new()),
            disk_bytes: AtomicU64::new(0),
        }
    }

    /// The map, read-locked.
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<Namespace, T>> {
        read(&self.map)
    }

    /// The map, write-locked.
    pub fn write(&self) -> RwLockWriteGuard<'_, HashMap<Namespace, T>> {
        write(&self.map)
    }

    /// Bytes of the state file last saved or restored (0 before either).
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes.load(Ordering::Relaxed)
    }

    /// Records the size of a state file the substrate persisted or restored
    /// in a format of its own (what [`footprint`](Self::footprint) reports as
    /// disk bytes); [`save`](Self::save) and [`restore`](Self::restore)
    /// record theirs themselves.
    pub fn set_disk_bytes(&self, bytes: u64) {
        self.disk_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Drops a namespace's state; returns it if there was one.
    pub fn remove(&self, namespace: &Namespace) -> Option<T> {
        self.write().remove(namespace)
    }

    /// The sum of `measure` over every namespace (its name and state), with
    /// [`disk_bytes`](Self::disk_bytes) as the disk figure.
    pub fn footprint(&self, measure: impl Fn(&Namespace, &T) -> Footprint) -> Footprint {
        let mut total = self
            .read()
            .iter()
            .map(|(ns, state)| measure(ns, state))
            .fold(Footprint::default(), |a, b| Footprint {
                memory_bytes: a.memory_bytes + b.memory_bytes,
                disk_bytes: 0,
                stored_tokens: a.stored_tokens + b.stored_tokens,
                input_tokens: a.input_tokens + b.input_tokens,
            });
        total.disk_bytes = self.disk_bytes();
        total
    }

    /// Persists every namespace's state into `dir` as `file` describes (the
    /// lock is held only while the map is copied), tagged with `embedder`
    /// when the states hold its vectors.
    pub fn save(&self, file: &StateFile, dir: &Path, embedder: Option<&dyn Embedder>) -> Result<()>
    where
        T: Clone + Serialize,
    {
        file.save(dir, embedder, self.read(), &self.disk_bytes)
    }

    /// Replaces every namespace's state with those persisted in `dir`, after
    /// checking the manifest, the embedder (when given) and each state with
    /// `check` (which may also rebuild what is not persisted). A refused
    /// directory leaves the live state as it was.
    pub fn restore<E: fmt::Display>(
        &self,
        file: &StateFile,
        dir: &Path,
        embedder: Option<&dyn Embedder>,
        mut check: impl FnMut(&Namespace, &mut T) -> std::result::Result<(), E>,
    ) -> Result<()>
    where
        T: DeserializeOwned,
    {
        file.restore(
            dir,
            embedder,
            |ns, state: &mut T| check(ns, state).map_err(|e| e.to_string()),
            || Ok(self.write()),
            &self.disk_bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_lock_is_taken_over() {
        let spaces = Arc::new(Spaces::<u32>::new());
        let ns = Namespace::new("n").unwrap();
        spaces.write().insert(ns.clone(), 1);
        let poisoner = spaces.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.write();
            panic!("poison the lock");
        })
        .join();
        assert!(spaces.map.is_poisoned());
        assert_eq!(spaces.read()[&ns], 1);
        spaces.write().insert(ns.clone(), 2);
        assert_eq!(spaces.remove(&ns), Some(2));
    }

    #[test]
    fn a_poisoned_mutex_is_taken_over() {
        let mutex = Arc::new(Mutex::new(1u32));
        let poisoner = mutex.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock();
            panic!("poison the mutex");
        })
        .join();
        assert!(mutex.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 2);
    }

    #[test]
    fn disk_bytes_set_by_hand_are_the_footprints() {
        let spaces = Spaces::<u32>::new();
        spaces.set_disk_bytes(42);
        assert_eq!(spaces.disk_bytes(), 42);
        assert_eq!(spaces.footprint(|_, _| Footprint::default()).disk_bytes, 42);
    }

    #[test]
    fn a_refused_restore_keeps_the_live_state() {
        const FILE: StateFile = StateFile::new("M0 test", 1, "t.json");
        let spaces = Spaces::<Vec<u32>>::new();
        let ns = Namespace::new("n").unwrap();
        spaces.write().insert(ns.clone(), vec![1, 2]);
        let dir = tempfile::tempdir().unwrap();
        spaces.save(&FILE, dir.path(), None).unwrap();
        let saved_bytes = spaces.disk_bytes();
        assert!(saved_bytes > 0);
        spaces.write().insert(ns.clone(), vec![3]);
        let err = spaces
            .restore(&FILE, dir.path(), None, |_, v: &mut Vec<u32>| {
                if v.len() > 1 {
                    Err(format!("{} values", v.len()))
                } else {
                    Ok(())
                }
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 values"), "{err}");
        assert_eq!(spaces.read()[&ns], vec![3]);
        spaces
            .restore(&FILE, dir.path(), None, |_, _| Ok::<_, String>(()))
            .unwrap();
        assert_eq!(spaces.read()[&ns], vec![1, 2]);
        let fp = spaces.footprint(|_, v| Footprint {
            stored_tokens: v.len() as u64,
            ..Footprint::default()
        });
        assert_eq!((fp.stored_tokens, fp.disk_bytes), (2, saved_bytes));
    }
}
