//! On-disk form of the sparse substrate: a real tantivy index under `index/`
//! (written fresh from the side map into `index.tmp/`, then renamed into
//! place), `sparse.json` with every namespace's units and next position, and
//! the manifest, written last.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use submem_core::{Error, Namespace, Result};
use submem_kit::persist::{
    begin_persist, check_manifest, ensure, read_json, write_json, write_manifest,
};
use submem_kit::text::StopWords;

use super::config::SparseConfig;
use super::index::{Backing, TantivyIndex};
use super::SparseNs;
use crate::unit::{dir_bytes, StoredUnit};

/// Manifest name of this store.
pub(crate) const MANIFEST_NAME: &str = "M2 sparse-bm25";
/// Format version of the files below.
pub(crate) const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "sparse.json";
const INDEX_DIR: &str = "index";
const INDEX_TMP_DIR: &str = "index.tmp";

#[derive(Serialize, Deserialize)]
struct State {
    namespaces: Vec<NsState>,
    /// The stop words the index was built with; stores written before the
    /// setting existed used Lucene's list.
    #[serde(default = "lucene")]
    stop_words: StopWords,
}

fn lucene() -> StopWords {
    StopWords::Lucene
}

#[derive(Serialize, Deserialize)]
struct NsState {
    namespace: Namespace,
    next_position: u64,
    units: Vec<StoredUnit>,
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn remove_dir_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes the index and side map under `dir`; returns the bytes on disk.
pub(crate) fn save(
    dir: &Path,
    cfg: &SparseConfig,
    index: &TantivyIndex,
    spaces: &HashMap<Namespace, SparseNs>,
) -> Result<u64> {
    begin_persist(dir)?;
    let target = dir.join(INDEX_DIR);
    // A restored index that has not changed since is already what we would
    // write; rewriting it would delete the files it is mmapped from.
    let unchanged = matches!(index.backing(), Backing::Mmap(p) if same_dir(p, &target));
    if !unchanged {
        let tmp = dir.join(INDEX_TMP_DIR);
        remove_dir_if_exists(&tmp)?;
        let mut names: Vec<&Namespace> = spaces.keys().collect();
        names.sort();
        let docs = names
            .into_iter()
            .flat_map(|ns| spaces[ns].units.values().map(move |u| (ns.as_str(), u)));
        TantivyIndex::create_on_disk(&tmp, cfg, docs)
            .map_err(|e| e.into_core(super::METHOD, "persist"))?;
        remove_dir_if_exists(&target)?;
        std::fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e))?;
    }
    let mut namespaces: Vec<NsState> = spaces
        .iter()
        .map(|(ns, s)| NsState {
            namespace: ns.clone(),
            next_position: s.next_position,
            units: s.units.values().cloned().collect(),
        })
        .collect();
    namespaces.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    write_json(
        &dir.join(STATE_FILE),
        &State {
            namespaces,
            stop_words: cfg.stop_words,
        },
    )?;
    write_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
    Ok(dir_bytes(dir))
}

/// Saved namespaces: name, next position, units.
pub(crate) type Saved = Vec<(Namespace, u64, Vec<StoredUnit>)>;

/// Opens what [`save`] wrote: the index mmapped read-only, and the side map.
/// An index built with other stop words than `cfg`'s is rebuilt in RAM from
/// the side map, so its terms match what reads search for.
pub(crate) fn load(dir: &Path, cfg: &SparseConfig) -> Result<(TantivyIndex, Saved, u64)> {
    check_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
    let state: State = read_json(&dir.join(STATE_FILE))?;
    let path = dir.join(INDEX_DIR);
    ensure(&path, path.is_dir(), || {
        "index directory is missing (torn store?)".into()
    })?;
    let index = TantivyIndex::open_mmap(&path, cfg)
        .map_err(|e| Error::store(&path, format!("cannot open the tantivy index: {e}")))?;
    let units: u64 = state.namespaces.iter().map(|n| n.units.len() as u64).sum();
    ensure(&path, index.num_docs() == units, || {
        format!(
            "index holds {} documents but {STATE_FILE} lists {units} units",
            index.num_docs()
        )
    })?;
    let index = if state.stop_words == cfg.stop_words {
        index
    } else {
        tracing::info!(
            saved = ?state.stop_words,
            now = ?cfg.stop_words,
            "the stored index used other stop words: re-indexing it in RAM"
        );
        let mut ram =
            TantivyIndex::new_ram(cfg).map_err(|e| e.into_core(super::METHOD, "restore"))?;
        ram.add(
            state
                .namespaces
                .iter()
                .flat_map(|n| n.units.iter().map(move |u| (n.namespace.as_str(), u))),
        )
        .map_err(|e| e.into_core(super::METHOD, "restore"))?;
        ram
    };
    let saved = state
        .namespaces
        .into_iter()
        .map(|n| (n.namespace, n.next_position, n.units))
        .collect();
    Ok((index, saved, dir_bytes(dir)))
}
