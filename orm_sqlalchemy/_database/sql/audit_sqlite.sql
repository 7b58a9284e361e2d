-- Audit trail statements for SQLite. {table} is the quoted audit table; :now as in
-- jobs_sqlite.sql. The trail keeps at most :max_entries rows, none older than :keep_ms.

-- name: record_action
INSERT INTO {table} (id, at, action, target, actor, source, count)
VALUES (:id, :now, :action, :target, :actor, :source, :count)
RETURNING at;

-- name: trim_actions
-- The rows past the newest :max_entries, and those older than :keep_ms (by the (at, id) index).
DELETE FROM {table}
WHERE at < :now - :keep_ms
   OR (at, id) < (
        SELECT at, id FROM {table} ORDER BY at DESC, id DESC LIMIT 1 OFFSET :max_entries - 1
   );

-- name: list_actions
-- A page newest first, strictly after the cursor's (at, id).
SELECT id, at, action, target, actor, source, count
FROM {table}
WHERE (at, id) < (:before_at, :before_id)
ORDER BY at DESC, id DESC
LIMIT :limit;
