//! The PostgreSQL store: namespaces, event logs and snapshots in one
//! database that any number of stateless `submem serve` nodes share.
//!
//! **Tables** (`crates/server/migrations/`): `submem_namespaces` (the
//! catalog), `submem_events` (one row per log record, keyed by
//! `(namespace_id, seq)`), `submem_snapshots` (substrate states, each tied by
//! a foreign key to the record it covers) and `submem_owners` (which node
//! serves which namespace).
//!
//! **One writer per namespace.** A node serves a namespace only while it
//! holds the namespace's advisory lock on one of its *owner sessions*
//! ([`session`]): dedicated connections, `owner_sessions` of them, that also
//! carry every append of the namespaces they hold. An append that commits
//! therefore proves its session, and with it the lock, was alive. When a node
//! dies its sessions end, PostgreSQL releases their locks, and the next
//! request for one of its namespaces (on any node) takes the lock and opens
//! the namespace from the database. The `(namespace_id, seq)` key is the
//! second fence: a stale writer's append collides with a live row and fails
//! rather than forking the log, and the writer gives the namespace up.
//!
//! **Durability.** Appends are single-statement transactions committed with
//! the session's `synchronous_commit = on` (set explicitly, whatever the
//! server's default) before the request is answered.
//!
//! **Forget.** A forget rewrites the namespace's log to its live history in
//! one transaction and drops every snapshot (their rows, through the foreign
//! key), then snapshots again. The deleted rows are dead tuples: their bytes
//! stay in the table files until `VACUUM` reclaims the space and PostgreSQL
//! reuses it, and in the write-ahead log until its segments are recycled.
//! `VACUUM FULL` rewrites the tables, after which the text is in no relation
//! file (the test `forget_leaves_no_text_after_vacuum` checks this); WAL and
//! backups are the operator's to rotate. See `docs/SERVER.md`.
//!
//! TLS: connections use no TLS; reach the database over a Unix socket, a
//! private network or a TLS-terminating proxy.

pub mod migrate;
mod pack;
pub mod session;

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use submem_core::Substrate;

use super::{Backend, Lease, NamespaceMeta, NamespaceStorage, OpenOutcome, SnapshotStore};
use crate::config::hash_key;
pub use crate::config::redact_url;
use crate::log::{EventLog, LogRecord};
use crate::{Result, ServerError};
use session::{OwnerSession, OwnerSessions};

/// First key of every namespace's advisory lock (`"SuMe"`); the second is
/// the namespace's id.
const LOCK_CLASS: i32 = 0x5375_4d65;

/// Maps a database error to a storage error that says what was being done.
pub(crate) fn pg_err(what: &'static str) -> impl Fn(tokio_postgres::Error) -> ServerError {
    move |e| ServerError::Storage {
        path: PathBuf::from("postgres"),
        message: format!("{what}: {}", describe(&e)),
    }
}

fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

fn pool_err(e: deadpool_postgres::PoolError) -> ServerError {
    ServerError::Storage {
        path: PathBuf::from("postgres"),
        message: format!("no database connection: {e}"),
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn to_seq(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// Namespaces in a PostgreSQL database.
#[derive(Debug)]
pub struct PgBackend {
    pool: Pool,
    sessions: Arc<OwnerSessions>,
    /// This node's advertised URL ("" without one).
    node: String,
    /// Where snapshots are unpacked for restoring.
    scratch: PathBuf,
}

impl PgBackend {
    /// Connects to `url`, applies missing migrations, and keeps node-local
    /// scratch space under `scratch` (cleared now). `node` is this node's
    /// advertised URL; `owner_sessions` the sessions holding its locks.
    pub async fn connect(
        url: &str,
        node: Option<&str>,
        owner_sessions: usize,
        scratch: &Path,
    ) -> Result<Self> {
        let shown = redact_url(url);
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            ServerError::Config(format!("store URL {shown} is not a PostgreSQL URL: {e}"))
        })?;
        // Names the node in pg_stat_activity (an operator, or a test, can
        // then end one node's sessions).
        let app: String = match node {
            Some(n) if !n.is_empty() => format!("submem {n}"),
            _ => "submem".to_string(),
        }
        .chars()
        .take(63)
        .collect();
        config
            .application_name(&app)
            .connect_timeout(Duration::from_secs(10))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10));
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(16)
            .build()
            .map_err(|e| ServerError::Config(format!("PostgreSQL pool: {e}")))?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| ServerError::Config(format!("cannot reach PostgreSQL at {shown}: {e}")))?;
        let applied = migrate::migrate(&mut client).await?;
        drop(client);
        if scratch.exists() {
            std::fs::remove_dir_all(scratch).map_err(|e| ServerError::io(scratch, e))?;
        }
        std::fs::create_dir_all(scratch).map_err(|e| ServerError::io(scratch, e))?;
        tracing::info!(store = %shown, migrations = applied, node = node.unwrap_or(""), "PostgreSQL store ready");
        Ok(PgBackend {
            pool,
            sessions: Arc::new(OwnerSessions::new(config, owner_sessions)),
            node: node.unwrap_or_default().to_string(),
            scratch: scratch.to_path_buf(),
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(pool_err)
    }

    async fn id_of(&self, name: &str) -> Result<Option<i64>> {
        let c = self.client().await?;
        let row = c
            .query_opt("SELECT id FROM submem_namespaces WHERE name = $1", &[&name])
            .await
            .map_err(pg_err("look up namespace"))?;
        Ok(row.map(|r| r.get(0)))
    }

    fn meta_of(row: &tokio_postgres::Row) -> NamespaceMeta {
        NamespaceMeta {
            name: row.get(0),
            substrate: row.get(1),
            created_unix: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
            last_write_unix: row
                .get::<_, Option<i64>>(3)
                .and_then(|t| u64::try_from(t).ok()),
        }
    }
}

fn lock_key(id: i64) -> Result<i32> {
    i32::try_from(id).map_err(|_| ServerError::Storage {
        path: PathBuf::from("postgres"),
        message: format!("namespace id {id} does not fit an advisory lock key"),
    })
}

#[async_trait]
impl Backend for PgBackend {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn list(&self) -> Result<Vec<NamespaceMeta>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT name, substrate, created_unix, (SELECT e.appended_unix FROM submem_events e WHERE e.namespace_id = submem_namespaces.id ORDER BY e.seq DESC LIMIT 1) \
                 FROM submem_namespaces ORDER BY name",
                &[],
            )
            .await
            .map_err(pg_err("list namespaces"))?;
        Ok(rows.iter().map(Self::meta_of).collect())
    }

    async fn meta(&self, name: &str) -> Result<Option<NamespaceMeta>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT name, substrate, created_unix, (SELECT e.appended_unix FROM submem_events e WHERE e.namespace_id = submem_namespaces.id ORDER BY e.seq DESC LIMIT 1) \
                 FROM submem_namespaces WHERE name = $1",
                &[&name],
            )
            .await
            .map_err(pg_err("read namespace"))?;
        Ok(row.as_ref().map(Self::meta_of))
    }

    async fn count(&self) -> Result<usize> {
        let c = self.client().await?;
        let row = c
            .query_one("SELECT count(*) FROM submem_namespaces", &[])
            .await
            .map_err(pg_err("count namespaces"))?;
        Ok(usize::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    async fn create(&self, meta: &NamespaceMeta) -> Result<()> {
        let c = self.client().await?;
        let created = i64::try_from(meta.created_unix).unwrap_or(0);
        let n = c
            .execute(
                "INSERT INTO submem_namespaces (name, substrate, created_unix) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
                &[&meta.name, &meta.substrate, &created],
            )
            .await
            .map_err(pg_err("create namespace"))?;
        if n == 0 {
            return Err(ServerError::NamespaceExists(meta.name.clone()));
        }
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<bool> {
        let c = self.client().await?;
        let n = c
            .execute("DELETE FROM submem_namespaces WHERE name = $1", &[&name])
            .await
            .map_err(pg_err("delete namespace"))?;
        Ok(n > 0)
    }

    async fn open(&self, meta: &NamespaceMeta) -> Result<OpenOutcome> {
        let Some(id) = self.id_of(&meta.name).await? else {
            return Err(ServerError::NamespaceNotFound(meta.name.clone()));
        };
        let key = lock_key(id)?;
        let session = self.sessions.session_for(id).await?;
        if !session.try_lock(LOCK_CLASS, key).await? {
            let c = self.client().await?;
            let owner: Option<String> = c
                .query_opt(
                    "SELECT node FROM submem_owners WHERE namespace_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err("read owner"))?
                .map(|r| r.get(0));
            return match owner {
                Some(url) if !url.is_empty() && url != self.node => Ok(OpenOutcome::OwnedBy(url)),
                Some(url) if url.is_empty() => Err(ServerError::Busy(format!(
                    "namespace {:?} is served by a node without --advertise; send its requests \
                     there, or give every node --advertise",
                    meta.name
                ))),
                _ => Err(ServerError::Busy(format!(
                    "namespace {:?} is changing owner; retry shortly",
                    meta.name
                ))),
            };
        }
        let fenced = Arc::new(AtomicBool::new(false));
        let lease = Arc::new(PgLease {
            session: session.clone(),
            namespace_id: id,
            key,
            node: self.node.clone(),
            fenced: fenced.clone(),
            released: AtomicBool::new(false),
        });
        let opened = async {
            session
                .execute(
                    "INSERT INTO submem_owners (namespace_id, node) VALUES ($1, $2)
                     ON CONFLICT (namespace_id) DO UPDATE SET node = EXCLUDED.node, since = now()",
                    &[&id, &self.node],
                )
                .await?;
            let c = self.client().await?;
            let row = c
                .query_one(
                    "SELECT n.log_base, (SELECT max(seq) FROM submem_events e WHERE e.namespace_id = n.id)
                     FROM submem_namespaces n WHERE n.id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err("read log end"))?;
            let base: i64 = row.get(0);
            let max: Option<i64> = row.get(1);
            Ok::<u64, ServerError>(u64::try_from(max.unwrap_or(base).max(base)).unwrap_or(0))
        }
        .await;
        let end = match opened {
            Ok(end) => end,
            Err(e) => {
                lease.release().await;
                return Err(e);
            }
        };
        let log = PgLog {
            pool: self.pool.clone(),
            session,
            namespace_id: id,
            name: meta.name.clone(),
            end: AtomicU64::new(end),
            fenced,
        };
        let snapshots = PgSnapshots {
            pool: self.pool.clone(),
            namespace_id: id,
            scratch: self.scratch.join(hash_key(&meta.name)),
        };
        Ok(OpenOutcome::Opened(NamespaceStorage {
            log: Arc::new(log),
            snapshots: Arc::new(snapshots),
            lease,
        }))
    }

    async fn ready(&self) -> Result<()> {
        let c = self.client().await?;
        c.query_one("SELECT 1", &[]).await.map_err(pg_err("ping"))?;
        Ok(())
    }
}

/// A namespace's advisory lock on an owner session.
#[derive(Debug)]
struct PgLease {
    session: Arc<OwnerSession>,
    namespace_id: i64,
    key: i32,
    node: String,
    /// Set when an append found another writer's record.
    fenced: Arc<AtomicBool>,
    released: AtomicBool,
}

#[async_trait]
impl Lease for PgLease {
    fn lost(&self) -> bool {
        !self.session.alive() || self.fenced.load(Ordering::SeqCst)
    }

    async fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) || !self.session.alive() {
            return;
        }
        let _ = self
            .session
            .execute(
                "DELETE FROM submem_owners WHERE namespace_id = $1 AND node = $2",
                &[&self.namespace_id, &self.node],
            )
            .await;
        if let Err(e) = self.session.unlock(LOCK_CLASS, self.key).await {
            tracing::warn!(namespace_id = self.namespace_id, error = %e, "cannot release a namespace lock");
        }
    }
}

/// A namespace's event log in `submem_events`.
#[derive(Debug)]
struct PgLog {
    pool: Pool,
    /// Appends run here: a commit proves the lock was held.
    session: Arc<OwnerSession>,
    namespace_id: i64,
    name: String,
    end: AtomicU64,
    fenced: Arc<AtomicBool>,
}

impl PgLog {
    fn encode(record: &LogRecord) -> Result<Vec<u8>> {
        let body =
            serde_json::to_vec(record).map_err(|e| ServerError::BadRequest(e.to_string()))?;
        if body.len() > crate::log::MAX_RECORD_BYTES as usize {
            return Err(ServerError::TooLarge(format!(
                "log record of {} bytes",
                body.len()
            )));
        }
        Ok(body)
    }

    fn corrupt(&self, message: String) -> ServerError {
        ServerError::CorruptLog {
            path: PathBuf::from(format!("postgres:submem_events/{}", self.namespace_id)),
            message,
        }
    }

    fn fence(&self, e: &tokio_postgres::Error) -> Option<ServerError> {
        let code = e.code()?;
        if *code == SqlState::UNIQUE_VIOLATION || *code == SqlState::FOREIGN_KEY_VIOLATION {
            self.fenced.store(true, Ordering::SeqCst);
            return Some(ServerError::Busy(format!(
                "namespace {:?} was written by another node: this node gave it up; retry",
                self.name
            )));
        }
        None
    }
}

#[async_trait]
impl EventLog for PgLog {
    async fn append(&self, record: &LogRecord) -> Result<u64> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(ServerError::Busy(format!(
                "namespace {:?} moved to another node; retry",
                self.name
            )));
        }
        let body = Self::encode(record)?;
        let seq = self.end.load(Ordering::SeqCst) + 1;
        let row = to_seq(seq);
        let done = self
            .session
            .execute_raw(
                "INSERT INTO submem_events (namespace_id, seq, record) VALUES ($1, $2, $3)",
                &[&self.namespace_id, &row, &body],
            )
            .await;
        match done {
            Ok(_) => {
                self.end.store(seq, Ordering::SeqCst);
                Ok(seq)
            }
            Err(e) => Err(self.fence(&e).unwrap_or_else(|| pg_err("append")(e))),
        }
    }

    async fn replay(&self, from: u64) -> Result<Vec<(u64, LogRecord)>> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let base: i64 = c
            .query_one(
                "SELECT log_base FROM submem_namespaces WHERE id = $1",
                &[&self.namespace_id],
            )
            .await
            .map_err(pg_err("read log base"))?
            .get(0);
        let rows = c
            .query(
                "SELECT seq, record FROM submem_events WHERE namespace_id = $1 AND seq > $2 ORDER BY seq",
                &[&self.namespace_id, &to_seq(from)],
            )
            .await
            .map_err(pg_err("replay"))?;
        let first = to_seq(from).max(base) + 1;
        let mut out = Vec::with_capacity(rows.len());
        for (expected, row) in (first..).zip(rows) {
            let seq: i64 = row.get(0);
            if seq != expected {
                return Err(self.corrupt(format!(
                    "record {expected} is missing (the next is {seq}): the log has a gap"
                )));
            }
            let bytes: &[u8] = row.get(1);
            let record: LogRecord = serde_json::from_slice(bytes)
                .map_err(|e| self.corrupt(format!("record {seq} is not a log record: {e}")))?;
            out.push((u64::try_from(seq).unwrap_or(0), record));
        }
        Ok(out)
    }

    fn end(&self) -> u64 {
        self.end.load(Ordering::SeqCst)
    }

    async fn rewrite(&self, records: &[LogRecord]) -> Result<u64> {
        let bodies: Vec<Vec<u8>> = records.iter().map(Self::encode).collect::<Result<_>>()?;
        let old_end = self.end.load(Ordering::SeqCst);
        let id = self.namespace_id;
        let done: std::result::Result<(), tokio_postgres::Error> = async {
            let mut client = self.session.client().await;
            let tx = client.transaction().await?;
            tx.execute(
                "UPDATE submem_namespaces SET log_base = $2 WHERE id = $1",
                &[&id, &to_seq(old_end)],
            )
            .await?;
            tx.execute(
                "DELETE FROM submem_events WHERE namespace_id = $1 AND seq <= $2",
                &[&id, &to_seq(old_end)],
            )
            .await?;
            let insert = tx
                .prepare(
                    "INSERT INTO submem_events (namespace_id, seq, record) VALUES ($1, $2, $3)",
                )
                .await?;
            for (i, body) in bodies.iter().enumerate() {
                let seq = to_seq(old_end + 1 + i as u64);
                tx.execute(&insert, &[&id, &seq, body]).await?;
            }
            tx.commit().await
        }
        .await;
        match done {
            Ok(()) => {
                let end = old_end + records.len() as u64;
                self.end.store(end, Ordering::SeqCst);
                Ok(end)
            }
            Err(e) => Err(self.fence(&e).unwrap_or_else(|| pg_err("rewrite")(e))),
        }
    }
}

/// A namespace's snapshots in `submem_snapshots`.
#[derive(Debug)]
struct PgSnapshots {
    pool: Pool,
    namespace_id: i64,
    /// Node-local directory the restored snapshot is unpacked into (a
    /// restored substrate may keep files of it mapped).
    scratch: PathBuf,
}

impl PgSnapshots {
    fn fresh_dir(&self, what: &str) -> PathBuf {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        self.scratch.join(format!("{what}-{stamp}"))
    }
}

#[async_trait]
impl SnapshotStore for PgSnapshots {
    async fn restore_newest(&self, substrate: &dyn Substrate, log_end: u64) -> Result<u64> {
        let c = self.pool.get().await.map_err(pool_err)?;
        let covers: Vec<i64> = c
            .query(
                "SELECT covers_seq FROM submem_snapshots WHERE namespace_id = $1 AND covers_seq <= $2
                 ORDER BY covers_seq DESC",
                &[&self.namespace_id, &to_seq(log_end)],
            )
            .await
            .map_err(pg_err("list snapshots"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for seq in covers {
            let Some(row) = c
                .query_opt(
                    "SELECT data FROM submem_snapshots WHERE namespace_id = $1 AND covers_seq = $2",
                    &[&self.namespace_id, &seq],
                )
                .await
                .map_err(pg_err("read snapshot"))?
            else {
                continue;
            };
            let data: Vec<u8> = row.get(0);
            let dir = self.fresh_dir("restore");
            let unpack_dir = dir.clone();
            let unpacked =
                tokio::task::spawn_blocking(move || pack::unpack(&data, &unpack_dir)).await;
            match unpacked {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(namespace_id = self.namespace_id, seq, error = %e, "snapshot unreadable; trying an older one");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(namespace_id = self.namespace_id, seq, error = %e, "snapshot unpack failed");
                    continue;
                }
            }
            match substrate.restore(&dir).await {
                Ok(()) => return Ok(u64::try_from(seq).unwrap_or(0)),
                Err(e) => {
                    tracing::warn!(namespace_id = self.namespace_id, seq, error = %e, "snapshot refused; trying an older one")
                }
            }
        }
        Ok(0)
    }

    async fn take(&self, substrate: &dyn Substrate, offset: u64) -> Result<()> {
        if offset == 0 {
            return Ok(());
        }
        let dir = self.fresh_dir("persist");
        std::fs::create_dir_all(&dir).map_err(|e| ServerError::io(&dir, e))?;
        let persisted = substrate.persist(&dir).await;
        let packed = match persisted {
            Ok(()) => {
                let at = dir.clone();
                tokio::task::spawn_blocking(move || pack::pack(&at))
                    .await
                    .map_err(|e| ServerError::Storage {
                        path: dir.clone(),
                        message: format!("pack task failed: {e}"),
                    })
                    .and_then(|r| r)
            }
            Err(e) => Err(ServerError::Storage {
                path: dir.clone(),
                message: e.to_string(),
            }),
        };
        let _ = std::fs::remove_dir_all(&dir);
        let data = packed?;
        let c = self.pool.get().await.map_err(pool_err)?;
        // Refused by the foreign key (no row: nothing inserted) when the
        // record it covers is gone: the log was rewritten meanwhile.
        let inserted = c
            .execute(
                "INSERT INTO submem_snapshots (namespace_id, covers_seq, taken_unix, data)
                 SELECT $1, $2, $3, $4
                 WHERE EXISTS (SELECT 1 FROM submem_events WHERE namespace_id = $1 AND seq = $2)
                 ON CONFLICT (namespace_id, covers_seq) DO UPDATE
                 SET data = EXCLUDED.data, taken_unix = EXCLUDED.taken_unix",
                &[&self.namespace_id, &to_seq(offset), &now_unix(), &data],
            )
            .await;
        match inserted {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => return Ok(()),
            Err(e) => return Err(pg_err("write snapshot")(e)),
        }
        c.execute(
            "DELETE FROM submem_snapshots WHERE namespace_id = $1 AND covers_seq < $2",
            &[&self.namespace_id, &to_seq(offset)],
        )
        .await
        .map_err(pg_err("remove old snapshots"))?;
        tracing::debug!(
            namespace_id = self.namespace_id,
            offset,
            bytes = data.len(),
            "snapshot stored"
        );
        Ok(())
    }

    async fn remove_all(&self) -> Result<()> {
        let c = self.pool.get().await.map_err(pool_err)?;
        c.execute(
            "DELETE FROM submem_snapshots WHERE namespace_id = $1",
            &[&self.namespace_id],
        )
        .await
        .map_err(pg_err("remove snapshots"))?;
        Ok(())
    }

    async fn close(&self) {
        let dir = self.scratch.clone();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
    }
}
