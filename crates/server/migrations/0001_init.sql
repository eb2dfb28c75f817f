-- submem's PostgreSQL store, version 1: the namespace catalog, each
-- namespace's event log and substrate snapshots, and which node owns which
-- namespace. Applied once by the first node that starts (see
-- crates/server/src/storage/postgres/migrate.rs).

CREATE TABLE submem_namespaces (
    id            bigserial PRIMARY KEY,
    name          text   NOT NULL UNIQUE,
    substrate     text   NOT NULL,
    created_unix  bigint NOT NULL,
    -- The log's records have sequence numbers log_base + 1, log_base + 2...
    -- A rewrite (after a forget) starts the new records after the old end,
    -- so a stale owner's next append always collides with a live key.
    log_base      bigint NOT NULL DEFAULT 0
);

-- The event log: one row per record (a write batch or a forget), in order.
-- The primary key makes the log single-writer: two nodes appending the same
-- sequence number cannot both commit, so the log never forks.
CREATE TABLE submem_events (
    namespace_id  bigint NOT NULL REFERENCES submem_namespaces (id) ON DELETE CASCADE,
    seq           bigint NOT NULL,
    record        bytea  NOT NULL,
    PRIMARY KEY (namespace_id, seq)
);

-- Substrate snapshots, each tied to the log record it covers. The foreign
-- key drops a snapshot with the record it names (a rewrite after a forget),
-- and refuses one that names a record no longer in the log.
CREATE TABLE submem_snapshots (
    namespace_id  bigint NOT NULL,
    covers_seq    bigint NOT NULL,
    taken_unix    bigint NOT NULL,
    data          bytea  NOT NULL,
    PRIMARY KEY (namespace_id, covers_seq),
    FOREIGN KEY (namespace_id, covers_seq)
        REFERENCES submem_events (namespace_id, seq) ON DELETE CASCADE
);

-- Stored uncompressed (events and snapshots): what a forget must remove is then findable, and
-- substrate files are mostly compressed or binary already.
ALTER TABLE submem_snapshots ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE submem_events ALTER COLUMN record SET STORAGE EXTERNAL;

-- The node that holds each namespace's advisory lock, as other nodes reach
-- it (its --advertise URL). Written by the owner after it takes the lock;
-- the lock, not this row, is the authority.
CREATE TABLE submem_owners (
    namespace_id  bigint PRIMARY KEY REFERENCES submem_namespaces (id) ON DELETE CASCADE,
    node          text        NOT NULL,
    since         timestamptz NOT NULL DEFAULT now()
);
