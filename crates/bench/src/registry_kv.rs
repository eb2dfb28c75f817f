//! Settings of the activation substrates beyond M10 (M11), parsed from a
//! [`SubstrateSpec`] for the [`crate::registry`].

use submem_kv::{EpiCacheConfig, ReaderHead};

use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

/// M11's settings; its KV caches are prefilled under the shared reader's
/// prompt head so that the reader continues them.
pub(crate) fn epicache_config(spec: &SubstrateSpec) -> Result<EpiCacheConfig> {
    spec.only(&["k", "segment", "keep", "kv_cache", "runs"])?;
    let mut c = EpiCacheConfig::default().with_reader_head(ReaderHead {
        system: Some(crate::reader::READER_SYSTEM.to_string()),
        memory_intro: crate::reader::MEMORY_INTRO.to_string(),
    });
    if let Some(v) = spec.parse_setting("k")? {
        c = c.with_episodes(v);
    }
    if let Some(v) = spec.parse_setting("segment")? {
        c = c.with_segment_turns(v);
    }
    if let Some(v) = spec.parse_setting("keep")? {
        c = c.with_keep_ratio(v);
    }
    if let Some(v) = spec.parse_setting("kv_cache")? {
        c = c.with_kv_cache(v);
    }
    if let Some(v) = spec.parse_setting("runs")? {
        c = c.with_kmeans_runs(v);
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}
