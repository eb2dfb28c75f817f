//! [`Space`], the M9 memory of one namespace: its events, its QA pairs and
//! its adapter with the versions that tell whether the adapter is behind.
//! The substrate (`mem`) holds one per namespace and `store` writes them to
//! disk and reads them back.

use std::sync::Arc;

use crate::lora::Adapter;
use crate::qa::QaPair;
use crate::train::TrainReport;

/// One ingested event: its id and its size in budget tokens.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct EventMeta {
    pub source_id: String,
    pub tokens: u64,
}

/// The memory of one namespace.
#[derive(Debug, Default, Clone)]
pub(crate) struct Space {
    pub events: Vec<EventMeta>,
    pub pairs: Vec<QaPair>,
    pub adapter: Option<Arc<Adapter>>,
    /// Bumped whenever `pairs` changes.
    pub version: u64,
    /// The `version` the adapter was trained at.
    pub trained_version: u64,
    /// A forget removed pairs the current adapter was trained on.
    pub forgotten_since_training: bool,
    pub last_training: Option<TrainReport>,
}

impl Space {
    /// Pairs changed since the adapter was trained.
    pub fn pending(&self) -> bool {
        self.version != self.trained_version
    }
}
