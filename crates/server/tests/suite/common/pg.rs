//! A private PostgreSQL cluster for one test binary, started and removed by
//! `scripts/pg-test-cluster.sh` (which says what to install when the server
//! binaries are missing: the test then fails, it never skips).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct PgCluster {
    dir: PathBuf,
    /// URL of the cluster's `postgres` database.
    pub url: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-cluster.sh")
}

impl PgCluster {
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "submem-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .output()
            .expect("run scripts/pg-test-cluster.sh");
        assert!(
            out.status.success(),
            "cannot start a PostgreSQL test cluster:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
        PgCluster { dir, url }
    }

    /// A new empty database on the cluster; its URL.
    pub async fn database(&self, name: &str) -> String {
        let client = self.client().await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        self.url.replace("/postgres", &format!("/{name}"))
    }

    /// A client of the `postgres` database.
    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }

    /// The cluster's data directory (relation files live under `base/`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
}

/// Ends every database session of the submem nodes whose application name
/// starts with `prefix` (`"submem"`: all of them): what the database sees
/// when those nodes' processes die. Returns how many it ended, once they are
/// gone: without the timeout `pg_terminate_backend` only signals, and a
/// backend still exiting still holds its advisory locks.
pub async fn end_sessions(url: &str, prefix: &str) -> i64 {
    let c = connect(url).await;
    let row = c
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
             FROM pg_stat_activity
             WHERE application_name LIKE $1 || '%' AND pid <> pg_backend_pid()",
            &[&prefix],
        )
        .await
        .unwrap();
    row.get(0)
}

pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}
