//! Owner sessions: the database connections that hold a node's namespace
//! locks and carry those namespaces' appends.
//!
//! Session-level advisory locks live as long as the connection that took
//! them, so a node keeps a few dedicated connections (never pooled) and
//! maps each namespace to one of them by id. A connection that ends (the
//! database restarted, the network dropped it) marks itself dead: every
//! namespace locked on it has lost its lease and is closed without writing,
//! and the next request reconnects and takes the lock again if no other
//! node has.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

use super::pg_err;
use crate::{Result, ServerError};

/// One dedicated connection.
#[derive(Debug)]
pub struct OwnerSession {
    client: Mutex<Client>,
    alive: Arc<AtomicBool>,
}

impl OwnerSession {
    async fn connect(config: &tokio_postgres::Config) -> Result<Self> {
        let (client, connection) = config.connect(NoTls).await.map_err(pg_err("connect"))?;
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::error!(error = %e, "an owner session to PostgreSQL ended; its namespaces close");
            }
            flag.store(false, Ordering::SeqCst);
        });
        // Appends are acknowledged only once durable, whatever the
        // database's default.
        client
            .batch_execute("SET synchronous_commit = on")
            .await
            .map_err(pg_err("set synchronous_commit"))?;
        Ok(OwnerSession {
            client: Mutex::new(client),
            alive,
        })
    }

    /// Whether the connection (and so every lock on it) is still there.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst) && !self.closed()
    }

    fn closed(&self) -> bool {
        self.client
            .try_lock()
            .map(|c| c.is_closed())
            .unwrap_or(false)
    }

    /// The connection, exclusively (for a transaction).
    pub async fn client(&self) -> MutexGuard<'_, Client> {
        self.client.lock().await
    }

    /// `pg_try_advisory_lock(class, key)` on this session.
    pub async fn try_lock(&self, class: i32, key: i32) -> Result<bool> {
        let c = self.client.lock().await;
        let row = c
            .query_one("SELECT pg_try_advisory_lock($1, $2)", &[&class, &key])
            .await
            .map_err(pg_err("take namespace lock"))?;
        Ok(row.get(0))
    }

    /// `pg_advisory_unlock(class, key)` on this session.
    pub async fn unlock(&self, class: i32, key: i32) -> Result<()> {
        let c = self.client.lock().await;
        c.query_one("SELECT pg_advisory_unlock($1, $2)", &[&class, &key])
            .await
            .map_err(pg_err("release namespace lock"))?;
        Ok(())
    }

    /// One statement in its own transaction.
    pub async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.execute_raw(sql, params)
            .await
            .map_err(pg_err("owner session"))
    }

    /// Like [`OwnerSession::execute`], with the driver's error (to tell a
    /// key collision from a lost connection).
    pub async fn execute_raw(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<u64, tokio_postgres::Error> {
        let c = self.client.lock().await;
        c.execute(sql, params).await
    }
}

/// A node's owner sessions, connected on first use and replaced once dead.
#[derive(Debug)]
pub struct OwnerSessions {
    config: tokio_postgres::Config,
    slots: Vec<Mutex<Option<Arc<OwnerSession>>>>,
}

impl OwnerSessions {
    /// `n` sessions to the database of `config`.
    pub fn new(config: tokio_postgres::Config, n: usize) -> Self {
        OwnerSessions {
            config,
            slots: (0..n.max(1)).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The live session that holds namespace `id`'s lock.
    pub async fn session_for(&self, id: i64) -> Result<Arc<OwnerSession>> {
        let i = usize::try_from(id.rem_euclid(self.slots.len() as i64)).unwrap_or(0);
        let mut slot = self.slots[i].lock().await;
        if let Some(s) = slot.as_ref() {
            if s.alive() {
                return Ok(s.clone());
            }
        }
        let session = Arc::new(OwnerSession::connect(&self.config).await.map_err(|e| {
            ServerError::Storage {
                path: "postgres".into(),
                message: format!("cannot open an owner session: {e}"),
            }
        })?);
        *slot = Some(session.clone());
        Ok(session)
    }
}
