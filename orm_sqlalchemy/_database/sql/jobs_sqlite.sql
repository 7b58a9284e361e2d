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
    trace_context, keep_until, created_at, stalls, max_stalls, priority, queue
)
VALUES (
    :id, :type, :payload, 'pending', 0, :max_attempts,
    COALESCE(:run_at, :now + :delay_ms), COALESCE(:run_at, :now + :delay_ms),
    :timeout_ms, :key, :trace_context, :keep_until, :now, 0, :max_stalls, :priority, :queue
)
ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET
    id = excluded.id, type = excluded.type, payload = excluded.payload, state = 'pending',
    attempts = 0, max_attempts = excluded.max_attempts, run_at = excluded.run_at,
    due_at = excluded.due_at, lease_token = NULL, timeout_ms = excluded.timeout_ms,
    trace_context = excluded.trace_context, keep_until = excluded.keep_until,
    last_error = NULL, errors = NULL, created_at = excluded.created_at, finished_at = NULL,
    expires_at = NULL, stalls = 0, max_stalls = excluded.max_stalls,
    priority = excluded.priority, queue = excluded.queue, result = NULL, progress = NULL
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
    trace_context, keep_until, created_at, stalls, max_stalls, priority, queue
)
SELECT value ->> 0, value ->> 1, value ->> 2, 'pending', 0, value ->> 3,
    COALESCE(value ->> 4, :now + (value ->> 5)), COALESCE(value ->> 4, :now + (value ->> 5)),
    value ->> 6, value ->> 7, value ->> 8, value ->> 9, :now, 0, value ->> 10,
    value ->> 11, value ->> 12
FROM json_each(:jobs) WHERE true
ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET
    id = excluded.id, type = excluded.type, payload = excluded.payload, state = 'pending',
    attempts = 0, max_attempts = excluded.max_attempts, run_at = excluded.run_at,
    due_at = excluded.due_at, lease_token = NULL, timeout_ms = excluded.timeout_ms,
    trace_context = excluded.trace_context, keep_until = excluded.keep_until,
    last_error = NULL, errors = NULL, created_at = excluded.created_at, finished_at = NULL,
    expires_at = NULL, stalls = 0, max_stalls = excluded.max_stalls,
    priority = excluded.priority, queue = excluded.queue, result = NULL, progress = NULL
WHERE j.expires_at <= excluded.created_at
RETURNING id, type;

-- name: claim_lease
-- (A fragment: claim and claim_limited end it with the rows they lease, then claim_returning.)
-- A pending job's attempt is counted (attempts + 1). An expired lease is a stall: stalls + 1,
-- attempts kept (the delivery runs the attempt that stalled again); one whose stalls then
-- exceed max_stalls is failed instead of leased (returned as 'failed'), with the error
-- :stalled_head || stalls || :stalled_middle || max_stalls || :stalled_tail (stalled_error);
-- but a workflow job is leased (stalls past max_stalls), for the store to fail it through
-- finish, which settles its dependents in the failure's own transaction.
-- SET expressions read the row as it was. RETURNING sees only the new row, so a reclaim's
-- token carries the mark 'r' after the attempt (the random part is lowercase hex, which has
-- none): the token stays opaque to workers.
UPDATE {table} SET
    state = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN 'failed' ELSE 'active' END,
    attempts = CASE WHEN state = 'active' THEN attempts ELSE attempts + 1 END,
    stalls = CASE WHEN state = 'active' THEN stalls + 1 ELSE stalls END,
    lease_token = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
            THEN NULL
        WHEN state = 'active' THEN attempts || ':r'
            || CASE WHEN workflow_id IS NULL THEN '' ELSE 'w' END || lower(hex(randomblob(12)))
        ELSE (attempts + 1) || ':' || CASE WHEN workflow_id IS NULL THEN '' ELSE 'w' END
            || lower(hex(randomblob(12))) END,
    due_at = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN NULL ELSE :now + :lease_ms END,
    last_error = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail
        ELSE last_error END,
    errors = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN CASE WHEN json_array_length(coalesce(errors, '[]')) >= :max_errors
            THEN json_insert(json_remove(errors, '$[0]'), '$[#]', json_array(attempts, :now,
                :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail))
        ELSE json_insert(coalesce(errors, '[]'), '$[#]', json_array(attempts, :now,
                :stalled_head || (stalls + 1) || :stalled_middle || max_stalls || :stalled_tail))
        END ELSE errors END,
    finished_at = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN :now END,
    expires_at = CASE WHEN state = 'active' AND stalls >= max_stalls AND workflow_id IS NULL
        THEN max(:now + :retain_failed_ms, coalesce(keep_until, 0)) END

-- name: claim_returning
RETURNING state, run_at, id, type, payload, attempts, max_attempts, lease_token, timeout_ms,
    key, trace_context, instr(lease_token, 'r') > 0 AS reclaimed, stalls, max_stalls, priority,
    depends_on, workflow_id

-- name: claim
-- Due pending jobs and expired leases, the highest priority first, then the oldest due (a walk
-- of the claim index, ix_<table>_claim), in one UPDATE ... RETURNING (claim_lease).
{statement:claim_lease}
WHERE id IN (
    SELECT id FROM {table}
    WHERE due_at <= :now AND queue = :queue AND type IN (SELECT value FROM json_each(:types))
    ORDER BY priority DESC, due_at
    LIMIT :limit
)
{statement:claim_returning};

-- name: limit_ended
-- A limited claim's first step (jobs.spi.limits; _database.limits; one write transaction, so
-- no other claim counts meanwhile): of the keys :keys (a JSON array of [key, window ms], 0 for
-- a key without a rate), the claims still marked held whose job no longer holds their lease
-- (active, the lease live: an active job's due_at is its lease's end) are marked not held:
-- for good, as a lease token is its claim's alone. Only those are looked up in the job table.
UPDATE {limits} SET held = 0
WHERE key IN (SELECT value ->> 0 FROM json_each(:keys)) AND held = 1
    AND NOT EXISTS (
        SELECT 1 FROM {table} AS j
        WHERE j.id = {limits}.job_id AND j.lease_token = {limits}.lease_token
            AND j.state = 'active' AND j.due_at > :now
    );

-- name: limit_dead
-- Then, per key, the claims not held made by :before (the window's start) are deleted, so the
-- table stays small: a range of the window index ("+": not the held index, whose rows not
-- held span the whole window).
DELETE FROM {limits} WHERE key = :key AND at <= :before AND +held = 0;

-- name: limit_usage
-- Per key of :keys: held, its claims whose job still holds their lease (limit_ended ran);
-- started, those made in the window, and the oldest of them. A row per key, with now.
WITH keys(key, per_ms) AS (
    SELECT value ->> 0, value ->> 1 FROM json_each(:keys)
)
SELECT k.key, :now AS now,
    (SELECT count(*) FROM {limits} AS c WHERE c.key = k.key AND c.held = 1) AS held,
    (SELECT count(*) FROM {limits} AS c WHERE c.key = k.key AND c.at > :now - k.per_ms)
        AS started,
    (SELECT min(c.at) FROM {limits} AS c WHERE c.key = k.key AND c.at > :now - k.per_ms)
        AS oldest_start
FROM keys AS k;

-- name: limit_candidates
-- The due jobs of :types (a JSON array) a limited claim may take, :limit of them in claim
-- order; the store reads each capped type apart, its room as the limit, and merges.
SELECT id, type, priority, due_at FROM {table}
WHERE due_at <= :now AND queue = :queue AND type IN (SELECT value FROM json_each(:types))
ORDER BY priority DESC, due_at
LIMIT :limit;

-- name: claim_limited
-- claim of the jobs a limited claim picked (:ids, a JSON array, among limit_candidates in
-- the same transaction).
{statement:claim_lease}
WHERE id IN (SELECT value FROM json_each(:ids))
{statement:claim_returning};

-- name: limit_record
-- The limited claim's leases, recorded: :claims is a JSON array of [key, job id, lease token].
INSERT INTO {limits} (key, job_id, lease_token, at)
SELECT value ->> 0, value ->> 1, value ->> 2, :now FROM json_each(:claims);

-- name: heartbeat
UPDATE {table} SET due_at = :now + :lease_ms
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING 1;

-- name: set_progress
-- A handler's progress (JSON text), fenced by the lease token like a heartbeat.
UPDATE {table} SET progress = :progress
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING 1;

-- name: finish_update
-- (A fragment: finish and finish_workflow end it with what they return.)
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

-- name: finish
{statement:finish_update}
RETURNING 1;

-- name: finish_workflow
-- finish of a workflow job (its lease token says so: the claim marks it); the store settles
-- its dependents in the same transaction (workflow_doomed ... workflow_release, driven by
-- orm_sqlalchemy.workflows).
{statement:finish_update}
RETURNING id, type, state, workflow_id;

-- name: workflow_doomed
-- The pending dependents that :settled ([[id, type, state], ...]: parents that ended so;
-- "deleted" for one deleted unfinished) take with them, down the DAG: a parent that did not
-- complete cancels each child not on a proceed edge (on_failure="continue"), and so on. Each
-- row names a parent that ended it.
WITH RECURSIVE settled(id, type, state) AS (
    SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:settled)
),
doomed(id, type, cause_id, cause_type, cause_state) AS (
    SELECT c.id, c.type, s.id, s.type, s.state
    FROM settled AS s
    JOIN {edges} AS e ON e.parent_id = s.id
    JOIN {table} AS c ON c.id = e.child_id
    WHERE s.state <> 'completed' AND e.proceed = 0 AND c.state = 'pending'
    UNION
    SELECT c.id, c.type, d.id, d.type, 'cancelled'
    FROM doomed AS d
    JOIN {edges} AS e ON e.parent_id = d.id
    JOIN {table} AS c ON c.id = e.child_id
    WHERE e.proceed = 0 AND c.state = 'pending'
)
SELECT id, type, cause_id, cause_type, cause_state FROM doomed;

-- name: workflow_cancel
-- :jobs is a JSON array of [id, error]: each pending one ends cancelled with its error.
UPDATE {table} SET
    state = 'cancelled', lease_token = NULL, due_at = NULL, finished_at = :now,
    last_error = (SELECT value ->> 1 FROM json_each(:jobs) WHERE value ->> 0 = {table}.id),
    errors = json_insert(
        CASE WHEN json_array_length(coalesce(errors, '[]')) >= :max_errors
            THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END,
        '$[#]', json_array(attempts, :now,
            (SELECT value ->> 1 FROM json_each(:jobs) WHERE value ->> 0 = {table}.id))),
    expires_at = max(:now + :retain_cancelled_ms, coalesce(keep_until, 0))
WHERE state = 'pending' AND id IN (SELECT value ->> 0 FROM json_each(:jobs))
RETURNING id;

-- name: workflow_unlink
-- The edges of the parents :ids (a JSON array), deleted: each is settled once.
DELETE FROM {edges} WHERE parent_id IN (SELECT value FROM json_each(:ids))
RETURNING parent_id, child_id, proceed;

-- name: workflow_release
-- :jobs is a JSON array of [id, n]: each pending job waits for n parents fewer; at 0 it is
-- due (its run_at, or now if later).
UPDATE {table} SET
    waiting = waiting - (SELECT value ->> 1 FROM json_each(:jobs) WHERE value ->> 0 = {table}.id),
    run_at = CASE
        WHEN waiting > (SELECT value ->> 1 FROM json_each(:jobs) WHERE value ->> 0 = {table}.id)
        THEN run_at ELSE max(run_at, :now) END,
    due_at = CASE
        WHEN waiting > (SELECT value ->> 1 FROM json_each(:jobs) WHERE value ->> 0 = {table}.id)
        THEN NULL ELSE max(run_at, :now) END
WHERE state = 'pending' AND waiting > 0 AND id IN (SELECT value ->> 0 FROM json_each(:jobs))
RETURNING id, type, due_at;

-- name: workflow_parents
-- Finished parents whose edges are left (a claim that failed a workflow job whose lease
-- expired too often, in the transaction after it; and the sweep that runs with the prune):
-- those of :ids (a JSON array), or with :ids NULL any, up to :batch. A parent row that is
-- gone counts as deleted.
SELECT p.id, coalesce(j.type, '?') AS type, coalesce(j.state, 'deleted') AS state
FROM (
    SELECT DISTINCT parent_id AS id FROM {edges}
    WHERE :ids IS NULL OR parent_id IN (SELECT value FROM json_each(:ids))
) AS p
LEFT JOIN {table} AS j ON j.id = p.id
WHERE j.id IS NULL OR j.state IN ('completed', 'failed', 'cancelled')
LIMIT :batch;

-- name: enqueue_workflow
-- A workflow's jobs: :jobs is a JSON array with one array per job (enqueue_many's columns,
-- then depends_on and waiting). A job with parents is stored waiting for them (waiting > 0,
-- due_at NULL: no claim sees it); workflow_seq keeps the order they were given in. The edges
-- follow in the same transaction (enqueue_workflow_edges).
INSERT INTO {table} (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, stalls, max_stalls, priority, workflow_id,
    workflow_seq, depends_on, waiting, queue
)
SELECT value ->> 0, value ->> 1, value ->> 2, 'pending', 0, value ->> 3,
    COALESCE(value ->> 4, :now + (value ->> 5)),
    CASE WHEN value ->> 12 = 0 THEN COALESCE(value ->> 4, :now + (value ->> 5)) END,
    value ->> 6, NULL, value ->> 7, value ->> 8, :now, 0, value ->> 9, value ->> 10,
    :workflow_id, key, value ->> 11, value ->> 12, value ->> 13
FROM json_each(:jobs);

-- name: enqueue_workflow_edges
-- :edges is a JSON array of [parent_id, child_id, proceed].
INSERT INTO {edges} (parent_id, child_id, proceed)
SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:edges);

-- name: workflow_jobs
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress,
    workflow_id, depends_on
FROM {table}
WHERE workflow_id = :workflow_id AND (expires_at IS NULL OR expires_at > :now)
ORDER BY workflow_seq;


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
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE id = :id AND (expires_at IS NULL OR expires_at > :now);

-- name: counts
SELECT state, count(*) AS jobs FROM {table}
WHERE expires_at IS NULL OR expires_at > :now
GROUP BY state;

-- name: next_due
-- Milliseconds until the next job of :types is due (negative: overdue; NULL: none).
SELECT min(due_at) - :now AS due_in FROM {table}
WHERE due_at IS NOT NULL AND type IN (SELECT value FROM json_each(:types))
    AND queue IN (SELECT value FROM json_each(:queues));

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
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE (created_at, id) < (:before_at, :before_id)
    AND type = coalesce(:type, type)
    AND queue = coalesce(:queue, queue)
    AND (expires_at IS NULL OR expires_at > :now)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: list_jobs_in_state
-- list_jobs of one state: a backward range scan of the state index, whose first column keys
-- pending and active jobs alike as 'live' (tables.listed_state; :listed is that key of :state).
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE (created_at, id) < (:before_at, :before_id)
    AND (CASE WHEN state IN ('pending', 'active') THEN 'live' ELSE state END) = :listed
    -- "+": a plain state = :state would be propagated into the CASE above, which would then
    -- no longer be the indexed expression
    AND +state = :state
    AND type = coalesce(:type, type)
    AND queue = coalesce(:queue, queue)
    AND (expires_at IS NULL OR expires_at > :now)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: find_job
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE key = :key AND (expires_at IS NULL OR expires_at > :now);

-- name: purge_jobs
-- Live jobs in :states (never active) finished, or if pending created, by the cutoff.
DELETE FROM {table}
WHERE state IN (SELECT value FROM json_each(:states)) AND state <> 'active' AND (expires_at IS NULL OR expires_at > :now)
    AND (:type IS NULL OR type = :type)
    AND (:older_than_ms IS NULL
        OR COALESCE(finished_at, created_at) <= :now - :older_than_ms)
RETURNING id, type, CASE WHEN state = 'pending' THEN 'deleted' ELSE state END AS state,
    workflow_id;

-- name: delete_job
-- state: "deleted" for a pending job (a workflow job's dependents settle with it).
DELETE FROM {table}
WHERE id = :id AND state <> 'active' AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, type, CASE WHEN state = 'pending' THEN 'deleted' ELSE state END AS state,
    workflow_id;

-- name: cancel_job
-- A pending or active job becomes cancelled (finished); clearing its lease token refuses the
-- worker's next heartbeat and settle.
UPDATE {table} SET
    state = 'cancelled', lease_token = NULL, due_at = NULL, finished_at = :now,
    expires_at = max(:now + :retain_ms, COALESCE(keep_until, 0))
WHERE id = :id AND state IN ('pending', 'active')
RETURNING id, type, state, workflow_id;

-- name: stats
-- Per type: live jobs by state (pending split into due and scheduled; a workflow's job waiting
-- for its parents, due_at NULL, is neither), and how long the oldest due job has been due. One
-- pass over the live rows.
SELECT type,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= :now THEN 1 ELSE 0 END)
        AS due,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at > :now THEN 1 ELSE 0 END)
        AS scheduled,
    sum(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS active,
    sum(CASE WHEN state = 'completed' THEN 1 ELSE 0 END) AS completed,
    sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    :now - min(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= :now
        THEN run_at END)
        AS oldest_due_age_ms
FROM {table}
WHERE expires_at IS NULL OR expires_at > :now
GROUP BY type;

-- name: queue_stats
-- stats per named queue instead of per type: live jobs by state (a workflow's job waiting for its
-- parents is neither due nor scheduled), the oldest due job's age.
SELECT queue,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= :now THEN 1 ELSE 0 END)
        AS due,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at > :now THEN 1 ELSE 0 END)
        AS scheduled,
    sum(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS active,
    sum(CASE WHEN state = 'completed' THEN 1 ELSE 0 END) AS completed,
    sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    :now - min(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= :now
        THEN run_at END)
        AS oldest_due_age_ms
FROM {table}
WHERE expires_at IS NULL OR expires_at > :now
GROUP BY queue;

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
