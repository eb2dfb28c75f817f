//! The cache of side-by-side comparisons ([`crate::compare`]): substrates
//! built from a namespace's history, kept per (namespace, spec, log end) so
//! that asking again at another budget does not rebuild them. It lives apart
//! from the comparison because the server's state
//! ([`crate::service::AppState`]) holds it and the comparison works on that
//! state.

use std::sync::{Arc, Mutex};

use crate::namespace::Metered;

/// Most built instances kept.
pub const CACHE_ENTRIES: usize = 8;

/// (namespace, substrate spec, log end).
pub(crate) type Key = (String, String, u64);

/// Built substrates by (namespace, spec, log end), oldest first.
#[derive(Default)]
pub struct CompareCache {
    entries: Mutex<Vec<(Key, Arc<Metered>)>>,
    /// Builds under way, by key: their job ids.
    building: Mutex<Vec<(Key, String)>>,
}

impl std::fmt::Debug for CompareCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.lock().map(|e| e.len()).unwrap_or(0);
        f.debug_struct("CompareCache").field("entries", &n).finish()
    }
}

impl CompareCache {
    /// The instance built for `key`, if kept.
    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Metered>> {
        let e = self.entries.lock().ok()?;
        e.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())
    }

    /// Keeps `substrate` for `key`, dropping the oldest beyond
    /// [`CACHE_ENTRIES`].
    pub(crate) fn put(&self, key: Key, substrate: Arc<Metered>) {
        if let Ok(mut e) = self.entries.lock() {
            e.retain(|(k, _)| k != &key);
            e.push((key, substrate));
            while e.len() > CACHE_ENTRIES {
                e.remove(0);
            }
        }
    }

    /// The job building `key`, if one is under way.
    pub(crate) fn building(&self, key: &Key) -> Option<String> {
        let b = self.building.lock().ok()?;
        b.iter().find(|(k, _)| k == key).map(|(_, id)| id.clone())
    }

    /// Records that job `id` builds `key`.
    pub(crate) fn start_building(&self, key: Key, id: String) {
        if let Ok(mut b) = self.building.lock() {
            b.retain(|(k, _)| k != &key);
            b.push((key, id));
        }
    }

    /// Forgets the build of `key` (finished, failed or cancelled).
    pub(crate) fn stop_building(&self, key: &Key) {
        if let Ok(mut b) = self.building.lock() {
            b.retain(|(k, _)| k != key);
        }
    }

    /// How many built instances are kept.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
