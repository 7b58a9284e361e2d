-- Reads of the live loss auditor (jobs.loss_audit) on the outbox table: each one statement,
-- bounded by :limit, on an index ({now} as in the outbox statements).

-- name: audit_overdue
-- Unpublished entries older than :older_than_ms, oldest first: a scan of the unpublished
-- entries (the partial index on them), as the outbox.lag gauge's MIN(created_at) does.
SELECT id, type, key, created_at, attempts, last_error,
    {now} - created_at AS age_ms,
    CASE WHEN lease_token IS NOT NULL AND available_at > {now} THEN 1 ELSE 0 END AS leased
FROM {table}
WHERE published_at IS NULL AND created_at <= {now} - :older_than_ms
ORDER BY created_at, id
LIMIT :limit;

-- name: audit_published
-- Entries published after the mark (:after_ms, :after_id), in publishing order: a range of
-- the partial index on published_at (the prune's).
SELECT id, type, key, created_at, published_at
FROM {table}
WHERE published_at IS NOT NULL AND published_at >= :after_ms
    AND (published_at > :after_ms OR id > :after_id)
ORDER BY published_at, id
LIMIT :limit;
