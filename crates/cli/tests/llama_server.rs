#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem bench` with the reader, the memory LLM and the judge on a real
//! OpenAI-compatible server: llama.cpp's, from PyPI's
//! `llama-cpp-python[server]` (built once per machine by
//! `scripts/llama-server.sh install`), serving the SmolLM2-135M GGUF the
//! project fetches, on loopback.
//!
//! Between the bench and the server sits a pass-through tap that forwards
//! every request unchanged and adds up the `usage` the server reports, so the
//! test can hold the bench's metering to the server's own count and see how
//! many requests were in flight at once.
//!
//! The tests take turns (one server on 2 cores at a time) and keep every run
//! small: the 135M model prefills ~100 tokens/s here.

#[path = "../../server/tests/suite/common/port.rs"]
mod port;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::Value;

/// One llama.cpp server at a time: two would share 2 cores and slow each other.
static TURN: Mutex<()> = Mutex::new(());

fn take_turn() -> MutexGuard<'static, ()> {
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("crates/bench/tests/fixtures").join(name)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The venv's python with llama-cpp-python[server], installed (and built,
/// once per machine) by the script when missing.
fn llama_python() -> PathBuf {
    let o = Command::new(root().join("scripts/llama-server.sh"))
        .arg("python")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/llama-server.sh");
    assert!(
        o.status.success(),
        "scripts/llama-server.sh python failed: {}",
        text(&o)
    );
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}

/// The SmolLM2 GGUF, fetched into the cache like every submem command does.
fn gguf() -> PathBuf {
    let o = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["models", "fetch"])
        .output()
        .unwrap();
    assert!(o.status.success(), "submem models fetch: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let path = out
        .lines()
        .find(|l| l.ends_with(".gguf"))
        .expect("a .gguf path");
    PathBuf::from(path.trim())
}

/// A llama.cpp server process on 127.0.0.1, killed when dropped.
struct LlamaServer {
    child: Option<Child>,
    port: u16,
    python: PathBuf,
    model: PathBuf,
    log: PathBuf,
}

impl LlamaServer {
    fn start(dir: &Path) -> Self {
        let mut s = LlamaServer {
            child: None,
            port: port::loopback_port(),
            python: llama_python(),
            model: gguf(),
            log: dir.join("llama-server.log"),
        };
        s.spawn();
        s
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(&self.python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&self.model)
            .args(["--model_alias", "smollm2-135m", "--host", "127.0.0.1"])
            .args(["--port", &self.port.to_string()])
            .args(["--n_ctx", "4096", "--n_threads", "2", "--verbose", "false"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start llama_cpp.server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        let models = format!("{}/v1/models", self.url());
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!(
                        "llama_cpp.server exited ({status}): {}",
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
            if probe::answers_200(&models) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("llama_cpp.server did not answer within 120 s");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A readiness probe without a blocking client: one HTTP/1.0 GET over TCP.
mod probe {
    use std::io::{Read, Write};
    pub fn answers_200(url: &str) -> bool {
        let Some(rest) = url.strip_prefix("http://") else {
            return false;
        };
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let Ok(mut s) = std::net::TcpStream::connect(host) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        if s.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
            .is_err()
        {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if n >= 12 && buf[..n].starts_with(b"HTTP/1.1 200"))
    }
}

/// What the tap saw.
#[derive(Default)]
struct Tally {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Σ `usage.prompt_tokens + usage.completion_tokens` over chat answers.
    tokens: AtomicU64,
}

#[derive(Clone)]
struct Tap {
    upstream: String,
    http: reqwest::Client,
    tally: Arc<Tally>,
}

async fn forward(State(tap): State<Tap>, method: Method, uri: Uri, body: Bytes) -> Response {
    let t = &tap.tally;
    t.requests.fetch_add(1, Ordering::SeqCst);
    let now = t.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    t.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let url = format!("{}{}", tap.upstream, uri);
    let sent = tap
        .http
        .request(method, &url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(resp) => {
            let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
            let bytes = resp.bytes().await.unwrap_or_default();
            if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                let u = &v["usage"];
                let n = u["prompt_tokens"].as_u64().unwrap_or(0)
                    + u["completion_tokens"].as_u64().unwrap_or(0);
                t.tokens.fetch_add(n, Ordering::SeqCst);
            }
            (status, bytes).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    t.in_flight.fetch_sub(1, Ordering::SeqCst);
    answer
}

/// Starts the tap in front of `upstream`; returns its base URL.
async fn tap(upstream: String) -> (String, Arc<Tally>) {
    let tally = Arc::new(Tally::default());
    let state = Tap {
        upstream,
        http: reqwest::Client::new(),
        tally: tally.clone(),
    };
    let app = Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), tally)
}

/// `submem bench` against `base_url`: the reader and the memory LLM there,
/// and the judge when `judge` is `openai`.
fn bench(base_url: &str, out: &Path, judge: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_submem"));
    c.arg("bench")
        .args(args)
        .args([
            "--reader",
            "openai",
            "--memory-llm",
            "openai",
            "--judge",
            judge,
        ])
        .args([
            "--reader-sample",
            "all",
            "--answer-tokens",
            "16",
            "--no-baselines",
        ])
        .arg("--out")
        .arg(out)
        .env_remove("SUBMEM_BENCH_ABORT_AFTER")
        .env("SUBMEM_OPENAI_BASE_URL", base_url)
        .env("SUBMEM_OPENAI_MODEL", "smollm2-135m")
        .env("SUBMEM_OPENAI_TIMEOUT_SECS", "120");
    c
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Σ LLM tokens the bench metered: the substrates' write and manage phases
/// (`writes.jsonl`), their reads, the reader's answers and the judge's
/// verdicts (`items.jsonl`), and the judge's checks (`judge_checks.jsonl`).
fn metered_tokens(out: &Path) -> u64 {
    let phase =
        |p: &Value| p["input_tokens"].as_u64().unwrap() + p["output_tokens"].as_u64().unwrap();
    let writes: u64 = jsonl(&out.join("writes.jsonl"))
        .iter()
        .map(|w| phase(&w["write"]) + phase(&w["manage"]))
        .sum();
    let items: u64 = jsonl(&out.join("items.jsonl"))
        .iter()
        .map(|i| {
            i["read_llm_tokens"].as_u64().unwrap()
                + i["reader_tokens"].as_u64().unwrap_or(0)
                + i["judge_tokens"].as_u64().unwrap_or(0)
        })
        .sum();
    let checks: u64 = jsonl(&out.join("judge_checks.jsonl"))
        .iter()
        .map(|c| c["tokens"].as_u64().unwrap())
        .sum();
    writes + items + checks
}

fn run_ok(mut c: Command) -> Output {
    let o = c.output().unwrap();
    assert!(o.status.success(), "bench failed: {}", text(&o));
    o
}

#[test]
fn synthetic_run_meters_what_the_server_counts_with_concurrent_requests() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let server = LlamaServer::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, tally) = rt.block_on(tap(server.url()));
    let out = dir.path().join("synthetic");
    let mut c = bench(
        &url,
        &out,
        "openai",
        &["--substrates", "flexa,m2", "--synth-conversations", "2"],
    );
    c.args([
        "--synth-units",
        "12",
        "--synth-questions",
        "2",
        "--budget",
        "512",
    ])
    // The judge checks through the server are the LoCoMo test's: off here,
    // they were a third of this run's tokens.
    .args(["--jobs", "4", "--judge-checks", "0"]);
    let o = run_ok(c);

    let items = jsonl(&out.join("items.jsonl"));
    assert_eq!(
        items.len(),
        8,
        "2 substrates × 2 conversations × 2 questions"
    );
    assert!(
        items
            .iter()
            .all(|i| i["answered"] == true && i["judge_reply"].is_string()),
        "every item answered and judged: {}",
        text(&o)
    );
    let writes = jsonl(&out.join("writes.jsonl"));
    let flexa_calls: u64 = writes
        .iter()
        .filter(|w| w["substrate"] == "flexa")
        .map(|w| {
            w["write"]["llm_calls"].as_u64().unwrap() + w["manage"]["llm_calls"].as_u64().unwrap()
        })
        .sum();
    assert!(flexa_calls >= 2, "FlexA-Mem's records came from the server");
    let seen = tally.tokens.load(Ordering::SeqCst);
    assert!(seen > 0);
    assert_eq!(
        metered_tokens(&out),
        seen,
        "metered tokens equal the server's usage ({} requests)",
        tally.requests.load(Ordering::SeqCst)
    );
    assert!(
        tally.max_in_flight.load(Ordering::SeqCst) >= 2,
        "--jobs 4 runs requests concurrently"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let run = &summary["runs"][0]["metrics"];
    assert!(run["P4"].is_number() && run["P2"].is_number() && run["answer_recall"].is_number());
}

#[test]
fn locomo_sample_is_written_answered_and_judged_through_the_server() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let server = LlamaServer::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, tally) = rt.block_on(tap(server.url()));
    let out = dir.path().join("locomo");
    let mut c = bench(
        &url,
        &out,
        "openai",
        &["--dataset", "locomo", "--substrates", "flexa"],
    );
    c.arg("--data")
        .arg(fixture("locomo-mini.json"))
        .args(["--budget", "1024"]);
    let o = run_ok(c);
    let report = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(report.contains("reader: openai"), "{report}");
    let items = jsonl(&out.join("items.jsonl"));
    // The 135M judge's verdicts are noise and may be unreadable; what is
    // tested is that every answer went to the judge and came back.
    let answered: Vec<&Value> = items.iter().filter(|i| i["answered"] == true).collect();
    assert!(
        answered.len() >= 3,
        "the fixture's answerable questions: {report}"
    );
    assert!(answered
        .iter()
        .all(|i| i["judge_reply"].is_string() && i["judge_tokens"].as_u64() > Some(0)));
    // The judge checks ran (on by default): the fixture's 8 probes, each
    // judged once through the server with the run's prompt and metered.
    let checks = jsonl(&out.join("judge_checks.jsonl"));
    assert_eq!(checks.len(), 8, "{report}");
    assert!(checks.iter().all(|c| c["judge"] == "openai"
        && c["reply"].is_string()
        && c["tokens"].as_u64() > Some(0)));
    assert_eq!(metered_tokens(&out), tally.tokens.load(Ordering::SeqCst));
    // Its section in the report, and the warning at the top exactly when the
    // summary flags the judge (a 135M judge's verdicts are noise either way).
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("## Judge checks") && md.contains("| openai | 3 | "),
        "{md}"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let j = &summary["judge_checks"]["judges"][0];
    let read = |r: &str| j[r]["n"].as_u64().unwrap() + j[r]["unreadable"].as_u64().unwrap();
    assert_eq!(
        (
            read("strictness"),
            read("leniency_specific"),
            read("leniency_vague")
        ),
        (3, 2, 3)
    );
    let warned = md
        .lines()
        .nth(2)
        .is_some_and(|l| l.starts_with("> **Warning: the judge `openai` is lenient.**"));
    assert_eq!(warned, j["lenient"] == true, "{md}");
    assert_eq!(
        md.contains("the judge `openai` is mostly unreadable.**"),
        j["mostly_unreadable"] == true,
        "{md}"
    );
}

#[test]
fn a_server_killed_mid_run_is_named_and_the_same_command_resumes() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let mut server = LlamaServer::start(dir.path());
    let url = server.url();
    let out = dir.path().join("killed");
    let make = || {
        let mut c = bench(
            &url,
            &out,
            "none",
            &["--substrates", "m2", "--synth-conversations", "1"],
        );
        c.args([
            "--synth-units",
            "40",
            "--synth-questions",
            "6",
            "--budget",
            "512",
        ])
        .env("SUBMEM_OPENAI_TIMEOUT_SECS", "20");
        c
    };
    let mut running = make()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the server once the first answer is logged.
    let items = out.join("items.jsonl");
    let deadline = Instant::now() + Duration::from_secs(300);
    while jsonl(&items).is_empty() {
        assert!(Instant::now() < deadline, "no item within 300 s");
        assert!(
            running.try_wait().unwrap().is_none(),
            "the run ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server.kill();
    let o = running.wait_with_output().unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "a dead server fails the run: {t}");
    assert!(
        t.contains(&format!("127.0.0.1:{}", server.port)),
        "the error names the server: {t}"
    );
    assert!(!t.contains("panicked"), "{t}");
    let before = jsonl(&items).len();
    assert!((1..6).contains(&before), "stopped part-way: {before} items");

    server.spawn();
    let o = run_ok(make());
    assert!(text(&o).contains("resumed"), "{}", text(&o));
    let after = jsonl(&items);
    assert_eq!(after.len(), 6, "each question once");
    assert!(after.iter().all(|i| i["answered"] == true));
}

#[test]
fn an_agentic_episode_is_steered_through_the_server_and_its_replies_mapped() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let server = LlamaServer::start(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, tally) = rt.block_on(tap(server.url()));
    let out = dir.path().join("alfworld");
    let mut c = Command::new(env!("CARGO_BIN_EXE_submem"));
    c.args([
        "-q",
        "bench",
        "--dataset",
        "alfworld",
        "--games",
        "pick:seeds=1",
    ])
    .args([
        "--policy",
        "llm",
        "--reader",
        "openai",
        "--substrates",
        "nomem,m2",
    ])
    .args(["--k", "1", "--budget", "1024", "--steps", "4"])
    .arg("--out")
    .arg(&out)
    .env_remove("SUBMEM_BENCH_ABORT_AFTER")
    .env("SUBMEM_OPENAI_BASE_URL", &url)
    .env("SUBMEM_OPENAI_MODEL", "smollm2-135m")
    .env("SUBMEM_OPENAI_TIMEOUT_SECS", "120");
    let o = run_ok(c);
    let episodes = jsonl(&out.join("episodes.jsonl"));
    assert_eq!(episodes.len(), 2, "{}", text(&o));
    let mut policy_tokens = 0;
    for e in &episodes {
        assert!(
            e["policy"].as_str().unwrap().starts_with("llm-chat:"),
            "{e}"
        );
        let steps = e["steps"].as_u64().unwrap();
        assert!(steps >= 1);
        assert_eq!(e["policy_calls"].as_u64(), Some(steps));
        policy_tokens += e["policy_tokens"].as_u64().unwrap();
        for s in e["step_records"].as_array().unwrap() {
            // Every reply came back and was either mapped onto an admissible
            // command or counted as unmapped.
            assert!(s["reply"].is_string() && s["mapped"].is_boolean(), "{s}");
        }
        let unmapped = e["step_records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["mapped"] == false)
            .count() as u64;
        assert_eq!(e["unmapped_replies"].as_u64(), Some(unmapped));
    }
    // The policy's tokens are what the server counted (rule writers: the
    // substrates made no LLM calls).
    assert_eq!(policy_tokens, tally.tokens.load(Ordering::SeqCst));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| nomem | within | 1024 | 1 |"), "{report}");
}
