//! Settings of the dense substrate (M1).

use serde::{Deserialize, Serialize};

use crate::error::{FlatError, FlatResult};
use crate::fill::ReadDepth;

/// Settings of [`crate::DenseMemory`], and of the `m1` and `m1-fill` plugins:
/// every field is a setting under its serde name (`m1:m=32,ef_search=96`),
/// listed by `submem substrates` with the first sentence of its doc. Every
/// field has a measured or documented default; build with
/// `DenseConfig::default().with_*(…)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DenseConfig {
    /// A namespace with fewer live units than this is searched by an exact
    /// scan; at or above it, an HNSW graph is built and searched. Default
    /// 2,048, chosen with the `dense` bench (384-d clustered vectors, 2 cores,
    /// read without the query embedding, medians): the exact scan costs about
    /// 65 ns per unit and ties the graph at 1,024 units (71 µs vs 70 µs);
    /// from 4,096 units the graph is faster (0.26 ms vs 0.12 ms; 16k: 1.01 ms
    /// vs 0.38 ms; 100k: 6.5 ms vs 0.92 ms). Below the threshold recall is
    /// exact and memory is about half.
    pub exact_threshold: usize,
    /// HNSW `M`: neighbours kept per node and layer (at most 256; layer 0
    /// keeps `2·M`). Default 24. Its setting is `m` (`max_connections` is
    /// read too).
    #[serde(rename = "m", alias = "max_connections")]
    pub max_connections: usize,
    /// HNSW candidate list size while building. Default 100 (200 raised
    /// recall at a given `ef_search` by about 0.01 but doubled build time and
    /// made each search step dearer).
    pub ef_construction: usize,
    /// HNSW candidate list size while searching (raised to `top_k` when
    /// smaller): the recall/latency dial. Default 64. Recall@10 against an
    /// exact scan on 3,000 units (`tests/dense.rs`), for `ef_search` 32 / 48 /
    /// 64 / 96: hashing-embedder vectors 0.943 / 0.972 / 0.987 / 0.997;
    /// uniform random vectors, the worst case, 0.894 / 0.938 / 0.962 / 0.986.
    /// Clustered 384-d vectors at 100k units: 1.000 from 24 up. Latency
    /// grows about linearly with it (see the crate docs); set 96 or more
    /// where recall matters more than a millisecond.
    pub ef_search: usize,
    /// A namespace with this many live units or more is indexed by
    /// partitions (spherical k-means centroids; a query scans one-bit codes
    /// in the partitions nearest it) instead of an HNSW graph. Default
    /// 20,000, chosen with the `dense` bench (clustered 384-d vectors,
    /// 2 cores, medians): at 20k the graph inserts 1,554 units/s and reads
    /// in 0.76 ms, the partitions 38,611 units/s and 0.29 ms, both at
    /// recall@10 1.000; at 100k the partitions read in 0.63 ms at 0.999; at
    /// a million the graph inserts ~1,200 units/s at recall 0.54, the
    /// partitions 15,500 at 0.98 and 1.34 ms. The one-bit codes suit dense
    /// sentence embeddings (on 1,817 MiniLM vectors the 40 nearest by code
    /// hold 98.9 % of the exact top 10), not sparse ones: with the 128-d
    /// hashing test embedder recall fell to 0.69, so raise this for such.
    pub partition_threshold: usize,
    /// Partitions a search scans at least (more while they hold fewer than
    /// the candidates it rescores): the partitioned index's recall/latency
    /// dial. Default 128. At a million clustered units recall@10 is 0.94 /
    /// 0.96 for 64 / 128 (`dense` bench).
    pub partition_probe: usize,
    /// HNSW layers (at most 16). Default 16.
    pub max_layers: usize,
    /// Texts per embedder call. Default 64.
    pub embed_batch: usize,
    /// `manage()` compacts a namespace (drops forgotten vectors and rebuilds
    /// its graph) once forgotten units exceed this share of its slots.
    /// Default 0.2.
    pub compact_share: f32,
    /// Show ranked turns until the budget is spent instead of the top-k.
    /// Off by default (the paper's M1; the `m1-fill` plugin turns it on).
    /// With [`DenseConfig::candidates`] it makes [`DenseConfig::depth`].
    pub fill: bool,
    /// Most turns a fill read ranks (fill reads only; unset: 2,048). A bound
    /// on read cost ([`crate::fill::DEFAULT_FILL_CANDIDATES`] when unset);
    /// set without [`DenseConfig::fill`] it is refused.
    pub candidates: Option<usize>,
}

impl Default for DenseConfig {
    fn default() -> Self {
        DenseConfig {
            exact_threshold: 2_048,
            max_connections: 24,
            ef_construction: 100,
            ef_search: 64,
            partition_threshold: 20_000,
            partition_probe: 128,
            max_layers: 16,
            embed_batch: 64,
            compact_share: 0.2,
            fill: false,
            candidates: None,
        }
    }
}

submem_kit::setters!(DenseConfig {
    with_exact_threshold => exact_threshold: usize,
    with_max_connections => max_connections: usize,
    with_ef_construction => ef_construction: usize,
    with_ef_search => ef_search: usize,
    with_partition_threshold => partition_threshold: usize,
    with_partition_probe => partition_probe: usize,
    with_max_layers => max_layers: usize,
    with_embed_batch => embed_batch: usize,
    with_compact_share => compact_share: f32,
    with_fill => fill: bool,
    with_candidates => candidates: Option<usize>,
});

crate::fill::depth_settings!(DenseConfig);

impl DenseConfig {
    /// Rejects settings hnsw_rs cannot honour (it exits the process on some).
    pub(crate) fn validate(&self) -> FlatResult<()> {
        ReadDepth::check_settings(self.fill, self.candidates).map_err(FlatError::Config)?;
        if !(2..=256).contains(&self.max_connections) {
            return Err(FlatError::Config(format!(
                "max_connections must be in 2..=256, got {}",
                self.max_connections
            )));
        }
        if !(1..=16).contains(&self.max_layers) {
            return Err(FlatError::Config(format!(
                "max_layers must be in 1..=16, got {}",
                self.max_layers
            )));
        }
        if self.ef_construction == 0
            || self.ef_search == 0
            || self.embed_batch == 0
            || self.partition_probe == 0
        {
            return Err(FlatError::Config(
                "ef_construction, ef_search, partition_probe and embed_batch must be at least 1"
                    .into(),
            ));
        }
        if !(self.compact_share.is_finite() && (0.0..=1.0).contains(&self.compact_share)) {
            return Err(FlatError::Config(format!(
                "compact_share must be in [0, 1], got {}",
                self.compact_share
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_do_not() {
        assert!(DenseConfig::default().validate().is_ok());
        assert!(DenseConfig::default()
            .with_max_connections(300)
            .validate()
            .is_err());
        assert!(DenseConfig::default()
            .with_max_layers(0)
            .validate()
            .is_err());
        assert!(DenseConfig::default()
            .with_compact_share(f32::NAN)
            .validate()
            .is_err());
    }

    #[test]
    fn serde_fills_missing_fields_with_defaults() {
        let c: DenseConfig = serde_json::from_str(r#"{"ef_search": 7}"#).unwrap();
        assert_eq!(c.ef_search, 7);
        assert_eq!(c.max_connections, DenseConfig::default().max_connections);
    }
}
