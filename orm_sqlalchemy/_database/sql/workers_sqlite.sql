-- Worker registry statements for SQLite. {table} is the quoted workers table; :now as in
-- jobs_sqlite.sql. A row lives until expires_at (last_seen + its ttl).

-- name: register_worker
-- Record or refresh a worker; started_at is kept while the record is live, reset after expiry.
INSERT INTO {table} AS w (
    id, host, pid, types, concurrency, in_flight, started_at, last_seen, expires_at, queues
)
VALUES (:id, :host, :pid, :types, :concurrency, :in_flight, :now, :now, :now + :ttl_ms, :queues)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, types = excluded.types, queues = excluded.queues,
    concurrency = excluded.concurrency, in_flight = excluded.in_flight,
    started_at = CASE WHEN w.expires_at <= excluded.last_seen
        THEN excluded.started_at ELSE w.started_at END,
    last_seen = excluded.last_seen, expires_at = excluded.expires_at;

-- name: deregister_worker
DELETE FROM {table} WHERE id = :id;

-- name: prune_workers
-- Expired records, deleted in passing by list_workers (SQLite has no DELETE in a WITH clause).
DELETE FROM {table} WHERE expires_at <= :now;

-- name: list_workers
-- The live workers, by started_at.
SELECT id, host, pid, types, concurrency, in_flight, started_at, last_seen, queues
FROM {table}
WHERE expires_at > :now
ORDER BY started_at, id;
