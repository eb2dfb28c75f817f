//! A snapshot directory as one value: substrates persist to a directory, and
//! the PostgreSQL store keeps each snapshot as one `bytea`.
//!
//! Format: the magic `SMSNAP1\0`, then bincode of the files as
//! `(relative path, bytes)` pairs, directories implied. Unpacking refuses
//! any path that is absolute or climbs out (`..`), so a damaged or foreign
//! value cannot write outside the scratch directory.

use std::path::{Component, Path, PathBuf};

use crate::{Result, ServerError};

const MAGIC: &[u8; 8] = b"SMSNAP1\0";

fn bad(dir: &Path, message: String) -> ServerError {
    ServerError::Storage {
        path: dir.to_path_buf(),
        message,
    }
}

/// Every file under `dir` as one value.
pub fn pack(dir: &Path) -> Result<Vec<u8>> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let at = dir.join(&rel);
        for entry in std::fs::read_dir(&at).map_err(|e| ServerError::io(&at, e))? {
            let entry = entry.map_err(|e| ServerError::io(&at, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| ServerError::io(&path, e))?;
            let rel = rel.join(entry.file_name());
            if kind.is_dir() {
                stack.push(rel);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).map_err(|e| ServerError::io(&path, e))?;
                let name = rel
                    .to_str()
                    .ok_or_else(|| bad(dir, format!("file name {rel:?} is not UTF-8")))?
                    .to_string();
                files.push((name, bytes));
            }
        }
    }
    files.sort();
    let mut out = MAGIC.to_vec();
    bincode::serialize_into(&mut out, &files)
        .map_err(|e| bad(dir, format!("cannot pack the snapshot: {e}")))?;
    Ok(out)
}

/// Writes the files of `data` under `dir` (created).
pub fn unpack(data: &[u8], dir: &Path) -> Result<()> {
    let body = data
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| bad(dir, "not a submem snapshot (bad magic)".into()))?;
    let files: Vec<(String, Vec<u8>)> =
        bincode::deserialize(body).map_err(|e| bad(dir, format!("damaged snapshot: {e}")))?;
    std::fs::create_dir_all(dir).map_err(|e| ServerError::io(dir, e))?;
    for (name, bytes) in files {
        let rel = Path::new(&name);
        let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain || name.is_empty() {
            return Err(bad(
                dir,
                format!("snapshot names a path outside itself: {name:?}"),
            ));
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ServerError::io(parent, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| ServerError::io(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_directory_round_trips_and_foreign_values_are_refused() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("index/seg")).unwrap();
        std::fs::write(src.path().join("manifest.json"), b"{\"v\":1}").unwrap();
        std::fs::write(src.path().join("index/seg/a.bin"), [0u8, 1, 2, 255]).unwrap();
        let packed = pack(src.path()).unwrap();
        let dst = tempfile::tempdir().unwrap();
        unpack(&packed, &dst.path().join("out")).unwrap();
        assert_eq!(
            std::fs::read(dst.path().join("out/index/seg/a.bin")).unwrap(),
            vec![0u8, 1, 2, 255]
        );
        assert_eq!(
            std::fs::read(dst.path().join("out/manifest.json")).unwrap(),
            b"{\"v\":1}"
        );

        assert!(unpack(b"garbage", dst.path()).is_err());
        let mut evil = MAGIC.to_vec();
        bincode::serialize_into(&mut evil, &vec![("../escape".to_string(), vec![1u8])]).unwrap();
        let e = unpack(&evil, &dst.path().join("x")).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        assert!(!dst.path().join("escape").exists());
    }
}
