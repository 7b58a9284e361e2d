-- Relay presence statements for PostgreSQL (the outbox store's <prefix>relays table). {table}
-- is the quoted relays table; {now} as in outbox_postgresql.sql. A row lives until expires_at
-- (last_seen + its ttl), as a worker's does.

-- name: register_relay
-- Record or refresh a relay; started_at is kept while the record is live, reset after expiry.
INSERT INTO {table} AS r (id, host, pid, started_at, last_seen, expires_at)
VALUES (
    CAST(:id AS text), CAST(:host AS text), CAST(:pid AS integer), {now}, {now},
    {now} + CAST(:ttl_ms AS bigint)
)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid,
    started_at = CASE WHEN r.expires_at <= excluded.last_seen
        THEN excluded.started_at ELSE r.started_at END,
    last_seen = excluded.last_seen, expires_at = excluded.expires_at;

-- name: deregister_relay
DELETE FROM {table} WHERE id = CAST(:id AS text);

-- name: list_relays
-- The live relays, by started_at; expired records are deleted in passing.
WITH gone AS (
    DELETE FROM {table} WHERE expires_at <= {now}
)
SELECT id, host, pid, started_at, last_seen
FROM {table}
WHERE expires_at > {now}
ORDER BY started_at, id;
