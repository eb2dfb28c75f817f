//! On-disk form of the dense substrate: `dense.json` (dimension, embedder
//! name, and per namespace its units, tombstones, next position and the
//! record of its index files), one `vectors-N.f32` file of little-endian
//! `f32` rows per namespace, hnsw_rs's two dump files `graph-N.hnsw.{graph,data}`
//! for each namespace with a graph, `partitions-N.ivf` for each namespace
//! with partitions (see [`Partitions::to_bytes`]), and the manifest, written
//! last.
//!
//! A store with partitions is format 3; one without stays format 2, which
//! earlier releases read (format 3 they refuse with a clear error instead of
//! scanning a million units exactly).

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, RwLock};
use submem_core::{Error, Namespace, Result};
use submem_kit::persist::{
    begin_persist, check_manifest_of, ensure, read_json, write_atomic, write_json, write_manifest,
};

use super::graph::{check_recorded, digest, is_graph_file, Graph, GraphFiles};
use super::ns::{DenseNs, Index};
use super::partitions::Partitions;
use crate::unit::{dir_bytes, StoredUnit};
use submem_kit::spaces;

/// Manifest name of this store.
pub(crate) const MANIFEST_NAME: &str = "M1 dense-hnsw";
/// Format version of a store with partitions.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// Format version of a store without (as earlier releases wrote it).
const FORMAT_WITHOUT_PARTITIONS: u32 = 2;
const STATE_FILE: &str = "dense.json";

#[derive(Serialize, Deserialize)]
struct State {
    dimension: usize,
    embedder: String,
    namespaces: Vec<NsState>,
}

#[derive(Serialize, Deserialize)]
struct NsState {
    namespace: Namespace,
    next_position: u64,
    graph: Option<GraphFiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partitions: Option<PartitionFile>,
    vector_file: String,
    units: Vec<StoredUnit>,
    alive: Vec<bool>,
}

/// A saved partitioned index and what it must contain.
#[derive(Serialize, Deserialize)]
struct PartitionFile {
    file: String,
    bytes: u64,
    sha256: String,
}

/// Writes every namespace under `dir`; returns the bytes on disk.
pub(crate) fn save(
    dir: &Path,
    dim: usize,
    embedder: &str,
    spaces: &[(Namespace, Arc<RwLock<DenseNs>>)],
) -> Result<u64> {
    begin_persist(dir)?;
    remove_old_files(dir)?;
    let mut state = State {
        dimension: dim,
        embedder: embedder.to_string(),
        namespaces: Vec::with_capacity(spaces.len()),
    };
    for (i, (name, space)) in spaces.iter().enumerate() {
        let ns = spaces::read(space);
        let vector_file = format!("vectors-{i}.f32");
        let mut bytes = Vec::with_capacity(ns.vectors.len() * 4);
        for x in &ns.vectors {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        write_atomic(&dir.join(&vector_file), &bytes)?;
        let graph = ns.save_graph(dir, &format!("graph-{i}"))?;
        let partitions = match ns.partitions() {
            Some(p) => {
                let file = format!("partitions-{i}.ivf");
                let path = dir.join(&file);
                write_atomic(&path, &p.to_bytes())?;
                let (bytes, sha256) = digest(&path)?;
                Some(PartitionFile {
                    file,
                    bytes,
                    sha256,
                })
            }
            None => None,
        };
        state.namespaces.push(NsState {
            namespace: name.clone(),
            next_position: ns.next_position,
            graph,
            partitions,
            vector_file,
            units: ns.units.clone(),
            alive: ns.alive.clone(),
        });
    }
    write_json(&dir.join(STATE_FILE), &state)?;
    let version = if state.namespaces.iter().any(|n| n.partitions.is_some()) {
        FORMAT_VERSION
    } else {
        FORMAT_WITHOUT_PARTITIONS
    };
    write_manifest(dir, MANIFEST_NAME, version)?;
    Ok(dir_bytes(dir))
}

/// Removes vector and graph files left by an earlier persist into `dir`, so a
/// store with fewer namespaces leaves no stale files behind (and hnsw_rs,
/// which will not overwrite a dump, writes under the expected names).
fn remove_old_files(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with("vectors-") && name.ends_with(".f32"))
            || (name.starts_with("graph-") && is_graph_file(&name))
            || (name.starts_with("partitions-") && name.ends_with(".ivf"))
        {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// Reads what [`save`] wrote; nothing is returned unless everything checks.
pub(crate) fn load(
    dir: &Path,
    dim: usize,
    embedder: &str,
) -> Result<(Vec<(Namespace, DenseNs)>, u64)> {
    check_manifest_of(
        dir,
        MANIFEST_NAME,
        &[FORMAT_VERSION, FORMAT_WITHOUT_PARTITIONS],
    )?;
    let state: State = read_json(&dir.join(STATE_FILE))?;
    ensure(dir, state.dimension == dim, || {
        format!(
            "store holds {}-dimensional vectors but the embedder gives {dim}",
            state.dimension
        )
    })?;
    ensure(dir, state.embedder == embedder, || {
        format!(
            "store was embedded with {:?}, this instance uses {embedder:?}",
            state.embedder
        )
    })?;
    let mut out = Vec::with_capacity(state.namespaces.len());
    for ns in state.namespaces {
        if ns.vector_file.contains(['/', '\\']) || ns.vector_file.starts_with('.') {
            return Err(Error::store(
                dir,
                format!("bad vector file name {:?}", ns.vector_file),
            ));
        }
        let path = dir.join(&ns.vector_file);
        let bytes = std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::store(&path, "vector file is missing (torn store?)")
            } else {
                Error::io(&path, e)
            }
        })?;
        let slots = ns.units.len();
        if bytes.len() != slots * dim * 4 || ns.alive.len() != slots {
            return Err(Error::store(
                &path,
                format!(
                    "namespace {} has {slots} units but {} vector bytes and {} tombstone flags",
                    ns.namespace,
                    bytes.len(),
                    ns.alive.len()
                ),
            ));
        }
        let vectors: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if vectors.iter().any(|x| !x.is_finite()) {
            return Err(Error::store(&path, "vector file holds non-finite values"));
        }
        let index = match (&ns.graph, &ns.partitions) {
            (Some(_), Some(_)) => {
                return Err(Error::store(
                    dir,
                    format!(
                        "namespace {} records both a graph and partitions",
                        ns.namespace
                    ),
                ))
            }
            (Some(files), None) => Index::Graph(Graph::load(dir, files, slots, dim)?),
            (None, Some(file)) => Index::Partitions(load_partitions(dir, file, &vectors, dim)?),
            (None, None) => Index::Exact,
        };
        let restored =
            DenseNs::from_parts(dim, ns.units, vectors, ns.alive, ns.next_position, index);
        if restored.ids().len() != restored.live() {
            return Err(Error::store(
                dir,
                format!("namespace {} repeats a live source id", ns.namespace),
            ));
        }
        out.push((ns.namespace, restored));
    }
    Ok((out, dir_bytes(dir)))
}

/// Reads a namespace's partitions after checking the file against its record.
fn load_partitions(
    dir: &Path,
    record: &PartitionFile,
    vectors: &[f32],
    dim: usize,
) -> Result<Partitions> {
    let path = check_recorded(
        dir,
        &record.file,
        record.bytes,
        &record.sha256,
        "partitions",
    )?;
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Partitions::from_bytes(&bytes, vectors, dim).map_err(|why| Error::store(&path, why))
}
