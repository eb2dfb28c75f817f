//! Helpers for persisted substrate state: a manifest that names the substrate
//! and format version (so a foreign or torn directory gives a clear error
//! instead of a silently empty memory) and atomic file writes (write to a
//! temporary file, fsync, rename), so a crash never leaves a half-written file
//! in place of a good one.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use submem_core::{Embedder, Error, Namespace, Result};

/// Name of the manifest file inside a persisted directory.
pub const MANIFEST_FILE: &str = "submem-manifest.json";

/// What a persisted directory holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The substrate that wrote it (method id and name, e.g. `M2 sparse-bm25`).
    pub substrate: String,
    /// Format version of that substrate's files.
    pub format_version: u32,
}

/// Writes `bytes` to `path` atomically: a temporary sibling is written and
/// synced, then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tmp_sibling(path);
    let mut f = fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(())
}

fn tmp_sibling(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Serialises `value` as JSON into `path` atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec(value).map_err(|source| Error::Serde {
        what: path.display().to_string(),
        source,
    })?;
    write_atomic(path, &bytes)
}

/// Reads JSON from `path`; a missing file is a [`Error::Store`] error.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::store(path, "file is missing (torn or foreign store?)")
        } else {
            Error::io(path, e)
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::store(path, format!("corrupt JSON: {e}")))
}

/// Creates `dir` and writes its manifest. Call it **last** when persisting, so
/// a crash midway leaves a directory without a manifest, which
/// [`check_manifest`] rejects.
pub fn write_manifest(dir: &Path, substrate: &str, format_version: u32) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_json(
        &dir.join(MANIFEST_FILE),
        &Manifest {
            substrate: substrate.to_string(),
            format_version,
        },
    )
}

/// Prepares `dir` for a new persist: creates it and removes an old manifest, so
/// a crash before [`write_manifest`] leaves the directory marked as torn.
pub fn begin_persist(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let manifest = dir.join(MANIFEST_FILE);
    match fs::remove_file(&manifest) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(manifest, e)),
    }
}

/// Checks that `dir` holds a complete store written by `substrate` in
/// `format_version`.
pub fn check_manifest(dir: &Path, substrate: &str, format_version: u32) -> Result<()> {
    check_manifest_of(dir, substrate, &[format_version]).map(|_| ())
}

/// Checks that `dir` holds a complete store written by `substrate` in one
/// of the `accepted` format versions, and returns that version (for a
/// substrate that still reads an older form besides its newest).
pub fn check_manifest_of(dir: &Path, substrate: &str, accepted: &[u32]) -> Result<u32> {
    ensure(dir, dir.is_dir(), || "directory does not exist".into())?;
    let path = dir.join(MANIFEST_FILE);
    ensure(dir, path.exists(), || {
        format!("no {MANIFEST_FILE}: not a submem store, or a persist was interrupted")
    })?;
    let m: Manifest = read_json(&path)?;
    ensure(dir, m.substrate == substrate, || {
        format!(
            "store was written by {:?}, expected {substrate:?}",
            m.substrate
        )
    })?;
    let expected = accepted
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" or ");
    ensure(dir, accepted.contains(&m.format_version), || {
        format!(
            "format version {} is not supported (expected {expected})",
            m.format_version
        )
    })?;
    Ok(m.format_version)
}

/// Fails with a store error on `path` saying `why` unless `ok`: the one
/// shape of every check a restore makes before it changes anything.
pub fn ensure(path: &Path, ok: bool, why: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::store(path, why()))
    }
}

/// The per-namespace states of a substrate kept as one JSON state file,
/// tagged with the embedder that made their vectors.
///
/// Most substrates persist this way: a snapshot under their lock, one state
/// file, then the manifest ([`save_states`]); on restore the manifest is
/// checked, the file read ([`load_states`]), the embedder compared
/// ([`NamespaceStates::require_embedder`]) and every namespace validated
/// ([`NamespaceStates::validated`]) before the live state is swapped.
///
/// ```
/// use submem_kit::persist::{load_states, save_states, NamespaceStates};
/// use submem_core::Namespace;
///
/// let dir = tempfile::tempdir().unwrap();
/// let alice = Namespace::new("alice").unwrap();
/// let states = NamespaceStates::new(None, [(alice.clone(), vec![1u32, 2, 3])]);
/// let bytes = save_states(dir.path(), "M0 example", 1, "state.json", &states).unwrap();
/// assert!(bytes > 0);
///
/// let loaded = load_states::<Vec<u32>>(dir.path(), "M0 example", 1, "state.json").unwrap();
/// let restored = loaded.states.validated(&loaded.path, |_, v| {
///     if v.is_empty() { Err("empty".to_string()) } else { Ok(()) }
/// }).unwrap();
/// assert_eq!(restored, vec![(alice, vec![1, 2, 3])]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespaceStates<T> {
    /// Name of the embedder that made the stored vectors (empty: none stored).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub embedder: String,
    /// Length of those vectors (0: none stored, or not recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dimension: usize,
    /// Every namespace's state, sorted by namespace.
    pub namespaces: Vec<(Namespace, T)>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl<T> NamespaceStates<T> {
    /// A snapshot of `namespaces`, sorted by name so the file is stable,
    /// tagged with `embedder` when the states hold its vectors.
    pub fn new(
        embedder: Option<&dyn Embedder>,
        namespaces: impl IntoIterator<Item = (Namespace, T)>,
    ) -> Self {
        let mut namespaces: Vec<(Namespace, T)> = namespaces.into_iter().collect();
        namespaces.sort_by(|a, b| a.0.cmp(&b.0));
        Self {
            embedder: embedder.map(|e| e.name().to_string()).unwrap_or_default(),
            dimension: embedder.map_or(0, |e| e.dimension()),
            namespaces,
        }
    }

    /// Fails unless the stored vectors came from an embedder of the same name
    /// and dimension as `embedder` (vectors from another model are not
    /// comparable, so restoring them would silently ruin every read).
    pub fn require_embedder(&self, path: &Path, embedder: &dyn Embedder) -> Result<()> {
        let (name, dim) = (embedder.name(), embedder.dimension());
        ensure(path, self.embedder == name && self.dimension == dim, || {
            format!(
                "vectors were made by {} ({} dims); this instance embeds with {name} ({dim} dims)",
                self.embedder, self.dimension
            )
        })
    }

    /// Runs `check` on every namespace's state (rebuilding indexes it does
    /// not persist, checking invariants) and refuses a namespace that appears
    /// twice; the error names the file and the namespace.
    pub fn validated(
        self,
        path: &Path,
        mut check: impl FnMut(&Namespace, &mut T) -> std::result::Result<(), String>,
    ) -> Result<Vec<(Namespace, T)>> {
        let mut seen = HashSet::with_capacity(self.namespaces.len());
        let mut out = Vec::with_capacity(self.namespaces.len());
        for (ns, mut state) in self.namespaces {
            if !seen.insert(ns.clone()) {
                return Err(Error::store(path, format!("namespace {ns} appears twice")));
            }
            check(&ns, &mut state)
                .map_err(|reason| Error::store(path, format!("namespace {ns}: {reason}")))?;
            out.push((ns, state));
        }
        Ok(out)
    }
}

/// Persists `states` into `dir` as the state file `file`, manifest last (see
/// [`begin_persist`]); returns the state file's size in bytes.
pub fn save_states<T: Serialize>(
    dir: &Path,
    substrate: &str,
    format_version: u32,
    file: &str,
    states: &NamespaceStates<T>,
) -> Result<u64> {
    begin_persist(dir)?;
    let path = dir.join(file);
    write_json(&path, states)?;
    write_manifest(dir, substrate, format_version)?;
    Ok(fs::metadata(&path).map(|m| m.len()).unwrap_or(0))
}

/// What [`load_states`] read.
#[derive(Debug)]
pub struct LoadedStates<T> {
    /// The states, not yet validated.
    pub states: NamespaceStates<T>,
    /// The state file they came from (for error messages).
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

impl<T> LoadedStates<T> {
    /// The validated states ([`NamespaceStates::validated`]), after checking
    /// that their vectors came from `embedder` when one is given
    /// ([`NamespaceStates::require_embedder`]).
    pub fn validated(
        self,
        embedder: Option<&dyn Embedder>,
        check: impl FnMut(&Namespace, &mut T) -> std::result::Result<(), String>,
    ) -> Result<Vec<(Namespace, T)>> {
        if let Some(e) = embedder {
            self.states.require_embedder(&self.path, e)?;
        }
        self.states.validated(&self.path, check)
    }
}

/// Checks the manifest of `dir` and reads its state file `file`.
pub fn load_states<T: DeserializeOwned>(
    dir: &Path,
    substrate: &str,
    format_version: u32,
    file: &str,
) -> Result<LoadedStates<T>> {
    check_manifest(dir, substrate, format_version)?;
    let path = dir.join(file);
    let states = read_json(&path)?;
    let bytes = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    Ok(LoadedStates {
        states,
        path,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_rejections() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("store");
        assert!(check_manifest(&d, "M1", 1).is_err());
        write_manifest(&d, "M1", 1).unwrap();
        check_manifest(&d, "M1", 1).unwrap();
        let err = check_manifest(&d, "M2", 1).unwrap_err().to_string();
        assert!(err.contains("expected \"M2\""), "{err}");
        assert!(check_manifest(&d, "M1", 2).is_err());
        begin_persist(&d).unwrap();
        let err = check_manifest(&d, "M1", 1).unwrap_err().to_string();
        assert!(err.contains("interrupted"), "{err}");
    }

    #[test]
    fn corrupt_json_is_a_store_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        fs::write(&p, b"{not json").unwrap();
        let err = read_json::<Manifest>(&p).unwrap_err();
        assert!(matches!(err, Error::Store { .. }));
    }
    #[test]
    fn states_round_trip_and_refuse_duplicates_and_bad_states() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Namespace::new("a").unwrap(), Namespace::new("b").unwrap());
        let states = NamespaceStates::new(None, [(b.clone(), 2u32), (a.clone(), 1)]);
        assert_eq!(states.namespaces[0].0, a, "snapshots are sorted");
        save_states(dir.path(), "M0", 1, "s.json", &states).unwrap();
        let loaded = load_states::<u32>(dir.path(), "M0", 1, "s.json").unwrap();
        assert_eq!(loaded.states, states);
        let err = loaded
            .states
            .validated(&loaded.path, |_, v| {
                if *v == 2 {
                    Err("bad".into())
                } else {
                    Ok(())
                }
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("namespace b: bad"), "{err}");

        let twice = NamespaceStates {
            embedder: String::new(),
            dimension: 0,
            namespaces: vec![(a.clone(), 1u32), (a, 1)],
        };
        let err = twice
            .validated(Path::new("s.json"), |_, _| Ok(()))
            .unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
        assert!(load_states::<u32>(dir.path(), "M9", 1, "s.json").is_err());
    }
}
