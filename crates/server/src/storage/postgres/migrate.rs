//! Schema migrations: the SQL files of `crates/server/migrations/`, applied
//! in order, each once, each in its own transaction.
//!
//! Nodes that start together race to migrate; a transaction-scoped advisory
//! lock makes one of them apply what is missing while the others wait and
//! then find nothing to do. A migration crate would bring its own runtime
//! and file layout for what is one transaction here.

use tokio_postgres::Client;

use super::pg_err;
use crate::Result;

/// `(version, sql)`, in order. A released file is never edited: a change is
/// a new file.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../../migrations/0001_init.sql")),
    (
        2,
        include_str!("../../../migrations/0002_appended_unix.sql"),
    ),
];

/// The advisory lock key of migrations (`"submem migrate"`, hashed by hand).
const MIGRATE_LOCK: i64 = 0x5375_626d_6d69_6772;

/// Applies the migrations `client`'s database lacks; returns how many.
pub async fn migrate(client: &mut Client) -> Result<usize> {
    let tx = client.transaction().await.map_err(pg_err("begin"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(pg_err("migration lock"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS submem_migrations (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(pg_err("migrations table"))?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM submem_migrations", &[])
        .await
        .map_err(pg_err("read migrations"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut n = 0;
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .map_err(pg_err("apply migration"))?;
        tx.execute(
            "INSERT INTO submem_migrations (version) VALUES ($1)",
            &[version],
        )
        .await
        .map_err(pg_err("record migration"))?;
        tracing::info!(version, "PostgreSQL store migrated");
        n += 1;
    }
    if let Some(newest) = applied.iter().max() {
        let known = MIGRATIONS.iter().map(|(v, _)| *v).max().unwrap_or(0);
        if *newest > known {
            return Err(crate::ServerError::Config(format!(
                "the database's submem schema is at version {newest}, newer than this server \
                 knows ({known}): upgrade the server"
            )));
        }
    }
    tx.commit().await.map_err(pg_err("commit migrations"))?;
    Ok(n)
}
