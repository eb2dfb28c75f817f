//! The bridge to text environments: a Python process (the script
//! `crates/bench/python/agent_envs.py`, compiled into the binary and written
//! under the cache on first use) that speaks one JSON object a line on its
//! standard input and output, and plays TextWorld, ALFWorld-format and
//! ScienceWorld games with the environments' own packages.
//!
//! Every request has a timeout ([`BridgeConfig::step_timeout`], or
//! [`BridgeConfig::make_timeout`] for generating a game, resetting one and
//! starting): a bridge that does not answer in time is killed, one that
//! exits is reported with the last lines of its standard error, so an episode
//! never hangs on its environment.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::{BenchError, Result};

/// The bridge script, as shipped in the binary.
pub const BRIDGE_SCRIPT: &str = include_str!("../../python/agent_envs.py");

/// The bridge protocol this harness speaks (the script's `PROTOCOL`).
pub const PROTOCOL: u64 = 1;

/// How to install the environments (said by every error that finds them missing).
pub const INSTALL_HINT: &str = "install them with `scripts/agent-envs.sh install` (a virtual environment \
     under the cache with PyPI's textworld, alfworld and scienceworld; ScienceWorld also needs a Java \
     runtime such as Debian's openjdk-17-jre-headless), or point SUBMEM_AGENT_PYTHON at a Python that has them";

/// Which environment a game is played in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvKind {
    /// TextWorld (`tw-make` games: cooking, custom, treasure hunter, ...).
    TextWorld,
    /// ALFWorld's PDDL household games, played through TextWorld.
    Alfworld,
    /// ScienceWorld's simulator (needs Java).
    ScienceWorld,
}

impl EnvKind {
    /// Parses a `--dataset` name; `None` for datasets that are not environments.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "textworld" | "tw" => Some(EnvKind::TextWorld),
            "alfworld" => Some(EnvKind::Alfworld),
            "scienceworld" | "sciworld" => Some(EnvKind::ScienceWorld),
            _ => None,
        }
    }

    /// The name in results and in the bridge protocol.
    pub fn name(self) -> &'static str {
        match self {
            EnvKind::TextWorld => "textworld",
            EnvKind::Alfworld => "alfworld",
            EnvKind::ScienceWorld => "scienceworld",
        }
    }
}

impl std::fmt::Display for EnvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the bridge runs and how long it may take.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The Python that has the environment packages.
    pub python: PathBuf,
    /// Where generated games and the bridge script are kept.
    pub cache: PathBuf,
    /// Longest wait for one step's answer.
    pub step_timeout: Duration,
    /// Longest wait for starting, generating a game or resetting one (a
    /// TextWorld cooking game takes seconds to generate, an ALFWorld reset
    /// runs a planner for the walkthrough).
    pub make_timeout: Duration,
}

impl BridgeConfig {
    /// The defaults under `cache` (the submem cache directory): Python from
    /// `SUBMEM_AGENT_PYTHON`, else the virtual environment
    /// `scripts/agent-envs.sh install` makes there; 30 s a step, 180 s to
    /// start, generate or reset.
    pub fn new(cache: &Path) -> Self {
        let python = std::env::var_os("SUBMEM_AGENT_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_python(cache));
        BridgeConfig {
            python,
            cache: cache.join("agent-envs"),
            step_timeout: Duration::from_secs(30),
            make_timeout: Duration::from_secs(180),
        }
    }
}

/// The Python of the virtual environment `scripts/agent-envs.sh install`
/// makes under the submem cache directory `cache`.
pub fn default_python(cache: &Path) -> PathBuf {
    cache
        .join("agent-envs")
        .join("venv")
        .join("bin")
        .join("python")
}

/// One observation of a game, as the environment reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvState {
    /// The goal (TextWorld's objective; ALFWorld's "Your task is to" line;
    /// ScienceWorld's task description).
    pub objective: String,
    /// What the environment said (banner removed).
    pub observation: String,
    /// The commands the environment accepts now.
    pub admissible: Vec<String>,
    /// Points so far.
    pub score: f64,
    /// Points a win gives.
    pub max_score: f64,
    /// Whether the goal is reached.
    pub won: bool,
    /// Whether the game is lost.
    pub lost: bool,
    /// Whether the game is over.
    pub done: bool,
    /// Whether the command that led here was not admissible.
    #[serde(default)]
    pub invalid: bool,
    /// Seconds the environment itself spent on the step, measured inside
    /// the bridge (answers to `step` only).
    #[serde(default)]
    pub env_seconds: f64,
    /// The game's own solution (answers to `reset` only; `None` when the
    /// environment has none).
    #[serde(default)]
    pub walkthrough: Option<Vec<String>>,
}

/// A running bridge process.
pub struct Bridge {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    next_id: u64,
    config: BridgeConfig,
    /// What the bridge reported about the environments it can play.
    pub hello: Value,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("python", &self.config.python)
            .field("pid", &self.child.id())
            .finish()
    }
}

fn bridge_error(reason: impl Into<String>) -> BenchError {
    BenchError::Environment {
        context: "environment bridge".into(),
        reason: reason.into(),
    }
}

/// Writes the shipped script under the cache (once per version of it) and
/// returns its path.
fn script_path(cache: &Path) -> Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    BRIDGE_SCRIPT.hash(&mut h);
    let dir = cache.join("bridge");
    let path = dir.join(format!("agent_envs-{:016x}.py", h.finish()));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
    // Written aside and renamed: two processes starting at once never read
    // half a script.
    let tmp = dir.join(format!(".agent_envs-{}.py", std::process::id()));
    std::fs::write(&tmp, BRIDGE_SCRIPT).map_err(|e| BenchError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| BenchError::io(&path, e))?;
    Ok(path)
}

impl Bridge {
    /// Starts the bridge and checks that it speaks this protocol.
    pub async fn start(config: &BridgeConfig) -> Result<Self> {
        if !config.python.is_file() {
            return Err(bridge_error(format!(
                "no Python at {}: the text environments are not installed; {INSTALL_HINT}",
                config.python.display()
            )));
        }
        let script = script_path(&config.cache)?;
        let games = config.cache.join("games");
        let mut child = Command::new(&config.python)
            .arg(&script)
            .env("SUBMEM_ENV_CACHE", &games)
            .env("PYTHONUNBUFFERED", "1")
            .env("TOKENIZERS_PARALLELISM", "false")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                bridge_error(format!(
                    "cannot start {}: {e}; {INSTALL_HINT}",
                    config.python.display()
                ))
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(bridge_error("the bridge's pipes were not opened"));
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "submem_bench::bridge", "{line}");
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == 20 {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        let mut bridge = Bridge {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            stderr_tail,
            next_id: 0,
            config: config.clone(),
            hello: Value::Null,
        };
        let hello = bridge
            .request(json!({"op": "hello"}), config.make_timeout)
            .await?;
        if hello.get("protocol").and_then(Value::as_u64) != Some(PROTOCOL) {
            return Err(bridge_error(format!(
                "the bridge speaks protocol {:?}, this harness {PROTOCOL}",
                hello.get("protocol")
            )));
        }
        bridge.hello = hello;
        Ok(bridge)
    }

    /// Whether `env`'s package imports in the bridge's Python; the import
    /// error otherwise.
    pub fn check(&self, env: EnvKind) -> Result<()> {
        let envs = self.hello.get("envs");
        if envs
            .and_then(|e| e.get(env.name()))
            .is_some_and(|v| !v.is_null())
        {
            return Ok(());
        }
        let why = envs
            .and_then(|e| e.get(format!("{}_error", env.name())))
            .and_then(Value::as_str)
            .unwrap_or("not importable");
        Err(bridge_error(format!(
            "{} ({}) has no {env} package: {why}; {INSTALL_HINT}",
            self.config.python.display(),
            self.hello
                .get("python")
                .and_then(Value::as_str)
                .unwrap_or("?")
        )))
    }

    /// Generates (or finds in the cache) the game `spec` describes; its path.
    pub async fn make(
        &mut self,
        env: EnvKind,
        spec: &serde_json::Map<String, Value>,
    ) -> Result<String> {
        let out = self
            .request(
                json!({
                    "op": "make",
                    "env": env.name(),
                    "spec": spec,
                    // The bridge stops a generation itself a little before
                    // the harness would stop the bridge.
                    "timeout": (self.config.make_timeout.as_secs_f64() * 0.95).max(1.0),
                }),
                self.config.make_timeout,
            )
            .await?;
        out.get("game")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bridge_error("`make` answered without a game"))
    }

    /// Starts `game` from the beginning.
    pub async fn reset(&mut self, env: EnvKind, game: &str, step_limit: u32) -> Result<EnvState> {
        let out = self
            .request(
                json!({"op": "reset", "env": env.name(), "game": game, "step_limit": step_limit}),
                self.config.make_timeout,
            )
            .await?;
        state(out)
    }

    /// Plays `command`.
    pub async fn step(&mut self, command: &str) -> Result<EnvState> {
        let out = self
            .request(
                json!({"op": "step", "command": command}),
                self.config.step_timeout,
            )
            .await?;
        state(out)
    }

    /// Asks the bridge to exit, and kills it if it does not within a second.
    pub async fn close(mut self) {
        let _ = self
            .request(json!({"op": "close"}), Duration::from_secs(1))
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
        let _ = self.child.start_kill();
    }

    /// The process id (tests kill it to check that a dead bridge is an error).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    fn stderr_tail(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    async fn died(&mut self) -> BenchError {
        // Give the stderr reader a moment to collect the last words.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" ({s})"),
            _ => String::new(),
        };
        let tail = self.stderr_tail();
        bridge_error(format!(
            "the bridge process exited{status}{}",
            if tail.is_empty() {
                String::new()
            } else {
                format!("; its last words:\n{tail}")
            }
        ))
    }

    async fn request(&mut self, mut req: Value, timeout: Duration) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        req["id"] = json!(id);
        let mut line = req.to_string();
        line.push('\n');
        if self.stdin.write_all(line.as_bytes()).await.is_err() || self.stdin.flush().await.is_err()
        {
            return Err(self.died().await);
        }
        let answer = match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Err(_) => {
                let _ = self.child.start_kill();
                return Err(bridge_error(format!(
                    "no answer within {} s (the bridge was stopped; the timeout is a setting)",
                    timeout.as_secs_f64()
                )));
            }
            Ok(Err(e)) => {
                return Err(bridge_error(format!(
                    "cannot read the bridge's answer: {e}"
                )))
            }
            Ok(Ok(None)) => return Err(self.died().await),
            Ok(Ok(Some(a))) => a,
        };
        let value: Value = serde_json::from_str(&answer)
            .map_err(|e| bridge_error(format!("unreadable answer {answer:?}: {e}")))?;
        if value.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(bridge_error(format!(
                "answer {answer:?} is not to request {id}"
            )));
        }
        if value.get("ok").and_then(Value::as_bool) != Some(true) {
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or("error");
            let why = value
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            let hint = if kind == "missing" {
                format!("; {INSTALL_HINT}")
            } else {
                String::new()
            };
            return Err(bridge_error(format!("{why}{hint}")));
        }
        Ok(value)
    }
}

fn state(value: Value) -> Result<EnvState> {
    serde_json::from_value(value).map_err(|e| bridge_error(format!("malformed state: {e}")))
}
