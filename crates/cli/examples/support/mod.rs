//! What the server examples share: `submem serve` processes (the release
//! binary beside the example), their resident memory and metrics, and a
//! private PostgreSQL cluster (the tests' helper, over
//! `scripts/pg-test-cluster.sh`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../server/tests/suite/common/pg.rs"]
pub mod pg;
#[path = "../../../server/tests/suite/common/port.rs"]
mod port;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `submem` binary built with the example (`target/<profile>/submem`).
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("submem");
    assert!(
        bin.exists(),
        "{} is missing: build it first (cargo build --release -p submem-cli --bin submem --examples)",
        bin.display()
    );
    bin
}

pub use port::loopback_port;

/// A running `submem serve`.
pub struct Node {
    pub child: Child,
    pub base: String,
    pub port: u16,
}

/// Starts `submem serve` on `port` with `args` after `--data-dir DIR`;
/// returns once it prints its address (it answers `/healthz` from then on).
pub fn spawn(dir: &Path, port: u16, config: &Path, extra: &[&str]) -> Node {
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(binary())
        .args(["--config"])
        .arg(config)
        .args(["serve", "--addr", &addr, "--data-dir"])
        .arg(dir)
        .args(extra)
        .env("SUBMEM_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving"), "node did not start: {line:?}");
    Node {
        child,
        base: format!("http://{addr}"),
        port,
    }
}

impl Node {
    /// Resident memory of the process, bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    }

    /// SIGKILL.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `GET base/healthz` answers 200; the time it took.
pub async fn until_healthy(c: &reqwest::Client, base: &str, since: Instant) -> Duration {
    loop {
        if let Ok(r) = c.get(format!("{base}/healthz")).send().await {
            if r.status() == 200 {
                return since.elapsed();
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// POSTs JSON and checks the answer is a success.
pub async fn post(c: &reqwest::Client, url: &str, body: &Value) -> Value {
    let r = c.post(url).json(body).send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{url}: {status} {v}");
    v
}

/// Median and 99th percentile (ms) of durations in seconds.
pub fn p50_p99(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if xs.is_empty() {
            return 0.0;
        }
        let i = ((xs.len() - 1) as f64 * q).round() as usize;
        xs[i] * 1e3
    };
    (at(0.5), at(0.99))
}

/// The value of an unlabelled metric of `GET base/metrics` (0 when absent).
pub async fn metric(c: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = c
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}
