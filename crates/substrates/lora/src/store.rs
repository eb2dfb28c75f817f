//! Persistence of M9: `state.json` (events, QA pairs, versions and flags per
//! namespace, and a fingerprint of the base model and LoRA shape) plus one
//! safetensors file per trained adapter, written atomically; the manifest is
//! written last, so an interrupted persist leaves a directory that restore
//! refuses. Restore builds the whole new state before swapping it in, so a
//! torn, foreign or mismatched directory leaves the memory unchanged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::{Error, Namespace, Result};
use submem_kit::persist::{
    begin_persist, check_manifest, ensure, read_json, write_json, write_manifest,
};
use submem_kit::spaces::Spaces;

use crate::llama::LlamaConfig;
use crate::lora::Adapter;
use crate::qa::QaPair;
use crate::space::{EventMeta, Space};
use crate::train::TrainReport;

/// Name written into the manifest.
pub const STORE_NAME: &str = "M9 lora-adapter";
/// Version of the files below.
pub const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "state.json";

#[derive(Serialize, Deserialize)]
struct SpaceFile {
    namespace: Namespace,
    events: Vec<EventMeta>,
    pairs: Vec<QaPair>,
    version: u64,
    trained_version: u64,
    forgotten_since_training: bool,
    adapter_file: Option<String>,
    last_training: Option<TrainReport>,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    fingerprint: String,
    spaces: Vec<SpaceFile>,
}

fn adapter_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Writes `spaces` to `dir` under the memory's `fingerprint` and records the
/// adapters' bytes as the spaces' disk size.
pub(crate) fn persist(spaces: &Spaces<Space>, fingerprint: &str, dir: &Path) -> Result<()> {
    let snapshot: Vec<(Namespace, Space)> = {
        let spaces = spaces.read();
        let mut v: Vec<_> = spaces.iter().map(|(n, s)| (n.clone(), s.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    begin_persist(dir)?;
    let mut files = Vec::with_capacity(snapshot.len());
    let mut disk = 0u64;
    for (i, (ns, sp)) in snapshot.into_iter().enumerate() {
        let adapter_file = match &sp.adapter {
            Some(a) => {
                let name = format!("adapter-{i}.safetensors");
                let path = adapter_path(dir, &name);
                let tmp = adapter_path(dir, &format!("{name}.tmp"));
                a.save(&tmp).map_err(|e| e.into_core("persist"))?;
                std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
                disk += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                Some(name)
            }
            None => None,
        };
        files.push(SpaceFile {
            namespace: ns,
            events: sp.events,
            pairs: sp.pairs,
            version: sp.version,
            trained_version: sp.trained_version,
            forgotten_since_training: sp.forgotten_since_training,
            adapter_file,
            last_training: sp.last_training,
        });
    }
    // Adapters of namespaces that no longer exist would only waste space.
    let keep: std::collections::HashSet<String> = files
        .iter()
        .filter_map(|f| f.adapter_file.clone())
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("adapter-")
                && name.ends_with(".safetensors")
                && !keep.contains(&name)
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let state = StateFile {
        fingerprint: fingerprint.to_string(),
        spaces: files,
    };
    write_json(&dir.join(STATE_FILE), &state)?;
    write_manifest(dir, STORE_NAME, FORMAT_VERSION)?;
    spaces.set_disk_bytes(disk);
    Ok(())
}

/// Replaces `spaces` with those stored in `dir`, refusing a store written
/// under another `fingerprint`; adapters are loaded for the base model's
/// shape `cfg` at `rank` and `alpha`.
pub(crate) fn restore(
    spaces: &Spaces<Space>,
    fingerprint: &str,
    cfg: &LlamaConfig,
    rank: usize,
    alpha: f64,
    dir: &Path,
) -> Result<()> {
    check_manifest(dir, STORE_NAME, FORMAT_VERSION)?;
    let state: StateFile = read_json(&dir.join(STATE_FILE))?;
    ensure(dir, state.fingerprint == fingerprint, || {
        format!(
            "store holds adapters for {:?}, this instance is {:?}",
            state.fingerprint, fingerprint
        )
    })?;
    let mut restored = HashMap::with_capacity(state.spaces.len());
    let mut disk = 0u64;
    for f in state.spaces {
        let adapter = match &f.adapter_file {
            Some(name) => {
                let path = adapter_path(dir, name);
                if !path.is_file() || name.contains('/') {
                    return Err(Error::store(&path, "adapter file is missing"));
                }
                disk += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let a = Adapter::load(&path, cfg, rank, alpha)
                    .map_err(|e| Error::store(&path, format!("unreadable adapter: {e}")))?;
                Some(Arc::new(a))
            }
            None => None,
        };
        restored.insert(
            f.namespace,
            Space {
                events: f.events,
                pairs: f.pairs,
                adapter,
                version: f.version,
                trained_version: f.trained_version,
                forgotten_since_training: f.forgotten_since_training,
                last_training: f.last_training,
            },
        );
    }
    *spaces.write() = restored;
    spaces.set_disk_bytes(disk);
    Ok(())
}
