//! Settings of the full-context substrate (M10).

use serde::{Deserialize, Serialize};

/// Settings of [`crate::FullContext`]. M10 has nothing to tune beyond the
/// reading rule; the struct exists so callers build every substrate the same
/// way and so settings can be added without breaking them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FullContextConfig {
    /// Score given to every shown unit in [`submem_core::Recall::sources`]
    /// (full context does not rank). Default 1.0.
    pub source_score: f32,
}

impl Default for FullContextConfig {
    fn default() -> Self {
        FullContextConfig { source_score: 1.0 }
    }
}

submem_kit::setters!(FullContextConfig {
    with_source_score => source_score: f32,
});
