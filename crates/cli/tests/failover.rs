#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Two `submem serve` nodes on one PostgreSQL database, 8 clients writing and
//! reading 100 namespaces through both, and a node killed with SIGKILL
//! mid-write 20 times (restarted each time on the same address). Every
//! acknowledged event is served afterwards (through either node), no batch
//! is half there, no namespace's log has a gap or a repeated event (a fork),
//! and a namespace whose owner died is served again within seconds: the
//! longest a client waited between a failed attempt and success is printed
//! and bounded. `SUBMEM_FAILOVER_KILLS` changes the number of kills.

#[path = "../../server/tests/suite/common/pg.rs"]
mod pg;
#[path = "../../server/tests/suite/common/port.rs"]
mod port;

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NAMESPACES: usize = 100;
const CLIENTS: usize = 8;

fn spawn_node(dir: &Path, config: &Path, store: &str, port: u16) -> Child {
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_submem"))
        .args(["serve", "--addr", &addr, "--data-dir"])
        .arg(dir)
        .arg("--config")
        .arg(config)
        .args(["--store", store, "--advertise", &format!("http://{addr}")])
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
    assert!(line.contains("serving"), "node did not start: {line:?}");
    child
}

#[derive(Clone, Debug)]
struct Batch {
    ns: String,
    nonce: String,
    ids: Vec<String>,
}

#[derive(Default)]
struct Shared {
    acked: Mutex<Vec<Batch>>,
    /// Longest wait from a failed attempt to success, per request.
    longest_outage: Mutex<Duration>,
    retries: Mutex<usize>,
    stop: AtomicBool,
}

/// Sends `body` to `path` through the nodes in turn until one answers
/// something other than 503 or a connection error (at most 60 s).
async fn send(
    c: &reqwest::Client,
    nodes: &[String; 2],
    turn: &mut usize,
    path: &str,
    body: &Value,
    shared: &Shared,
) -> (u16, Value) {
    let mut failed_at: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = &nodes[*turn % 2];
        *turn += 1;
        let r = c.post(format!("{node}{path}")).json(body).send().await;
        let answer = match r {
            Ok(r) if r.status() != 503 => {
                let st = r.status().as_u16();
                Some((st, r.json::<Value>().await.unwrap_or(Value::Null)))
            }
            // 503 (owner changing) or a node that is down.
            _ => None,
        };
        if let Some(a) = answer {
            if let Some(t) = failed_at {
                let mut l = shared.longest_outage.lock().unwrap();
                *l = (*l).max(t.elapsed());
            }
            return a;
        }
        *shared.retries.lock().unwrap() += 1;
        failed_at.get_or_insert_with(Instant::now);
        assert!(
            Instant::now() < deadline,
            "{path}: no node served it for 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn found(
    c: &reqwest::Client,
    nodes: &[String; 2],
    turn: &mut usize,
    b: &Batch,
    shared: &Shared,
) -> usize {
    let body = json!({"question": b.nonce, "budget": 8192, "k": 50});
    let (st, v) = send(
        c,
        nodes,
        turn,
        &format!("/v1/namespaces/{}/read", b.ns),
        &body,
        shared,
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let shown: HashSet<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["source_id"].as_str().unwrap())
        .collect();
    b.ids
        .iter()
        .filter(|id| shown.contains(id.as_str()))
        .count()
}

async fn client(id: usize, nodes: [String; 2], shared: Arc<Shared>, seed: u64) {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut turn = id;
    let mut mine: Vec<Batch> = Vec::new();
    for n in 0.. {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let ns = format!("fo{}", rng.random_range(0..NAMESPACES));
        let nonce = format!("nonce{id}x{n}");
        let ids: Vec<String> = (0..rng.random_range(1..=5))
            .map(|i| format!("c{id}:{n}:{i}"))
            .collect();
        let events: Vec<Value> = ids
            .iter()
            .map(|i| {
                json!({"kind": "turn", "session_id": "s", "speaker": "u",
                "text": format!("{nonce} payload {i} about the harbour"), "source_id": i})
            })
            .collect();
        let path = format!("/v1/namespaces/{ns}/events");
        let (st, v) = send(
            &c,
            &nodes,
            &mut turn,
            &path,
            &json!({ "events": events }),
            &shared,
        )
        .await;
        // 409: an earlier attempt of this very batch was stored before its
        // node died without answering; a batch is one log record, so it is
        // all there.
        assert!(
            st == 200 || (st == 409 && v["error"]["code"] == "duplicate_source"),
            "{st} {v}"
        );
        let batch = Batch { ns, nonce, ids };
        shared.acked.lock().unwrap().push(batch.clone());
        mine.push(batch);
        // Read one of this client's acknowledged batches back through
        // whichever node answers.
        if n % 3 == 0 {
            let b = &mine[rng.random_range(0..mine.len())];
            let got = found(&c, &nodes, &mut turn, b, &shared).await;
            assert_eq!(
                got,
                b.ids.len(),
                "acknowledged batch {} not served",
                b.nonce
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_node_loses_nothing_and_its_namespaces_move() {
    let kills: usize = std::env::var("SUBMEM_FAILOVER_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let cluster = pg::PgCluster::start();
    let url = cluster.database("failover").await;
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("submem.toml");
    std::fs::write(
        &config,
        "[server]\nsnapshot_every = 8\nowner_sessions = 4\n",
    )
    .unwrap();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [port::loopback_port(), port::loopback_port()];
    let nodes = ports.map(|p| format!("http://127.0.0.1:{p}"));
    let mut children = [
        spawn_node(dirs[0].path(), &config, &url, ports[0]),
        spawn_node(dirs[1].path(), &config, &url, ports[1]),
    ];
    let c = reqwest::Client::new();
    for i in 0..NAMESPACES {
        let r = c
            .post(format!("{}/v1/namespaces", nodes[i % 2]))
            .json(&json!({"name": format!("fo{i}"), "substrate": "m2"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }

    let shared = Arc::new(Shared::default());
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| tokio::spawn(client(i, nodes.clone(), shared.clone(), 7 + i as u64)))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(99);
    for k in 0..kills {
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..600))).await;
        let victim = k % 2;
        children[victim].kill().unwrap(); // SIGKILL
        children[victim].wait().unwrap();
        children[victim] = spawn_node(dirs[victim].path(), &config, &url, ports[victim]);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    shared.stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();

    // Every acknowledged event is served, through either node.
    let acked = shared.acked.lock().unwrap().clone();
    let mut turn = 0;
    for b in &acked {
        assert_eq!(
            found(&c, &nodes, &mut turn, b, &shared).await,
            b.ids.len(),
            "lost {}",
            b.nonce
        );
    }
    // Each namespace's log is gapless, and no event is in it twice.
    let db = pg::connect(&url).await;
    let mut records = 0;
    for i in 0..NAMESPACES {
        let rows = db
            .query(
                "SELECT e.seq, e.record FROM submem_events e
                 JOIN submem_namespaces n ON n.id = e.namespace_id
                 WHERE n.name = $1 ORDER BY e.seq",
                &[&format!("fo{i}")],
            )
            .await
            .unwrap();
        let seqs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "fo{i}: {seqs:?}");
        let mut seen = HashSet::new();
        for r in &rows {
            let rec: Value = serde_json::from_slice(r.get::<_, &[u8]>(1)).unwrap();
            for e in rec["events"].as_array().into_iter().flatten() {
                let id = e["source_id"].as_str().unwrap().to_string();
                assert!(seen.insert(id.clone()), "fo{i}: {id} logged twice");
            }
        }
        records += rows.len();
    }
    let events: usize = acked.iter().map(|b| b.ids.len()).sum();
    let longest = *shared.longest_outage.lock().unwrap();
    eprintln!(
        "failover: {kills} SIGKILLs in {:.1} s, {} batches / {events} events acknowledged by \
         {CLIENTS} clients over {NAMESPACES} namespaces ({records} log records), 0 lost, \
         {} retried attempts, longest wait for a namespace to be served again {:.2} s",
        elapsed.as_secs_f64(),
        acked.len(),
        shared.retries.lock().unwrap(),
        longest.as_secs_f64()
    );
    assert!(
        acked.len() > kills,
        "the clients wrote too little to test anything"
    );
    assert!(
        longest < Duration::from_secs(10),
        "a namespace stayed unserved for {longest:?}"
    );
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}
