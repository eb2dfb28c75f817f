//! The namespaces a server holds, and which of them are open (resident).
//!
//! The catalog ([`crate::storage::Backend`]) knows every namespace; a
//! namespace's substrate is built, restored and replayed only when a request
//! needs it ([`Store::acquire`]), so a server answers `/healthz` at once
//! whatever the number of namespaces, and its memory follows what is used,
//! not what exists. Listing and metadata never open a substrate.
//!
//! An open namespace is closed (snapshotted, its applier stopped, its lease
//! released) when it has been idle for `idle_close_s`, or, least recently
//! used first, when the open namespaces' memory passes `max_resident_mb`
//! (the substrates' own [`submem_core::Footprint::memory_bytes`] plus
//! `namespace_overhead_kb` each). A
//! namespace that a request holds or that has queued work is never closed.
//!
//! Each name has a gate (an async mutex over its open handle): concurrent
//! first requests to one namespace open it once, and a close or delete
//! cannot interleave with an open.

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use submem::registry::{Registry, SubstrateSpec};
use submem::MeteredSubstrate;
use submem_core::plugin::LlmUse;
use submem_core::{Namespace, Services};

use crate::config::ServerConfig;
use crate::jobs::Jobs;
use crate::namespace::{Metered, NamespaceHandle, NamespaceMeta, SnapshotPolicy};
use crate::storage::{Backend, OpenOutcome};
use crate::{Result, ServerError};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A substrate spec from a request: `"m2:fill=true"`, or a name with settings
/// as a JSON object of scalars.
pub fn spec_from_json(name: &str, settings: Option<&Value>) -> Result<SubstrateSpec> {
    let mut spec = SubstrateSpec::parse(name)?;
    match settings {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(ServerError::BadSubstrate(format!(
                            "setting {k:?}: expected a string, number or boolean, got {other}"
                        )))
                    }
                };
                spec.settings.push((k.to_ascii_lowercase(), v));
            }
        }
        Some(other) => {
            return Err(ServerError::BadSubstrate(format!(
                "settings must be a JSON object, got {other}"
            )))
        }
    }
    Ok(spec)
}

/// The open handle of one name, if any.
#[derive(Debug, Default)]
struct Slot {
    gate: tokio::sync::Mutex<Option<Arc<NamespaceHandle>>>,
}

/// A namespace held open for one request: it is not closed while any
/// `Using` of it lives.
#[derive(Debug)]
pub struct Using {
    handle: Arc<NamespaceHandle>,
}

impl Using {
    fn new(handle: Arc<NamespaceHandle>) -> Self {
        handle.users.fetch_add(1, Ordering::SeqCst);
        handle.touch();
        Using { handle }
    }
}

impl std::ops::Deref for Using {
    type Target = NamespaceHandle;
    fn deref(&self) -> &NamespaceHandle {
        &self.handle
    }
}

impl Drop for Using {
    fn drop(&mut self) {
        self.handle.touch();
        self.handle.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a namespace is served.
#[derive(Debug)]
pub enum Access {
    /// Open here.
    Local(Using),
    /// Owned by another node (its advertised URL).
    Remote(String),
}

/// Counters of the resident set, for `/metrics`.
#[derive(Debug, Default)]
pub struct ResidentStats {
    /// Cold opens.
    pub opens: AtomicU64,
    /// Closes (idle, cap, shutdown, lost lease).
    pub closes: AtomicU64,
    /// Total milliseconds spent in cold opens.
    pub open_ms: AtomicU64,
}

/// Every namespace of one store, and the open ones.
#[derive(Debug)]
pub struct Store {
    backend: Arc<dyn Backend>,
    registry: Arc<Registry>,
    services: Services,
    policies: PathBuf,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    change: tokio::sync::Mutex<()>,
    /// Background jobs of every namespace.
    pub jobs: Arc<Jobs>,
    /// The configuration.
    pub config: ServerConfig,
    /// Resident-set counters.
    pub stats: ResidentStats,
}

impl Store {
    /// A store over `backend`. Nothing is opened: namespaces open on their
    /// first request. Router policies are looked up under `policies`.
    pub fn new(
        backend: Arc<dyn Backend>,
        policies: PathBuf,
        registry: Arc<Registry>,
        services: Services,
        config: ServerConfig,
    ) -> Self {
        Store {
            backend,
            registry,
            services,
            policies,
            slots: Mutex::new(HashMap::new()),
            change: tokio::sync::Mutex::new(()),
            jobs: Arc::new(Jobs::default()),
            config,
            stats: ResidentStats::default(),
        }
    }

    /// The catalog.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot(&self, name: &str) -> Arc<Slot> {
        self.slots()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Slot::default()))
            .clone()
    }

    /// Builds a metered instance of `spec`; `true` when it calls an LLM
    /// (its writes become background jobs).
    fn build(&self, spec: &SubstrateSpec) -> Result<(Arc<Metered>, bool)> {
        let factory = self.registry.resolve(&spec.name).ok_or_else(|| {
            ServerError::BadSubstrate(format!(
                "unknown substrate {:?}; known substrates: {}",
                spec.name,
                self.registry.known().join(", ")
            ))
        })?;
        let background = match factory.llm() {
            LlmUse::Never => false,
            LlmUse::Optional => self.services.llm.is_some(),
            LlmUse::Required => true,
        };
        let registry = self.registry.clone();
        let metered: Metered =
            MeteredSubstrate::build(&self.services, |services| registry.build(spec, services))?;
        Ok((Arc::new(metered), background))
    }

    /// A fresh metered instance of `spec` with this store's services, bound
    /// to no namespace (side-by-side comparisons build these).
    pub fn build_detached(&self, spec: &SubstrateSpec) -> Result<Arc<Metered>> {
        self.build(spec).map(|(s, _)| s).map_err(|e| self.redact(e))
    }

    fn policy(&self) -> SnapshotPolicy {
        SnapshotPolicy {
            every_records: self.config.snapshot_every,
            apply_time: Duration::from_millis(self.config.snapshot_after_apply_ms),
        }
    }

    /// The namespace `name` without opening it.
    pub async fn meta(&self, name: &str) -> Result<Option<NamespaceMeta>> {
        self.backend.meta(name).await
    }

    /// Every namespace without opening any.
    pub async fn list(&self) -> Result<Vec<NamespaceMeta>> {
        self.backend.list().await
    }

    /// The open handle of `name`, if it is open here (never opens it).
    pub fn resident(&self, name: &str) -> Option<Arc<NamespaceHandle>> {
        let slot = self.slots().get(name).cloned()?;
        let gate = slot.gate.try_lock().ok()?;
        gate.clone()
    }

    /// Every open handle.
    pub fn all_resident(&self) -> Vec<Arc<NamespaceHandle>> {
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        slots
            .iter()
            .filter_map(|s| s.gate.try_lock().ok().and_then(|g| g.clone()))
            .collect()
    }

    /// Memory counted for one open namespace: what its substrate reports
    /// plus the configured fixed overhead.
    pub fn counted_bytes(&self, h: &NamespaceHandle) -> u64 {
        h.footprint()
            .memory_bytes
            .saturating_add(self.config.namespace_overhead_kb.saturating_mul(1024))
    }

    /// Memory counted for every open namespace (what the cap bounds).
    pub fn resident_bytes(&self) -> u64 {
        self.all_resident()
            .iter()
            .map(|h| self.counted_bytes(h))
            .sum()
    }

    /// The namespace `name` for a request: open here (opened now if it was
    /// not), or the URL of the node that owns it. `NamespaceNotFound` if it
    /// does not exist.
    pub async fn acquire(&self, name: &str) -> Result<Access> {
        let slot = self.slot(name);
        let mut gate = slot.gate.lock().await;
        if let Some(h) = gate.as_ref() {
            if !h.lease_lost() {
                return Ok(Access::Local(Using::new(h.clone())));
            }
            tracing::warn!(
                namespace = name,
                "lease lost; closing without writing and reopening"
            );
            if let Some(h) = gate.take() {
                h.close().await;
                self.stats.closes.fetch_add(1, Ordering::Relaxed);
            }
        }
        let Some(meta) = self.backend.meta(name).await? else {
            drop(gate);
            self.forget_slot(name);
            return Err(ServerError::NamespaceNotFound(name.into()));
        };
        let spec = SubstrateSpec::parse(&meta.substrate)?;
        let (substrate, background) = self.build(&spec)?;
        let storage = match self.backend.open(&meta).await? {
            OpenOutcome::Opened(storage) => storage,
            OpenOutcome::OwnedBy(url) => {
                drop(gate);
                self.forget_slot(name);
                return Ok(Access::Remote(url));
            }
        };
        let lease = storage.lease.clone();
        let handle = match NamespaceHandle::open(
            meta,
            storage,
            substrate,
            background,
            self.jobs.clone(),
            self.policy(),
        )
        .await
        {
            Ok(h) => h,
            Err(e) => {
                lease.release().await;
                return Err(e);
            }
        };
        self.stats.opens.fetch_add(1, Ordering::Relaxed);
        self.stats
            .open_ms
            .fetch_add(handle.open_time.as_millis() as u64, Ordering::Relaxed);
        *gate = Some(handle.clone());
        let using = Using::new(handle);
        drop(gate);
        self.enforce_cap().await;
        Ok(Access::Local(using))
    }

    /// Drops the slot of `name` when nobody waits on it.
    fn forget_slot(&self, name: &str) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get(name) {
            let unused = Arc::strong_count(slot) == 1
                && slot.gate.try_lock().map(|g| g.is_none()).unwrap_or(false);
            if unused {
                slots.remove(name);
            }
        }
    }

    /// Closes `name` if it is open, idle and `pick` still agrees under its
    /// gate. Returns whether it closed.
    async fn close_if(&self, name: &str, pick: impl Fn(&NamespaceHandle) -> bool) -> bool {
        let Some(slot) = self.slots().get(name).cloned() else {
            return false;
        };
        let Ok(mut gate) = slot.gate.try_lock() else {
            return false;
        };
        let due = gate.as_ref().is_some_and(|h| h.is_idle() && pick(h));
        if !due {
            return false;
        }
        if let Some(h) = gate.take() {
            h.close().await;
            self.stats.closes.fetch_add(1, Ordering::Relaxed);
        }
        drop(gate);
        drop(slot);
        self.forget_slot(name);
        true
    }

    /// Closes idle namespaces, least recently used first, until the open
    /// substrates' memory is under `max_resident_mb` (0: no cap).
    pub async fn enforce_cap(&self) {
        let cap = self.config.max_resident_mb.saturating_mul(1 << 20);
        if cap == 0 {
            return;
        }
        let mut open: Vec<(Duration, u64, String)> = self
            .all_resident()
            .iter()
            .map(|h| (h.idle_for(), self.counted_bytes(h), h.meta.name.clone()))
            .collect();
        let mut total: u64 = open.iter().map(|(_, b, _)| b).sum();
        if total <= cap {
            return;
        }
        // Longest idle first.
        open.sort_by_key(|o| std::cmp::Reverse(o.0));
        for (_, bytes, name) in open {
            if total <= cap {
                break;
            }
            if self.close_if(&name, |_| true).await {
                total = total.saturating_sub(bytes);
                tracing::debug!(namespace = %name, bytes, "closed: resident memory over the cap");
            }
        }
    }

    /// Closes namespaces idle for `idle_close_s` or more (and any whose
    /// lease is lost).
    pub async fn close_idle(&self) {
        let limit = Duration::from_secs(self.config.idle_close_s);
        let names: Vec<String> = self
            .all_resident()
            .iter()
            .filter(|h| h.lease_lost() || (limit > Duration::ZERO && h.idle_for() >= limit))
            .map(|h| h.meta.name.clone())
            .collect();
        for name in names {
            self.close_if(&name, |h| h.lease_lost() || h.idle_for() >= limit)
                .await;
        }
    }

    /// Settings that name a file on the server's disk (a router's `policy`)
    /// may only name a file under `<data-dir>/policies/`: a tenant must not
    /// make the server open any path it likes. The stored spec holds the
    /// resolved path, so a reopen reads the same file.
    fn confine_paths(&self, mut spec: SubstrateSpec) -> Result<SubstrateSpec> {
        for (key, value) in &mut spec.settings {
            if key != "policy" {
                continue;
            }
            let name = std::path::Path::new(value.as_str());
            let plain = !name.as_os_str().is_empty()
                && name
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !plain {
                return Err(ServerError::BadRequest(format!(
                    "setting `policy` must name a file inside the server's policies directory \
                     (`policies/` under its data directory), without `..` or an absolute path; \
                     got {value:?}"
                )));
            }
            *value = self.policies.join(name).to_string_lossy().into_owned();
        }
        Ok(spec)
    }

    /// Says what a refused spec got wrong without the server's own paths.
    fn redact(&self, e: ServerError) -> ServerError {
        let dir = self.policies.to_string_lossy().into_owned();
        match e {
            ServerError::BadSubstrate(m) if !dir.is_empty() => {
                ServerError::BadSubstrate(m.replace(&dir, "policies"))
            }
            ServerError::BadRequest(m) if !dir.is_empty() => {
                ServerError::BadRequest(m.replace(&dir, "policies"))
            }
            other => other,
        }
    }

    /// Creates namespace `name` bound to `spec` (in the catalog only: it
    /// opens on its first use).
    pub async fn create(&self, name: &str, spec: SubstrateSpec) -> Result<NamespaceMeta> {
        Namespace::new(name).map_err(|e| ServerError::BadRequest(e.to_string()))?;
        let _guard = self.change.lock().await;
        if self.backend.meta(name).await?.is_some() {
            return Err(ServerError::NamespaceExists(name.into()));
        }
        if self.backend.count().await? >= self.config.limits.max_namespaces {
            return Err(ServerError::TooLarge(format!(
                "the server holds its maximum of {} namespaces",
                self.config.limits.max_namespaces
            )));
        }
        let spec = self.confine_paths(spec)?;
        self.registry
            .check(&spec)
            .map_err(|e| self.redact(e.into()))?;
        // Built once to refuse what cannot be built (an LLM substrate on a
        // server without an LLM) before anything is stored.
        self.build(&spec).map_err(|e| self.redact(e))?;
        let meta = NamespaceMeta {
            name: name.to_string(),
            substrate: spec.to_string(),
            created_unix: now(),
            last_write_unix: None,
        };
        self.backend.create(&meta).await?;
        tracing::info!(namespace = name, substrate = %spec, "namespace created");
        Ok(meta)
    }

    /// Whether namespaces of `meta`'s substrate write in background jobs.
    pub fn background(&self, meta: &NamespaceMeta) -> bool {
        SubstrateSpec::parse(&meta.substrate)
            .ok()
            .and_then(|spec| self.registry.resolve(&spec.name))
            .is_some_and(|f| match f.llm() {
                LlmUse::Never => false,
                LlmUse::Optional => self.services.llm.is_some(),
                LlmUse::Required => true,
            })
    }

    /// Deletes namespace `name`, which the caller holds (`using`): it stops
    /// being served at once and its log and snapshots are removed.
    pub async fn delete(&self, name: &str, using: Using) -> Result<bool> {
        let _guard = self.change.lock().await;
        let slot = self.slot(name);
        drop(using);
        let mut gate = slot.gate.lock().await;
        if let Some(h) = gate.take() {
            h.discard().await;
        }
        let existed = self.backend.delete(name).await?;
        drop(gate);
        drop(slot);
        self.forget_slot(name);
        tracing::info!(namespace = name, "namespace deleted");
        Ok(existed)
    }

    /// Closes every open namespace (graceful shutdown): each is snapshotted
    /// and its lease released.
    pub async fn close_all(&self) {
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        for slot in slots {
            let mut gate = slot.gate.lock().await;
            if let Some(h) = gate.take() {
                h.close().await;
                self.stats.closes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The registry namespaces are built from.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The budget token counter substrates are built with.
    pub fn tokens(&self) -> &std::sync::Arc<dyn submem_core::TokenCounter> {
        &self.services.tokens
    }
}
