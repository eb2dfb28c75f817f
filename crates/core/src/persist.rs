//! Helpers for persisted substrate state: a manifest that names the substrate
//! and format version (so a foreign or torn directory gives a clear error
//! instead of a silently empty memory) and atomic file writes (write to a
//! temporary file, fsync, rename), so a crash never leaves a half-written file
//! in place of a good one.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

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
    if !dir.is_dir() {
        return Err(Error::store(dir, "directory does not exist"));
    }
    let path = dir.join(MANIFEST_FILE);
    if !path.exists() {
        return Err(Error::store(
            dir,
            format!("no {MANIFEST_FILE}: not a submem store, or a persist was interrupted"),
        ));
    }
    let m: Manifest = read_json(&path)?;
    if m.substrate != substrate {
        return Err(Error::store(
            dir,
            format!(
                "store was written by {:?}, expected {substrate:?}",
                m.substrate
            ),
        ));
    }
    if m.format_version != format_version {
        return Err(Error::store(
            dir,
            format!(
                "format version {} is not supported (expected {format_version})",
                m.format_version
            ),
        ));
    }
    Ok(())
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
}
