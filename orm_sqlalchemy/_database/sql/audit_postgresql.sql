-- Audit trail statements for PostgreSQL. {table} is the quoted audit table; {now} as in
-- jobs_postgresql.sql. The trail keeps at most :max_entries rows, none older than :keep_ms.

-- name: record_action
-- The insert, then the rows past the newest :max_entries and those older than :keep_ms go, in
-- the same statement (one round trip).
WITH added AS (
    INSERT INTO {table} (id, at, action, target, actor, source, count)
    VALUES (:id, {now}, :action, :target, :actor, :source, CAST(:count AS bigint))
    RETURNING at
), gone AS (
    DELETE FROM {table}
    WHERE at < {now} - CAST(:keep_ms AS bigint)
       OR (at, id) < (
            SELECT at, id FROM {table} ORDER BY at DESC, id DESC
            LIMIT 1 OFFSET CAST(:max_entries AS bigint) - 1
       )
)
SELECT at FROM added;

-- name: list_actions
-- A page newest first, strictly after the cursor's (at, id).
SELECT id, at, action, target, actor, source, count
FROM {table}
WHERE (at, id) < (CAST(:before_at AS bigint), CAST(:before_id AS text))
ORDER BY at DESC, id DESC
LIMIT CAST(:limit AS bigint);
