-- Job store statements for SQLite. {table} is the quoted table name; :now is the store's clock
-- in epoch ms, always bound (an injected Clock, else the host's wall clock: the database is a
-- local file, so every process using it reads the same clock).
-- Every statement is one write transaction of its own. SQLite opens such a statement's
-- transaction with the write lock, retrying under the busy timeout, just as BEGIN IMMEDIATE
-- does, so the deferred-upgrade "database is locked" cannot happen here.

-- name: enqueue
-- A key held by a row past its retention is taken over in place; a live one drops the job.
-- The conflict target names the partial key index (an older table's UNIQUE (key) fits too).
INSERT INTO {table} AS j (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, stalls, max_stalls
)
VALUES (
    :id, :type, :payload, 'pending', 0, :max_attempts,
    COALESCE(:run_at, :now + :delay_ms), COALESCE(:run_at, :now + :delay_ms),
    :timeout_ms, :key, :trace_context, :keep_until, :now, 0, :max_stalls
)
ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET
    id = excluded.id, type = excluded.type, payload = excluded.payload, state = 'pending',
    attempts = 0, max_attempts = excluded.max_attempts, run_at = excluded.run_at,
    due_at = excluded.due_at, lease_token = NULL, timeout_ms = excluded.timeout_ms,
    trace_context = excluded.trace_context, keep_until = excluded.keep_until,
    last_error = NULL, errors = NULL, created_at = excluded.created_at, finished_at = NULL,
    expires_at = NULL, stalls = 0, max_stalls = excluded.max_stalls,
    result = NULL, progress = NULL
WHERE j.expires_at <= excluded.created_at
RETURNING id, type;

-- name: enqueue_unkeyed
-- enqueue of a job without a key (see the PostgreSQL file): the same upsert here, where it
-- was not measured to cost more than a plain INSERT.
{statement:enqueue};

-- name: enqueue_many
-- A batch as one statement: :jobs is a JSON array with one array per job (the columns in the
-- order below). Its keys are distinct (the store drops later repeats of a key first). "WHERE
-- true" lets SQLite's parser tell the SELECT from the upsert clause.
INSERT INTO {table} AS j (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, stalls, max_stalls
)
SELECT value ->> 0, value ->> 1, value ->> 2, 'pending', 0, value ->> 3,
    COALESCE(value ->> 4, :now + (value ->> 5)), COALESCE(value ->> 4, :now + (value ->> 5)),
    value ->> 6, value ->> 7, value ->> 8, value ->> 9, :now, 0, value ->> 10
FROM json_each(:jobs) WHERE true
ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET
    id = excluded.id, type = excluded.type, payload = excluded.payload, state = 'pending',
    attempts = 0, max_attempts = excluded.max_attempts, run_at = excluded.run_at,
    due_at = excluded.due_at, lease_token = NULL, timeout_ms = excluded.timeout_ms,
    trace_context = excluded.trace_context, keep_until = excluded.keep_until,
    last_error = NULL, errors = NULL, created_at = excluded.created_at, finished_at = NULL,
    expires_at = NULL, stalls = 0, max_stalls = excluded.max_stalls,
    result = NULL, progress = NULL
WHERE j.expires_at <= excluded.created_at
RETURNING id, type;

-- name: claim
-- Due pending jobs and expired leases, oldest due first, in one UPDATE ... RETURNING.
-- A pending job's attempt is counted (attempts + 1). An expired lease is a stall: stalls + 1,
-- attempts kept (the delivery runs the attempt that stalled again); one whose stalls then
-- exceed max_stalls is failed instead of leased (returned as 'failed'), with the error
-- :stalled_head || stalls || :stalled_middle || max_stalls || :stalled_tail (stalled_error).
-- SET expressions read the row as it was. RETURNING sees only the new row, so a reclaim's
-- token carries the mark 'r' after the attempt (the random part is lowercase hex, which has
-- none): the token stays opaque to workers.
UPDATE {table} SET
    state = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN 'failed' ELSE 'active' END,
    attempts = CASE WHEN state = 'active' THEN attempts ELSE attempts + 1 END,
    stalls = CASE WHEN state = 'active' THEN stalls + 1 ELSE stalls END,
    lease_token = CASE WHEN state = 'active' AND stalls >= max_stalls THEN NULL
        WHEN state = 'active' THEN attempts || ':r' || lower(hex(randomblob(12)))
        ELSE (attempts + 1) || ':' || lower(hex(randomblob(12))) END,
    due_at = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN NULL ELSE :now + :lease_ms END,
    last_error = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail
        ELSE last_error END,
    errors = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN CASE WHEN json_array_length(coalesce(errors, '[]')) >= :max_errors
            THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json_array(attempts, :now,
                :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail))
        ELSE json_insert(coalesce(errors, '[]'), '$[#]', json_array(attempts, :now,
                :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail))
        END ELSE errors END,
    finished_at = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN :now END,
    expires_at = CASE WHEN state = 'active' AND stalls >= max_stalls
        THEN max(:now + :retain_failed_ms, coalesce(keep_until, 0)) END
WHERE id IN (
    SELECT id FROM {table}
    WHERE due_at <= :now AND type IN (SELECT value FROM json_each(:types))
    ORDER BY due_at
    LIMIT :limit
)
RETURNING state, run_at, id, type, payload, attempts, max_attempts, lease_token, timeout_ms,
    key, trace_context, instr(lease_token, 'r') > 0 AS reclaimed, stalls;

-- name: heartbeat
UPDATE {table} SET due_at = :now + :lease_ms
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING 1;

-- name: set_progress
-- A handler's progress (JSON text), fenced by the lease token like a heartbeat.
UPDATE {table} SET progress = :progress
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING 1;

-- name: finish
-- complete (:error NULL) or fail; the row is kept until max(now + retention, keep_until).
-- :result is a completed job's result (JSON text; NULL for none, and for a fail).
-- A retry's or fail's error is appended to errors, a JSON array of [attempt, at, error], newest
-- last, the last :max_errors kept.
UPDATE {table} SET
    state = :state, lease_token = NULL, due_at = NULL, result = :result,
    last_error = coalesce(:error, last_error), finished_at = :now,
    errors = CASE WHEN :error IS NULL THEN errors
        ELSE CASE WHEN json_array_length(coalesce(errors, '[]')) >= :max_errors
            THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json_array(attempts, :now, :error))
        ELSE json_insert(coalesce(errors, '[]'), '$[#]', json_array(attempts, :now, :error)) END END,
    expires_at = max(:now + :retain_ms, coalesce(keep_until, 0))
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING 1;

-- name: complete_many
-- complete for a batch: :jobs is a JSON array of [id, lease_token] pairs (each a job of its
-- own, fenced by its token); returns the ids it completed. The pairs are looked up by id.
-- With :with_results 1 each entry is [id, lease_token, result] (result JSON text or null).
UPDATE {table} SET
    state = 'completed', lease_token = NULL, due_at = NULL, finished_at = :now,
    result = CASE WHEN :with_results THEN (
        SELECT json_extract(value, '$[2]') FROM json_each(:jobs)
        WHERE json_extract(value, '$[0]') = {table}.id
    ) END,
    expires_at = max(:now + :retain_ms, coalesce(keep_until, 0))
WHERE state = 'active' AND (id, lease_token) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:jobs)
)
RETURNING id;

-- name: retry
-- :uncount 1 gives the attempt back (RetryLater: attempts - 1), 0 keeps it spent.
UPDATE {table} SET
    state = 'pending', lease_token = NULL, last_error = :error, attempts = attempts - :uncount,
    errors = CASE WHEN json_array_length(coalesce(errors, '[]')) >= :max_errors
            THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json_array(attempts, :now, :error))
        ELSE json_insert(coalesce(errors, '[]'), '$[#]', json_array(attempts, :now, :error)) END,
    run_at = :now + :delay_ms, due_at = :now + :delay_ms
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING type;

-- name: release
-- A held job handed back at no cost: pending, due now, the attempt it held given back.
UPDATE {table} SET
    state = 'pending', lease_token = NULL, attempts = attempts - 1, run_at = :now, due_at = :now
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING type;

-- name: release_many
-- release for a batch: :jobs is a JSON array of [id, lease_token] pairs; returns the ids.
UPDATE {table} SET
    state = 'pending', lease_token = NULL, attempts = attempts - 1, run_at = :now, due_at = :now
WHERE state = 'active' AND (id, lease_token) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:jobs)
)
RETURNING id, type;

-- name: get_job
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, result, progress
FROM {table}
WHERE id = :id AND (expires_at IS NULL OR expires_at > :now);

-- name: counts
SELECT state, count(*) AS jobs FROM {table}
WHERE expires_at IS NULL OR expires_at > :now
GROUP BY state;

-- name: next_due
-- Milliseconds until the next job of :types is due (negative: overdue; NULL: none).
SELECT min(due_at) - :now AS due_in FROM {table}
WHERE due_at IS NOT NULL AND type IN (SELECT value FROM json_each(:types));

-- name: prune
DELETE FROM {table}
WHERE expires_at <= :now AND id IN (
    SELECT id FROM {table} WHERE expires_at <= :now LIMIT :batch
)
RETURNING 1;

-- name: list_jobs
-- Newest first, resuming strictly after the cursor's (created_at, id) (the first page binds
-- one past every row): a backward range scan of the created index.
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, result, progress
FROM {table}
WHERE (created_at, id) < (:before_at, :before_id)
    AND type = coalesce(:type, type)
    AND (expires_at IS NULL OR expires_at > :now)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: list_jobs_in_state
-- list_jobs of one state: a backward range scan of the state index, whose first column keys
-- pending and active jobs alike as 'live' (tables.listed_state; :listed is that key of :state).
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, result, progress
FROM {table}
WHERE (created_at, id) < (:before_at, :before_id)
    AND (CASE WHEN state IN ('pending', 'active') THEN 'live' ELSE state END) = :listed
    -- "+": a plain state = :state would be propagated into the CASE above, which would then
    -- no longer be the indexed expression
    AND +state = :state
    AND type = coalesce(:type, type)
    AND (expires_at IS NULL OR expires_at > :now)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: find_job
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, result, progress
FROM {table}
WHERE key = :key AND (expires_at IS NULL OR expires_at > :now);

-- name: purge_jobs
-- Live jobs in :states (never active) finished, or if pending created, by the cutoff.
DELETE FROM {table}
WHERE state IN (SELECT value FROM json_each(:states)) AND state <> 'active' AND (expires_at IS NULL OR expires_at > :now)
    AND (:type IS NULL OR type = :type)
    AND (:older_than_ms IS NULL
        OR COALESCE(finished_at, created_at) <= :now - :older_than_ms)
RETURNING 1;

-- name: delete_job
DELETE FROM {table}
WHERE id = :id AND state <> 'active' AND (expires_at IS NULL OR expires_at > :now)
RETURNING 1;

-- name: cancel_job
-- A pending or active job becomes cancelled (finished); clearing its lease token refuses the
-- worker's next heartbeat and settle.
UPDATE {table} SET
    state = 'cancelled', lease_token = NULL, due_at = NULL, finished_at = :now,
    expires_at = max(:now + :retain_ms, COALESCE(keep_until, 0))
WHERE id = :id AND state IN ('pending', 'active')
RETURNING 1;

-- name: stats
-- Per type: live jobs by state (pending split into due and scheduled), and how long the oldest
-- due job has been due. One pass over the live rows.
SELECT type,
    sum(CASE WHEN state = 'pending' AND run_at <= :now THEN 1 ELSE 0 END) AS due,
    sum(CASE WHEN state = 'pending' AND run_at > :now THEN 1 ELSE 0 END) AS scheduled,
    sum(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS active,
    sum(CASE WHEN state = 'completed' THEN 1 ELSE 0 END) AS completed,
    sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    :now - min(CASE WHEN state = 'pending' AND run_at <= :now THEN run_at END)
        AS oldest_due_age_ms
FROM {table}
WHERE expires_at IS NULL OR expires_at > :now
GROUP BY type;

-- name: requeue_job
-- An operator's retry: a live failed or cancelled job becomes pending, due now, with exactly
-- one more attempt; id, key, payload and errors stay.
UPDATE {table} SET
    state = 'pending', max_attempts = attempts + 1, run_at = :now, due_at = :now,
    lease_token = NULL, finished_at = NULL, expires_at = NULL
WHERE id = :id AND state IN ('failed', 'cancelled') AND expires_at > :now
RETURNING type;

-- name: requeue_failed
-- requeue_job for every live failed job (of :type), in one write transaction.
UPDATE {table} SET
    state = 'pending', max_attempts = attempts + 1, run_at = :now, due_at = :now,
    lease_token = NULL, finished_at = NULL, expires_at = NULL
WHERE state = 'failed' AND expires_at > :now AND (:type IS NULL OR type = :type)
RETURNING type;
