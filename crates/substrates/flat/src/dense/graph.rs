//! The HNSW graph of one dense namespace: how it is built, searched, saved
//! and loaded.
//!
//! The graph holds each unit vector quantised to `i8` (component × 127,
//! rounded; components of a unit vector lie in [−1, 1], so nothing clips).
//! A search at 100k units is bound by fetching candidate vectors from
//! memory, and a 384-byte code costs a quarter of the 1,536-byte `f32` row;
//! the rounding moves a cosine by about 0.003 (standard deviation), which
//! steers the walk no worse, and the caller rescores the candidates with the
//! exact `f32` vectors (see [`super::ns::DenseNs::search`]).
//!
//! Large batches are inserted in parallel (hnsw_rs over rayon), so two builds
//! over the same vectors may link them differently. A persisted graph is
//! therefore saved with hnsw_rs's own dump and loaded back exactly as it was,
//! never rebuilt: the same query then gives the same recall after a restore,
//! and restoring 100k units takes seconds instead of minutes of inserts.
//!
//! hnsw_rs's loader asserts on malformed input (a panic inside a restore), so
//! [`Graph::load`] first checks each dump file against the length and
//! SHA-256 recorded when it was written, and refuses anything else.

use hnsw_rs::api::AnnT;
use hnsw_rs::hnsw::Hnsw;
use hnsw_rs::hnswio::HnswIo;
use hnsw_rs::prelude::FilterT;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use submem_core::{Error, Result};

use super::config::DenseConfig;
use super::vector::{quantise, I8Dot};

/// Below this many rows an insert is serial: rayon's split costs more than
/// it saves on a handful of points.
const PARALLEL_MIN_ROWS: usize = 64;

type Inner<'a> = Hnsw<'a, i8, I8Dot>;

// A loaded hnsw_rs graph borrows the `HnswIo` it came from (its signature ties
// the lifetimes even when nothing is memory-mapped), so the two live together.
self_cell::self_cell!(
    struct Cell {
        owner: HnswIo,
        #[not_covariant]
        dependent: Inner,
    }
);

/// An HNSW graph over unit vectors, keyed by slot.
pub(crate) struct Graph(Cell);

/// The two files of a saved graph, with what they must contain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GraphFiles {
    /// hnsw_rs base name: the files are `<basename>.hnsw.graph` and
    /// `<basename>.hnsw.data`.
    pub basename: String,
    pub graph_bytes: u64,
    pub graph_sha256: String,
    pub data_bytes: u64,
    pub data_sha256: String,
}

impl GraphFiles {
    fn graph_name(basename: &str) -> String {
        format!("{basename}.hnsw.graph")
    }
    fn data_name(basename: &str) -> String {
        format!("{basename}.hnsw.data")
    }
}

impl Graph {
    /// An empty graph sized for about `capacity` points.
    pub fn new(cfg: &DenseConfig, capacity: usize) -> Self {
        Graph(Cell::new(HnswIo::default(), |_| {
            Hnsw::new(
                cfg.max_connections,
                capacity.max(1024),
                cfg.max_layers,
                cfg.ef_construction,
                I8Dot,
            )
        }))
    }

    /// Inserts `(unit vector, slot)` rows, in parallel when there are many.
    pub fn insert(&self, rows: Vec<(&[f32], usize)>) {
        let codes: Vec<(Vec<i8>, usize)> =
            rows.into_iter().map(|(v, s)| (quantise(v), s)).collect();
        let rows: Vec<(&[i8], usize)> = codes.iter().map(|(c, s)| (c.as_slice(), *s)).collect();
        self.0.with_dependent(|_, graph| {
            if rows.len() >= PARALLEL_MIN_ROWS {
                graph.parallel_insert_slice(&rows);
            } else {
                for row in rows {
                    graph.insert_slice(row);
                }
            }
        });
    }

    /// Up to `k` slots nearest to the unit vector `query` by the quantised
    /// distance, searching with a candidate list of `ef`, keeping only slots
    /// the filter accepts when one is given.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        filter: Option<&dyn FilterT>,
    ) -> Vec<usize> {
        let code = quantise(query);
        self.0.with_dependent(|_, graph| {
            graph
                .search_filter(&code, k, ef, filter)
                .into_iter()
                .map(|n| n.d_id)
                .collect()
        })
    }

    /// Writes the graph into `dir` as `<basename>.hnsw.{graph,data}` and
    /// returns what [`Graph::load`] needs to check them.
    pub fn save(&self, dir: &Path, basename: &str) -> Result<GraphFiles> {
        let dumped = catch_unwind(AssertUnwindSafe(|| {
            self.0
                .with_dependent(|_, graph| graph.file_dump(dir, basename))
        }));
        let written = match dumped {
            Ok(Ok(name)) => name,
            Ok(Err(e)) => return Err(Error::store(dir, format!("saving the HNSW graph: {e}"))),
            Err(_) => {
                return Err(Error::store(
                    dir,
                    "saving the HNSW graph failed (could not create its files)",
                ))
            }
        };
        let (graph_bytes, graph_sha256) = digest(&dir.join(GraphFiles::graph_name(&written)))?;
        let (data_bytes, data_sha256) = digest(&dir.join(GraphFiles::data_name(&written)))?;
        Ok(GraphFiles {
            basename: written,
            graph_bytes,
            graph_sha256,
            data_bytes,
            data_sha256,
        })
    }

    /// Loads a graph [`Graph::save`] wrote, after checking both files; the
    /// graph must hold `points` points of dimension `dim`.
    pub fn load(dir: &Path, files: &GraphFiles, points: usize, dim: usize) -> Result<Self> {
        let name = &files.basename;
        for (file, bytes, sha) in [
            (
                GraphFiles::graph_name(name),
                files.graph_bytes,
                &files.graph_sha256,
            ),
            (
                GraphFiles::data_name(name),
                files.data_bytes,
                &files.data_sha256,
            ),
        ] {
            check_recorded(dir, &file, bytes, sha, "graph")?;
        }
        let io = HnswIo::new(dir, name);
        let loaded = catch_unwind(AssertUnwindSafe(|| {
            Cell::try_new(io, |io| io.load_hnsw_with_dist(I8Dot))
        }));
        let mut cell = match loaded {
            Ok(Ok(cell)) => cell,
            Ok(Err(e)) => return Err(Error::store(dir, format!("loading the HNSW graph: {e}"))),
            Err(_) => return Err(Error::store(dir, "the HNSW graph files are malformed")),
        };
        // Reloaded graphs come back with candidate extension on, which only
        // slows later inserts; new graphs have it off.
        cell.with_dependent_mut(|_, graph| graph.set_extend_candidates(false));
        let graph = Graph(cell);
        let (got_points, got_dim) = graph.0.with_dependent(|_, g| {
            (
                g.get_nb_point(),
                g.get_point_indexation().get_data_dimension(),
            )
        });
        if got_points != points || (points > 0 && got_dim != dim) {
            return Err(Error::store(
                dir,
                format!(
                    "graph holds {got_points} points of dimension {got_dim}, \
                     the store {points} of dimension {dim}"
                ),
            ));
        }
        Ok(graph)
    }
}

/// Checks that `name` is a plain file name and that `dir/name` exists with
/// the length and SHA-256 the store recorded for it (`what` names the file
/// in errors); returns its path.
pub(crate) fn check_recorded(
    dir: &Path,
    name: &str,
    bytes: u64,
    sha256: &str,
    what: &str,
) -> Result<std::path::PathBuf> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Error::store(dir, format!("bad {what} file name {name:?}")));
    }
    let path = dir.join(name);
    if !path.exists() {
        return Err(Error::store(
            &path,
            format!("{what} file is missing (torn store?)"),
        ));
    }
    let (len, sha) = digest(&path)?;
    if len != bytes || sha != sha256 {
        return Err(Error::store(
            &path,
            format!("{what} file does not match the store's record (torn or altered)"),
        ));
    }
    Ok(path)
}

/// Length and hex SHA-256 of a file.
pub(crate) fn digest(path: &Path) -> Result<(u64, String)> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        len += n as u64;
        hasher.update(&buf[..n]);
    }
    let hex = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((len, hex))
}

/// Whether `name` is one of the files [`Graph::save`] writes.
pub(crate) fn is_graph_file(name: &str) -> bool {
    name.ends_with(".hnsw.graph") || name.ends_with(".hnsw.data")
}
