#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem serve` and `submem mcp` as processes: the server is killed with
//! SIGKILL at random points while clients write acknowledged batches, then
//! restarted; every acknowledged event must be readable and a batch in
//! flight at the kill is there whole or not at all. The test runs 5 rounds;
//! `SUBMEM_CRASH_ROUNDS=100` (scripts/serve-crash-loop.sh) runs more. The MCP
//! test drives `submem mcp` with the official SDK's client over stdio. The
//! crash loop runs on the file store and on the PostgreSQL store.

#[path = "../../server/tests/suite/common/pg.rs"]
mod pg;

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn spawn_server_on(dir: &Path, config: &Path, store: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .arg("--config")
        .arg(config)
        .args(["--store", store])
        .env("SUBMEM_FETCH", "false")
        .env_remove("SUBMEM_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, format!("http://{addr}"))
}

#[derive(Default)]
struct Tally {
    /// Acknowledged batches: namespace, nonce, ids.
    acked: Vec<(String, String, Vec<String>)>,
    /// Batches sent without an answer (in flight at the kill).
    in_flight: Vec<(String, String, Vec<String>)>,
}

async fn ids_found(
    c: &reqwest::Client,
    base: &str,
    ns: &str,
    nonce: &str,
    ids: &[String],
) -> usize {
    let body = json!({"question": nonce, "budget": 8192, "k": 50});
    let r = c
        .post(format!("{base}/v1/namespaces/{ns}/read"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let shown: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source_id"].as_str().unwrap())
        .collect();
    ids.iter().filter(|id| shown.contains(&id.as_str())).count()
}

async fn writer(
    c: reqwest::Client,
    base: String,
    ns: String,
    tag: String,
    tally: Arc<Mutex<Tally>>,
    seed: u64,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for b in 0.. {
        let n = rng.random_range(1..=12);
        let nonce = format!("nonce{tag}x{b}");
        let ids: Vec<String> = (0..n).map(|i| format!("{tag}:{b}:{i}")).collect();
        let events: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"kind": "turn", "session_id": "s", "speaker": "u",
                "text": format!("{nonce} payload {id} with some words"), "source_id": id})
            })
            .collect();
        let sent = (ns.clone(), nonce, ids);
        tally.lock().unwrap().in_flight.push(sent.clone());
        let r = c
            .post(format!("{base}/v1/namespaces/{ns}/events"))
            .json(&json!({ "events": events }))
            .send()
            .await;
        match r {
            Ok(r) if r.status() == 200 => {
                let mut t = tally.lock().unwrap();
                t.in_flight.retain(|x| x.1 != sent.1);
                t.acked.push(sent);
            }
            Ok(r) => panic!(
                "write refused: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ),
            Err(_) => return, // the server is gone
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_acknowledged_writes_loses_nothing() {
    crash_loop("file").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_acknowledged_writes_loses_nothing_on_postgres() {
    let cluster = pg::PgCluster::start();
    let url = cluster.database("crash").await;
    crash_loop(&url).await;
}

async fn crash_loop(store: &str) {
    let rounds: usize = std::env::var("SUBMEM_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    // Snapshots every 3 records, so kills also land mid-snapshot and
    // restarts restore a snapshot and replay the log after it.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("submem.toml");
    std::fs::write(&config, "[server]\nsnapshot_every = 3\n").unwrap();
    let client = reqwest::Client::new();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let spaces = ["crash-bm25", "crash-recent"];
    let started = Instant::now();
    for round in 0..=rounds {
        let (mut child, base) = spawn_server_on(dir.path(), &config, store);
        for (ns, sub) in spaces.iter().zip(["m2:fill=true", "m2"]) {
            let r = client
                .post(format!("{base}/v1/namespaces"))
                .json(&json!({"name": ns, "substrate": sub}))
                .send()
                .await
                .unwrap();
            assert!(r.status() == 201 || r.status() == 409, "{}", r.status());
        }
        // Everything acknowledged so far is there; each in-flight batch is
        // there whole or not at all.
        let (acked, in_flight) = {
            let mut t = tally.lock().unwrap();
            (t.acked.clone(), std::mem::take(&mut t.in_flight))
        };
        let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
        for (ns, nonce, ids) in &acked {
            *expected.entry(ns.as_str()).or_default() += ids.len();
            assert_eq!(
                ids_found(&client, &base, ns, nonce, ids).await,
                ids.len(),
                "round {round}: lost events of {nonce}"
            );
        }
        let mut torn_whole = 0;
        for (ns, nonce, ids) in &in_flight {
            let found = ids_found(&client, &base, ns, nonce, ids).await;
            assert!(
                found == 0 || found == ids.len(),
                "round {round}: batch {nonce} half there ({found}/{})",
                ids.len()
            );
            if found == ids.len() {
                torn_whole += 1;
                *expected.entry(ns.as_str()).or_default() += ids.len();
                // It is durable now: count it as acknowledged.
                tally
                    .lock()
                    .unwrap()
                    .acked
                    .push((ns.clone(), nonce.clone(), ids.clone()));
            }
        }
        for ns in spaces {
            let v: Value = client
                .get(format!("{base}/v1/namespaces/{ns}/footprint"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(
                v["events"].as_u64().unwrap() as usize,
                expected.get(ns).copied().unwrap_or(0),
                "round {round}: {v}"
            );
        }
        let snapshots = std::fs::read_dir(dir.path().join("namespaces"))
            .into_iter()
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("snap-")
            })
            .count();
        eprintln!("round {round}: {} batches acknowledged so far, {} in flight at the kill ({torn_whole} of them made it whole), {snapshots} snapshot dirs",
            acked.len(), in_flight.len());
        if round == rounds {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        // Writers on both namespaces, killed at a random point.
        let mut tasks = Vec::new();
        for (w, ns) in spaces.iter().enumerate() {
            tasks.push(tokio::spawn(writer(
                client.clone(),
                base.clone(),
                ns.to_string(),
                format!("r{round}w{w}"),
                tally.clone(),
                rng.random(),
            )));
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(30..300))).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for t in tasks {
            t.await.unwrap();
        }
    }
    let t = tally.lock().unwrap();
    let events: usize = t.acked.iter().map(|b| b.2.len()).sum();
    eprintln!(
        "crash loop ({}): {rounds} SIGKILLs, {} batches / {events} events acknowledged, 0 lost, {:.1} s",
        if store == "file" { "file store" } else { "PostgreSQL store" },
        t.acked.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(events > 0, "the writers wrote nothing before the kills");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_with_the_official_client() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;

    let dir = tempfile::tempdir().unwrap();
    let start = |dir: &Path| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_submem"));
        cmd.args(["mcp", "--data-dir"])
            .arg(dir)
            .env("SUBMEM_FETCH", "false")
            .stderr(Stdio::null());
        TokioChildProcess::new(cmd).unwrap()
    };
    async fn call(
        c: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
        name: &'static str,
        args: Value,
    ) -> (bool, Value) {
        let r = c
            .call_tool(
                CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        let text = v["content"][0]["text"].as_str().unwrap().to_string();
        (
            r.is_error == Some(true),
            serde_json::from_str(&text).unwrap(),
        )
    }

    let client = ().serve(start(dir.path())).await.unwrap();
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for t in ["remember", "recall", "forget", "list_namespaces"] {
        assert!(tools.contains(&t.to_string()), "{tools:?}");
    }
    let (err, v) = call(
        &client,
        "remember",
        json!({"namespace": "me", "text": "the spare key is under the blue pot"}),
    )
    .await;
    assert!(!err, "{v}");
    let id = v["source_ids"][0].as_str().unwrap().to_string();
    let (err, v) = call(&client, "remember", json!({"namespace": "me", "events": [
        {"kind": "turn", "session_id": "s", "speaker": "me", "text": "my dentist is Dr Okafor", "source_id": "t1"}]})).await;
    assert!(!err, "{v}");
    let (_, v) = call(
        &client,
        "recall",
        json!({"namespace": "me", "question": "where is the spare key?", "budget": 512}),
    )
    .await;
    assert!(v["text"].as_str().unwrap().contains("blue pot"), "{v}");
    let (err, v) = call(
        &client,
        "recall",
        json!({"namespace": "me", "question": "q", "budget": 0}),
    )
    .await;
    assert!(err && v["error"]["code"] == "bad_request", "{v}");
    let (err, v) = call(
        &client,
        "recall",
        json!({"namespace": "nobody", "question": "q"}),
    )
    .await;
    assert!(err && v["error"]["code"] == "namespace_not_found", "{v}");
    let (_, v) = call(
        &client,
        "forget",
        json!({"namespace": "me", "source_ids": [id]}),
    )
    .await;
    assert_eq!(v["forgotten"], 1, "{v}");
    client.cancel().await.unwrap();

    // A new process over the same directory remembers (and forgot).
    let client = ().serve(start(dir.path())).await.unwrap();
    // Listing opens nothing: a namespace is resident once a tool uses it.
    let (_, v) = call(&client, "list_namespaces", json!({})).await;
    assert_eq!(v["namespaces"][0]["resident"], false, "{v}");
    let (_, v) = call(
        &client,
        "recall",
        json!({"namespace": "me", "question": "who is my dentist? spare key", "budget": 512}),
    )
    .await;
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("Okafor") && !text.contains("blue pot"), "{v}");
    let (_, v) = call(&client, "list_namespaces", json!({})).await;
    assert_eq!(v["namespaces"][0]["events"], 1, "{v}");
    client.cancel().await.unwrap();
}

#[test]
fn serve_refuses_a_public_address_without_keys_and_hashes_keys() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("without API keys"),
        "{err}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "refused before touching the data directory"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--reports")
        .arg(dir.path().join("no-such-run"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("no-such-run") && err.contains("not a directory"),
        "{err}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "a bad --reports is refused before touching the data directory"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["serve", "--hash-key", "test"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    );
}
