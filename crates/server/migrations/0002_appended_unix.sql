-- submem's PostgreSQL store, version 2: when each log record was appended
-- (Unix seconds), so a namespace's last change can be listed without
-- opening it. Records appended before this version have none (NULL): the
-- column is added without a rewrite of the table.

ALTER TABLE submem_events ADD COLUMN appended_unix bigint;
ALTER TABLE submem_events ALTER COLUMN appended_unix SET DEFAULT (extract(epoch FROM now()))::bigint;
