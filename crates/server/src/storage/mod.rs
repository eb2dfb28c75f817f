//! Where namespaces are kept: their metadata, event logs and snapshots.
//!
//! A [`Backend`] is the catalog of namespaces, each described by a
//! [`NamespaceMeta`] (create, list, delete, look up without opening
//! anything), and opens one namespace's storage, a [`NamespaceStorage`]: its
//! [`EventLog`] (the source of truth), its [`SnapshotStore`] (substrate
//! states tied to the log position they cover) and a [`Lease`] that says
//! whether this process may still write it.
//!
//! Two backends stand behind the same traits:
//! - [`file::FileBackend`], the embedded default: a directory per namespace
//!   with an fsynced log file and snapshot directories. One process owns the
//!   data directory; its lease is never lost.
//! - [`postgres::PgBackend`] (`--store postgres://…`): tables shared by any
//!   number of stateless server nodes. A node writes a namespace only while
//!   it holds that namespace's advisory lock on a live database session; the
//!   lease is lost when that session ends, and another node's request then
//!   takes the lock and opens the namespace from the database.

pub mod file;
pub mod postgres;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

use submem_core::Substrate;

use crate::log::EventLog;
use crate::Result;

/// Substrate snapshots of one namespace, each tied to the log offset it
/// covers. The log stays the source of truth: a snapshot only shortens the
/// replay of a cold open.
#[async_trait]
pub trait SnapshotStore: Debug + Send + Sync {
    /// Restores into `substrate` the newest snapshot that covers at most
    /// `log_end` and restores cleanly; returns the offset it covers (0: none,
    /// replay the whole log). A torn or refused snapshot is skipped for an
    /// older one.
    async fn restore_newest(&self, substrate: &dyn Substrate, log_end: u64) -> Result<u64>;
    /// Persists `substrate` as the snapshot covering `offset` (the log offset
    /// just after the last record applied to it), then removes older ones.
    async fn take(&self, substrate: &dyn Substrate, offset: u64) -> Result<()>;
    /// Removes every snapshot, durably (before the log is rewritten: their
    /// offsets would name positions of the old log).
    async fn remove_all(&self) -> Result<()>;
    /// Frees whatever the store holds locally for the open namespace (the
    /// PostgreSQL store unpacks a snapshot into a scratch directory that the
    /// restored substrate may map). Called when the namespace closes.
    async fn close(&self) {}
}

/// A process's right to write a namespace.
#[async_trait]
pub trait Lease: Debug + Send + Sync {
    /// `true` once the right is gone (the database session holding the
    /// advisory lock ended): the namespace must be closed without writing.
    fn lost(&self) -> bool;
    /// Gives the right up (the namespace was closed).
    async fn release(&self);
}

/// A lease that cannot be lost: one process owns the data directory.
#[derive(Debug, Default)]
pub struct SoleOwner;

#[async_trait]
impl Lease for SoleOwner {
    fn lost(&self) -> bool {
        false
    }
    async fn release(&self) {}
}

/// One opened namespace's storage.
#[derive(Debug, Clone)]
pub struct NamespaceStorage {
    /// The event log.
    pub log: Arc<dyn EventLog>,
    /// The snapshots.
    pub snapshots: Arc<dyn SnapshotStore>,
    /// This process's right to write it.
    pub lease: Arc<dyn Lease>,
}

/// Why a namespace could not be opened here.
#[derive(Debug)]
pub enum OpenOutcome {
    /// Opened: this process owns it now.
    Opened(NamespaceStorage),
    /// Another node owns it; requests go to the advertised URL.
    OwnedBy(String),
}

/// What is stored about a namespace besides its log and snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceMeta {
    /// The namespace's name.
    pub name: String,
    /// The substrate spec it was created with (`m2`, `flexa:rho=0.2`).
    pub substrate: String,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
    /// When the namespace's log last changed (a write, a forget or the
    /// rewrite after one), Unix seconds, as the store reports it when the
    /// namespace is listed; `None` before any record (or for records a
    /// PostgreSQL store appended before it kept the time). Never stored
    /// with the metadata itself.
    #[serde(default, skip_serializing)]
    pub last_write_unix: Option<u64>,
}

/// The catalog of namespaces and the opener of their storage.
#[async_trait]
pub trait Backend: Debug + Send + Sync {
    /// A short name for logs and `/readyz` (`file`, `postgres`).
    fn kind(&self) -> &'static str;
    /// Every namespace, by name, without opening any.
    async fn list(&self) -> Result<Vec<NamespaceMeta>>;
    /// The namespace `name`, without opening it.
    async fn meta(&self, name: &str) -> Result<Option<NamespaceMeta>>;
    /// How many namespaces exist.
    async fn count(&self) -> Result<usize>;
    /// Records a new namespace atomically; `NamespaceExists` if the name is
    /// taken (also by a concurrent create on another node).
    async fn create(&self, meta: &NamespaceMeta) -> Result<()>;
    /// Removes a namespace and everything stored for it; whether it existed.
    /// The caller has closed it on this node first.
    async fn delete(&self, name: &str) -> Result<bool>;
    /// Takes the namespace for this process and opens its storage, or names
    /// the node that owns it.
    async fn open(&self, meta: &NamespaceMeta) -> Result<OpenOutcome>;
    /// Whether the store answers (`/readyz`).
    async fn ready(&self) -> Result<()>;
}
