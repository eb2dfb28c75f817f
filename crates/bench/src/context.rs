//! The state one run shares between its tasks: the dataset, the registry,
//! the models, the logs it appends to and what is already done. The runner
//! builds it; the instance and write phases read it.

use indicatif::ProgressBar;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use crate::dataset::{Conversation, Dataset};
use crate::items::{ItemKey, ItemRecord, JsonlLog, WriteRecord};
use crate::options::{Models, RunOptions};
use submem::Registry;

/// A training bank, built once per substrate and shared by the run's tasks:
/// the directory it was persisted to, or why it could not be built.
pub(crate) type BankCell = tokio::sync::OnceCell<std::result::Result<PathBuf, String>>;

/// Everything a run's tasks share.
pub(crate) struct Ctx {
    pub(crate) dataset: Arc<Dataset>,
    pub(crate) train: Vec<Conversation>,
    pub(crate) factory: Arc<Registry>,
    pub(crate) models: Arc<Models>,
    pub(crate) opts: RunOptions,
    pub(crate) done: HashSet<ItemKey>,
    pub(crate) writes_done: HashSet<(String, String, String)>,
    pub(crate) sample: Option<HashSet<(String, String)>>,
    pub(crate) items_log: Mutex<JsonlLog>,
    pub(crate) writes_log: Mutex<JsonlLog>,
    pub(crate) new_items: Mutex<Vec<ItemRecord>>,
    pub(crate) new_writes: Mutex<Vec<WriteRecord>>,
    pub(crate) appended: AtomicUsize,
    pub(crate) progress: ProgressBar,
    /// Training banks by substrate label, built once (cross-episode regime).
    pub(crate) banks: Mutex<std::collections::HashMap<String, Arc<BankCell>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
