-- Outbox store statements for SQLite (append writes through the caller's session; the others
-- run on the store's own connection). {table} is the quoted table name; {now} is the bound :now when a Clock was
-- injected, else the database's clock (julianday('now'), the same reading for the whole
-- statement).
-- Every statement but append is one write transaction of its own. SQLite opens such a statement's
-- transaction with the write lock, retrying under the busy timeout, just as BEGIN IMMEDIATE
-- does, so the deferred-upgrade "database is locked" cannot happen here.

-- name: append
-- In the app's transaction (the one statement run on the caller's session); an entry whose key
-- is present is dropped (the unique partial index on key). run_at: the :run_at given, else
-- :delay_ms after this statement's time (NULL when neither is given: due when published).
INSERT INTO {table} (
    id, type, payload, key, delay_ms, created_at, available_at, attempts, trace_context,
    run_at, max_attempts, priority, queue
)
VALUES (:id, :type, :payload, :key, :delay_ms, {now}, {now}, 0, :trace_context,
    COALESCE(:run_at, {now} + :delay_ms), :max_attempts, :priority, :queue)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: claim
-- Unpublished entries whose lease (or retry delay) has passed, oldest first, in one
-- UPDATE ... RETURNING. Picked by state, never by "id after the last one seen": ids are handed
-- out before commit, so commits arrive out of order.
UPDATE {table} SET
    attempts = attempts + 1,
    lease_token = (attempts + 1) || ':' || :token,
    available_at = {now} + :lease_ms
WHERE id IN (
    SELECT id FROM {table}
    WHERE published_at IS NULL AND available_at <= {now}
    ORDER BY available_at, id
    LIMIT :limit
)
RETURNING id, type, payload, key, delay_ms, created_at, attempts, lease_token, trace_context,
    run_at, max_attempts, priority, queue;

-- name: mark_published
UPDATE {table} SET published_at = {now}
WHERE id = :id AND lease_token = :lease_token AND published_at IS NULL
RETURNING 1;

-- name: mark_published_many
-- :entries is a JSON array of [id, lease_token] pairs, one per entry of a claimed batch.
UPDATE {table} SET published_at = {now}
WHERE published_at IS NULL
    AND (id, lease_token) IN (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:entries)
    )
RETURNING id;

-- name: release
UPDATE {table} SET available_at = {now} + :delay_ms, lease_token = NULL, last_error = :error
WHERE id = :id AND lease_token = :lease_token AND published_at IS NULL
RETURNING 1;

-- name: prune
-- At most :batch entries published before the cutoff, oldest first (the partial index on
-- published_at), so one call is one short write; the relay calls again while it deletes.
DELETE FROM {table}
WHERE id IN (
    SELECT id FROM {table}
    WHERE published_at IS NOT NULL AND published_at < {now} - :older_than_ms
    ORDER BY published_at
    LIMIT :batch
)
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
    count(last_error) AS with_errors,
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
WHERE (:state IS NULL OR (:state = 'published') = (published_at IS NOT NULL))
    AND (:state IS NOT 'failing' OR last_error IS NOT NULL)
    AND (:type IS NULL OR type = :type)
    AND (created_at, id) > (:after_at, :after_id)
ORDER BY created_at, id
LIMIT :limit;

-- name: get_entry
SELECT id, type, payload, key, created_at, available_at, published_at, attempts, last_error,
    lease_token, run_at, max_attempts, {now} AS now
FROM {table}
WHERE id = :id;

-- name: retry_entry
-- Claimable now: its retry delay (or a relay's lease) dropped; a published entry is left.
UPDATE {table} SET available_at = {now}, lease_token = NULL
WHERE id = :id AND published_at IS NULL
RETURNING 1;
