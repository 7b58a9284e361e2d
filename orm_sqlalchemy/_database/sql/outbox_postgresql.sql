-- Outbox store statements for PostgreSQL (append writes through the caller's session; the
-- others run on the store's own connections). {table} is the quoted table name; {now} is the bound :now when a Clock was
-- injected, else the database's now() (the start of the statement's transaction; every
-- statement here runs in its own).
-- Every statement but append is one round trip and one transaction, run in READ COMMITTED.

-- name: append
-- In the app's transaction (the one statement run on the caller's session). created_at is the
-- append's own time (clock_timestamp(), not the transaction's start); an entry whose key is
-- present is dropped (the unique partial index on key). run_at: the :run_at given, else
-- :delay_ms after the append's time (NULL when neither is given: due when published).
INSERT INTO {table} (
    id, type, payload, key, delay_ms, created_at, available_at, attempts, trace_context,
    run_at, max_attempts, priority, queue
)
SELECT CAST(:id AS text), CAST(:type AS text), CAST(:payload AS text), CAST(:key AS text),
    CAST(:delay_ms AS bigint), at, at, 0, CAST(:trace_context AS text),
    COALESCE(CAST(:run_at AS bigint), at + CAST(:delay_ms AS bigint)),
    CAST(:max_attempts AS integer), CAST(:priority AS integer), CAST(:queue AS text)
FROM (
    SELECT COALESCE(CAST(:now AS bigint), floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
) AS t(at)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: claim
-- Unpublished entries whose lease (or retry delay) has passed, oldest first, skipping rows
-- another claimer holds. Picked by state, never by "id after the last one seen": ids are handed
-- out before commit, so commits arrive out of order. A CTE, not IN (subquery LIMIT), which the
-- planner may re-run past its LIMIT.
WITH picked AS MATERIALIZED (
    SELECT id FROM {table}
    WHERE published_at IS NULL AND available_at <= {now}
    ORDER BY available_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE {table} AS e SET
    attempts = e.attempts + 1,
    lease_token = (e.attempts + 1) || ':' || CAST(:token AS text),
    available_at = {now} + CAST(:lease_ms AS bigint)
FROM picked
WHERE e.id = picked.id
RETURNING e.id, e.type, e.payload, e.key, e.delay_ms, e.created_at, e.attempts, e.lease_token,
    e.trace_context, e.run_at, e.max_attempts, e.priority, e.queue;

-- name: mark_published
UPDATE {table} SET published_at = {now}
WHERE id = :id AND lease_token = :lease_token AND published_at IS NULL
RETURNING 1;

-- name: mark_published_many
-- :entries is a JSON array of [id, lease_token] pairs, one per entry of a claimed batch.
UPDATE {table} AS e SET published_at = {now}
FROM jsonb_array_elements(CAST(:entries AS jsonb)) AS m(pair)
WHERE e.id = m.pair ->> 0 AND e.lease_token = m.pair ->> 1 AND e.published_at IS NULL
RETURNING e.id;

-- name: release
UPDATE {table} SET
    available_at = {now} + CAST(:delay_ms AS bigint), lease_token = NULL,
    last_error = CAST(:error AS text)
WHERE id = :id AND lease_token = :lease_token AND published_at IS NULL
RETURNING 1;

-- name: prune
-- At most :batch entries published before the cutoff, oldest first (the partial index on
-- published_at), so one call is one short statement; the relay calls again while it deletes.
-- Rows another pruner holds are skipped, never waited for.
WITH doomed AS MATERIALIZED (
    SELECT id FROM {table}
    WHERE published_at IS NOT NULL AND published_at < {now} - CAST(:older_than_ms AS bigint)
    ORDER BY published_at
    LIMIT CAST(:batch AS bigint)
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {table} AS e USING doomed
WHERE e.id = doomed.id
RETURNING 1;

-- name: oldest_unpublished_age
-- The outbox.lag metric: NULL when every entry is published.
SELECT {now} - MIN(created_at) AS age_ms FROM {table} WHERE published_at IS NULL;

-- name: outbox_stats
-- For operators (neverlost stats, the dashboard): unpublished entries through the partial
-- claim index, published ones of the last hour through the partial published index.
SELECT
    count(*) AS unpublished,
    {now} - MIN(created_at) AS oldest_age_ms,
    count(*) FILTER (WHERE last_error IS NOT NULL) AS with_errors,
    (SELECT count(*) FROM {table}
        WHERE published_at IS NOT NULL AND published_at >= {now} - 3600000) AS published_last_hour
FROM {table}
WHERE published_at IS NULL;

-- name: list_entries
-- A page oldest first, strictly after the cursor's (created_at, id). :state is NULL (any),
-- 'unpublished', 'failing' (unpublished with a last error) or 'published'.
SELECT id, type, payload, key, created_at, available_at, published_at, attempts, last_error,
    lease_token, run_at, max_attempts, {now} AS now
FROM {table}
WHERE (CAST(:state AS text) IS NULL
        OR (CAST(:state AS text) = 'published') = (published_at IS NOT NULL))
    AND (CAST(:state AS text) IS DISTINCT FROM 'failing' OR last_error IS NOT NULL)
    AND (CAST(:type AS text) IS NULL OR type = CAST(:type AS text))
    AND (created_at, id) > (CAST(:after_at AS bigint), CAST(:after_id AS text))
ORDER BY created_at, id
LIMIT CAST(:limit AS bigint);

-- name: get_entry
SELECT id, type, payload, key, created_at, available_at, published_at, attempts, last_error,
    lease_token, run_at, max_attempts, {now} AS now
FROM {table}
WHERE id = CAST(:id AS text);

-- name: retry_entry
-- Claimable now: its retry delay (or a relay's lease) dropped; a published entry is left.
UPDATE {table} SET available_at = {now}, lease_token = NULL
WHERE id = CAST(:id AS text) AND published_at IS NULL
RETURNING 1;
