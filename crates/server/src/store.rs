//! The namespaces a server holds, on disk and live.
//!
//! Layout of the data directory:
//!
//! ```text
//! DIR/namespaces/<sha256 of the name>/meta.json     name, substrate spec (written atomically)
//! DIR/namespaces/<sha256 of the name>/events.log    the append-only event log
//! DIR/namespaces/<sha256 of the name>/snap-<offset>-<stamp>/   the newest substrate snapshot
//! DIR/trash/                                         deleted namespaces, removed in the background
//! ```
//!
//! A namespace is created in a temporary directory and renamed into place,
//! so a crash never leaves one without its metadata. Directory names are
//! hashes because a namespace name may be 256 bytes of any script.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use submem_bench::registry::{Registry, SubstrateSpec};
use submem_core::plugin::LlmUse;
use submem_core::{MeteredSubstrate, Namespace, Services};

use crate::config::{hash_key, ServerConfig};
use crate::jobs::Jobs;
use crate::log::sync_dir;
use crate::namespace::{Metered, NamespaceHandle, NamespaceMeta};
use crate::{Result, ServerError};

/// Every namespace of one data directory.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    registry: Arc<Registry>,
    services: Services,
    map: RwLock<BTreeMap<String, Arc<NamespaceHandle>>>,
    change: tokio::sync::Mutex<()>,
    /// Background jobs of every namespace.
    pub jobs: Arc<Jobs>,
    /// The configuration.
    pub config: ServerConfig,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
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

impl Store {
    /// Opens every namespace under `root` (created if missing). A namespace
    /// whose substrate cannot be built any more (its LLM is no longer
    /// configured) is logged and left on disk, unserved.
    pub async fn open(
        root: &Path,
        registry: Arc<Registry>,
        services: Services,
        config: ServerConfig,
    ) -> Result<Self> {
        let spaces = root.join("namespaces");
        std::fs::create_dir_all(&spaces).map_err(|e| ServerError::io(&spaces, e))?;
        let trash = root.join("trash");
        if trash.exists() {
            let _ = std::fs::remove_dir_all(&trash);
        }
        let store = Store {
            root: root.to_path_buf(),
            registry,
            services,
            map: RwLock::new(BTreeMap::new()),
            change: tokio::sync::Mutex::new(()),
            jobs: Arc::new(Jobs::default()),
            config,
        };
        let entries = std::fs::read_dir(&spaces).map_err(|e| ServerError::io(&spaces, e))?;
        for e in entries.filter_map(|e| e.ok()) {
            let dir = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                // A creation a crash interrupted.
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
            match store.open_dir(&dir).await {
                Ok(h) => {
                    store.write_map().insert(h.meta.name.clone(), h);
                }
                Err(e) => {
                    tracing::error!(dir = %dir.display(), error = %e, "namespace not served")
                }
            }
        }
        Ok(store)
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<NamespaceHandle>>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<NamespaceHandle>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    async fn open_dir(&self, dir: &Path) -> Result<Arc<NamespaceHandle>> {
        let meta_path = dir.join("meta.json");
        let meta: NamespaceMeta =
            submem_core::persist::read_json(&meta_path).map_err(|e| ServerError::Storage {
                path: meta_path.clone(),
                message: e.to_string(),
            })?;
        let spec = SubstrateSpec::parse(&meta.substrate)?;
        let (substrate, background) = self.build(&spec)?;
        crate::snapshot::remove_stale_tmp(dir);
        NamespaceHandle::open(
            dir,
            meta,
            substrate,
            background,
            self.jobs.clone(),
            self.config.snapshot_every,
        )
        .await
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

    fn dir_of(&self, name: &str) -> PathBuf {
        self.root.join("namespaces").join(hash_key(name))
    }

    /// The live namespace `name`.
    pub fn get(&self, name: &str) -> Option<Arc<NamespaceHandle>> {
        self.read_map().get(name).cloned()
    }

    /// Every live namespace, by name.
    pub fn all(&self) -> Vec<Arc<NamespaceHandle>> {
        self.read_map().values().cloned().collect()
    }

    /// Settings that name a file on the server's disk (a router's `policy`)
    /// may only name a file under `<data-dir>/policies/`: a tenant must not
    /// make the server open any path it likes. The stored spec holds the
    /// resolved path, so a restart opens the same file.
    fn confine_paths(&self, mut spec: SubstrateSpec) -> Result<SubstrateSpec> {
        let policies = self.root.join("policies");
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
                    "setting `policy` must name a file inside the server's policies directory ({}), \
                     without `..` or an absolute path; got {value:?}",
                    policies.display()
                )));
            }
            *value = policies.join(name).to_string_lossy().into_owned();
        }
        Ok(spec)
    }

    /// Creates namespace `name` bound to `spec`.
    pub async fn create(&self, name: &str, spec: SubstrateSpec) -> Result<Arc<NamespaceHandle>> {
        Namespace::new(name).map_err(|e| ServerError::BadRequest(e.to_string()))?;
        let _guard = self.change.lock().await;
        if self.get(name).is_some() {
            return Err(ServerError::NamespaceExists(name.into()));
        }
        if self.read_map().len() >= self.config.limits.max_namespaces {
            return Err(ServerError::TooLarge(format!(
                "the server holds its maximum of {} namespaces",
                self.config.limits.max_namespaces
            )));
        }
        let spec = self.confine_paths(spec)?;
        self.registry.check(&spec)?;
        let (substrate, background) = self.build(&spec)?;
        let meta = NamespaceMeta {
            name: name.to_string(),
            substrate: spec.to_string(),
            created_unix: now(),
        };
        let dir = self.dir_of(name);
        let parent = self.root.join("namespaces");
        let tmp = parent.join(format!(".{}.tmp", hash_key(name)));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| ServerError::io(&tmp, e))?;
        submem_core::persist::write_json(&tmp.join("meta.json"), &meta).map_err(|e| {
            ServerError::Storage {
                path: tmp.clone(),
                message: e.to_string(),
            }
        })?;
        sync_dir(&tmp)?;
        std::fs::rename(&tmp, &dir).map_err(|e| ServerError::io(&dir, e))?;
        sync_dir(&parent)?;
        let handle = NamespaceHandle::open(
            &dir,
            meta,
            substrate,
            background,
            self.jobs.clone(),
            self.config.snapshot_every,
        )
        .await?;
        self.write_map().insert(name.to_string(), handle.clone());
        tracing::info!(namespace = name, substrate = %spec, background, "namespace created");
        Ok(handle)
    }

    /// Deletes namespace `name`: it stops being served at once, its files
    /// (log, snapshots) are removed. Returns whether it existed.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        let _guard = self.change.lock().await;
        let Some(handle) = self.write_map().remove(name) else {
            return Ok(false);
        };
        let trash = self.root.join("trash");
        std::fs::create_dir_all(&trash).map_err(|e| ServerError::io(&trash, e))?;
        let target = trash.join(format!("{}-{}", hash_key(name), now_nanos()));
        std::fs::rename(handle.dir(), &target).map_err(|e| ServerError::io(&target, e))?;
        sync_dir(&self.root.join("namespaces"))?;
        tokio::task::spawn_blocking(move || {
            if let Err(e) = std::fs::remove_dir_all(&target) {
                tracing::warn!(dir = %target.display(), error = %e, "cannot remove a deleted namespace's files");
            }
        });
        tracing::info!(namespace = name, "namespace deleted");
        Ok(true)
    }

    /// Snapshots every namespace (graceful shutdown).
    pub async fn snapshot_all(&self) {
        for h in self.all() {
            if let Err(e) = h.snapshot().await {
                tracing::error!(namespace = %h.meta.name, error = %e, "snapshot at shutdown failed");
            }
        }
    }

    /// The registry namespaces are built from.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}
