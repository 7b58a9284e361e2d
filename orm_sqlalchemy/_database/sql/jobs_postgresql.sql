-- Job store statements for PostgreSQL. {table} is the quoted table name; {now} is the store's
-- clock in epoch ms: the bound :now when a Clock was injected, else the database's now() (the
-- start of the statement's transaction; every statement here runs in its own).
-- Every statement is one round trip and one transaction, run in READ COMMITTED.

-- name: enqueue
-- A key held by a row past its retention is taken over in place; a live one drops the job.
-- The conflict target names the partial key index (an older table's UNIQUE (key) fits too).
INSERT INTO {table} AS j (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, max_stalls, priority, queue
)
VALUES (
    :id, :type, :payload, 'pending', 0, :max_attempts,
    COALESCE(CAST(:run_at AS bigint), {now} + CAST(:delay_ms AS bigint)),
    COALESCE(CAST(:run_at AS bigint), {now} + CAST(:delay_ms AS bigint)),
    :timeout_ms, :key, :trace_context, :keep_until, {now}, :max_stalls, :priority, :queue
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
RETURNING j.id, j.type;

-- name: enqueue_unkeyed
-- enqueue of a job without a key, which no row can conflict with: a plain INSERT. The upsert's
-- speculative insertion (an extra WAL record and lock per row) and the row sent back cost
-- 8-24 us of server CPU per job here (82-88 against 90-112 us, bare asyncpg loop, same table).
-- A repeated id fails either way (the primary key); the store reads success from no error.
INSERT INTO {table} (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, max_stalls, priority, queue
)
VALUES (
    :id, :type, :payload, 'pending', 0, :max_attempts,
    COALESCE(CAST(:run_at AS bigint), {now} + CAST(:delay_ms AS bigint)),
    COALESCE(CAST(:run_at AS bigint), {now} + CAST(:delay_ms AS bigint)),
    :timeout_ms, NULL, :trace_context, :keep_until, {now}, :max_stalls, :priority, :queue
);

-- name: enqueue_many
-- A batch as one statement: one array per column, a job per index. Its keys are distinct (the
-- store drops later repeats of a key first: ON CONFLICT cannot touch one row twice).
INSERT INTO {table} AS j (
    id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
    trace_context, keep_until, created_at, max_stalls, priority, queue
)
SELECT b.id, b.type, b.payload, 'pending', 0, b.max_attempts,
    COALESCE(b.run_at, {now} + b.delay_ms), COALESCE(b.run_at, {now} + b.delay_ms),
    b.timeout_ms, b.key, b.trace_context, b.keep_until, {now}, b.max_stalls, b.priority, b.queue
FROM unnest(
    CAST(:ids AS text[]), CAST(:types AS text[]), CAST(:payloads AS text[]),
    CAST(:max_attempts AS integer[]), CAST(:run_ats AS bigint[]), CAST(:delays AS bigint[]),
    CAST(:timeouts AS bigint[]), CAST(:keys AS text[]), CAST(:trace_contexts AS text[]),
    CAST(:keep_untils AS bigint[]), CAST(:max_stalls AS integer[]), CAST(:priorities AS integer[]),
    CAST(:queues AS text[])
) AS b(id, type, payload, max_attempts, run_at, delay_ms, timeout_ms, key, trace_context,
    keep_until, max_stalls, priority, queue)
ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET
    id = excluded.id, type = excluded.type, payload = excluded.payload, state = 'pending',
    attempts = 0, max_attempts = excluded.max_attempts, run_at = excluded.run_at,
    due_at = excluded.due_at, lease_token = NULL, timeout_ms = excluded.timeout_ms,
    trace_context = excluded.trace_context, keep_until = excluded.keep_until,
    last_error = NULL, errors = NULL, created_at = excluded.created_at, finished_at = NULL,
    expires_at = NULL, stalls = 0, max_stalls = excluded.max_stalls,
    priority = excluded.priority, queue = excluded.queue, result = NULL, progress = NULL
WHERE j.expires_at <= excluded.created_at
RETURNING j.id, j.type;

-- name: claim_lease
-- (A fragment: claim and claim_limited end it with their choice of rows, "due" (id, state).)
-- A pending job's attempt is counted (attempts + 1). An expired lease is a stall: stalls + 1,
-- attempts kept (the delivery runs the attempt that stalled again); one whose stalls then
-- exceed max_stalls is failed instead of leased (returned as 'failed'), with the error
-- :stalled_head || stalls || :stalled_middle || max_stalls || :stalled_tail (stalled_error);
-- but a workflow job is leased (stalls past max_stalls), for the store to fail it through
-- finish, which settles its dependents in the failure's own statement.
UPDATE {table} AS j SET
    state = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN 'failed' ELSE 'active' END,
    attempts = CASE WHEN j.state = 'active' THEN j.attempts ELSE j.attempts + 1 END,
    stalls = CASE WHEN j.state = 'active' THEN j.stalls + 1 ELSE j.stalls END,
    lease_token = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL THEN NULL
        ELSE (CASE WHEN j.state = 'active' THEN j.attempts ELSE j.attempts + 1 END) || ':'
            || CASE WHEN j.workflow_id IS NULL THEN '' ELSE 'w' END
            || replace(gen_random_uuid()::text, '-', '') END,
    due_at = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN NULL ELSE {now} + CAST(:lease_ms AS bigint) END,
    last_error = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN CAST(:stalled_head AS text) || (j.stalls + 1) || CAST(:stalled_middle AS text)
            || j.max_stalls || CAST(:stalled_tail AS text)
        ELSE j.last_error END,
    errors = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN CAST(CASE WHEN jsonb_array_length(COALESCE(CAST(j.errors AS jsonb), CAST('[]' AS jsonb))) >= :max_errors
            THEN CAST(j.errors AS jsonb) - 0 ELSE COALESCE(CAST(j.errors AS jsonb), CAST('[]' AS jsonb)) END
        || jsonb_build_array(jsonb_build_array(j.attempts, {now},
            CAST(:stalled_head AS text) || (j.stalls + 1) || CAST(:stalled_middle AS text)
            || j.max_stalls || CAST(:stalled_tail AS text))) AS text) ELSE j.errors END,
    finished_at = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN {now} END,
    expires_at = CASE WHEN j.state = 'active' AND j.stalls >= j.max_stalls AND j.workflow_id IS NULL
        THEN GREATEST({now} + CAST(:retain_failed_ms AS bigint), COALESCE(j.keep_until, 0)) END

-- name: claim_returning
-- (A fragment: what claim and claim_limited return of the rows they leased.)
RETURNING j.state, j.run_at, j.id, j.type, j.payload, j.attempts, j.max_attempts,
    j.lease_token, j.timeout_ms, j.key, j.trace_context, due.state = 'active' AS reclaimed,
    j.stalls, j.max_stalls, j.priority, j.depends_on, j.workflow_id

-- name: claim
-- Due pending jobs and expired leases, the highest priority first, then the oldest due, skipping
-- rows another claimer holds (a walk of the claim index, ix_<table>_claim), leased
-- (claim_lease).
WITH due AS MATERIALIZED (
    SELECT id, state FROM {table}
    WHERE due_at <= {now} AND queue = CAST(:queue AS text) AND type = ANY(CAST(:types AS text[]))
    ORDER BY priority DESC, due_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
{statement:claim_lease}
FROM due
WHERE j.id = due.id
{statement:claim_returning};

-- name: claim_next_due
-- claim, when the last claim of these types took fewer jobs than it asked (an idle runner's:
-- the store chooses, so that a drain's full batches pay nothing for it). It also answers
-- next_due for :types as things stand after it, leaving out the rows it took (the store adds
-- the end of the leases it gave): due_in, on every row, or on one row of NULL job columns when
-- it took none, so that the wait after it needs no statement of its own. The look-up reads the
-- statement's snapshot, where the rows taken are still due, in due order past as many rows as
-- were taken: rows another claimer held (skipped) are among them then, and answer "due now".
-- It runs only when the claim took fewer than :limit (a subquery runs once its CASE branch is
-- taken). (An anti-join on the rows taken instead ran once per row: quadratic in the batch.)
WITH claimed AS (
{statement:claim}
)
SELECT claimed.*, later.due_in
FROM (
    SELECT CASE WHEN (SELECT count(*) FROM claimed) < :limit THEN
        (SELECT o.due_at FROM {table} AS o
            WHERE o.due_at IS NOT NULL AND o.queue = CAST(:queue AS text)
                AND o.type = ANY(CAST(:types AS text[]))
            ORDER BY o.due_at
            OFFSET (SELECT count(*) FROM claimed) LIMIT 1) - {now}
    END AS due_in
) AS later
LEFT JOIN claimed ON true;

-- name: limit_usage
-- A limited claim's count and candidates (jobs.spi.limits; _database.limits), in its
-- transaction once it holds the lock of each key: a statement of its own, as READ COMMITTED
-- takes a statement's snapshot when it starts, before a lock it then waits for. Its clock is
-- read as it starts too ({statement_now}: after the lock, where now() is the transaction's
-- start, before it), and the store binds it to the lease and record (claim_limited), so a
-- claim that waited for the lock counts and records its claims at the time it made them.
-- Per key of :keys (its window :windows, in ms; 0 for a key without a rate): held, the claims
-- recorded under it whose job still holds the lease they gave (active, the lease live: an
-- active job's due_at is its lease's end); started, those made in the window, and the oldest
-- of them; and now (the store's clock). Only rows still marked held are looked up in the job
-- table (holding: by id alone, the lease checked on the row found, as a join on due_at > now
-- too was planned as a walk of the due index, every scheduled job); one found not held is marked so (ended) or, past the window, deleted with
-- the others past it that are not held (dead): two sets apart, as one statement may not write
-- a row twice. The counts read the snapshot: the rows as they were before this statement.
-- Beside them (rows of NULL key), the candidates: the due jobs of :types, locked (skipping
-- rows another claimer holds), per group (:groups, from 1: the group of each type) at most
-- its :caps (by group), read as the claim reads (the claim index). The store puts each type
-- with a limit in a group of its own, the others in one, each at most the claim's limit, so
-- that a type at its cap never crowds the others out; it picks among them (plan.pick) in
-- claim order, the highest priority then the earliest due.
WITH keys AS MATERIALIZED (
    SELECT * FROM unnest(CAST(:keys AS text[]), CAST(:windows AS bigint[])) AS k(key, per_ms)
),
holding AS MATERIALIZED (
    SELECT c.key, c.job_id, c.lease_token, c.at <= {statement_now} - k.per_ms AS past,
        COALESCE(j.state = 'active' AND j.due_at > {statement_now}, false) AS held
    FROM keys AS k
    JOIN {limits} AS c ON c.key = k.key AND c.held = 1
    LEFT JOIN {table} AS j ON j.id = c.job_id AND j.lease_token = c.lease_token
),
ended AS (
    UPDATE {limits} AS d SET held = 0
    FROM holding AS h
    WHERE d.key = h.key AND d.job_id = h.job_id AND d.lease_token = h.lease_token
        AND NOT h.held AND NOT h.past
),
dead AS (
    DELETE FROM {limits} AS d
    USING keys AS k
    WHERE d.key = k.key AND d.at <= {statement_now} - k.per_ms
        AND (d.held = 0 OR EXISTS (
            SELECT 1 FROM holding AS h
            WHERE h.key = d.key AND h.job_id = d.job_id AND h.lease_token = d.lease_token
                AND NOT h.held
        ))
),
candidates AS (
    SELECT c.id, c.type, c.priority, c.due_at
    FROM unnest(CAST(:caps AS integer[])) WITH ORDINALITY AS g(cap, n)
    CROSS JOIN LATERAL (
        SELECT id, type, priority, due_at FROM {table}
        WHERE due_at <= {statement_now} AND queue = CAST(:queue AS text)
            AND type = ANY(ARRAY(
                SELECT t.type
                FROM unnest(CAST(:types AS text[]), CAST(:groups AS integer[])) AS t(type, grp)
                WHERE t.grp = g.n
            ))
        ORDER BY priority DESC, due_at
        LIMIT g.cap
        FOR UPDATE SKIP LOCKED
    ) AS c
)
SELECT k.key, {statement_now} AS now,
    (SELECT count(*) FROM holding AS h WHERE h.key = k.key AND h.held) AS held,
    w.started, w.oldest_start, NULL AS id, NULL AS type, NULL AS priority, NULL AS due_at
FROM keys AS k
CROSS JOIN LATERAL (
    SELECT count(*) AS started, min(c.at) AS oldest_start FROM {limits} AS c
    WHERE c.key = k.key AND c.at > {statement_now} - k.per_ms
) AS w
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, id, type, priority, due_at FROM candidates;

-- name: claim_limited
-- claim of the jobs a limited claim picked (:ids, among the candidates limit_usage locked),
-- each leased one recorded under its keys (:record_ids, :record_keys: a pair per job and key).
WITH due AS MATERIALIZED (
    SELECT id, state FROM {table} WHERE id = ANY(CAST(:ids AS text[]))
),
leased AS (
    {statement:claim_lease}
    FROM due
    WHERE j.id = due.id
    {statement:claim_returning}
),
recorded AS (
    INSERT INTO {limits} (key, job_id, lease_token, at)
    SELECT r.key, l.id, l.lease_token, {now}
    FROM leased AS l
    JOIN unnest(CAST(:record_ids AS text[]), CAST(:record_keys AS text[])) AS r(id, key)
        ON r.id = l.id
    WHERE l.state = 'active'
)
SELECT * FROM leased;

-- name: heartbeat
UPDATE {table} SET due_at = {now} + CAST(:lease_ms AS bigint)
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
    state = :state, lease_token = NULL, due_at = NULL, result = CAST(:result AS text),
    last_error = COALESCE(CAST(:error AS text), last_error), finished_at = {now},
    errors = CASE WHEN CAST(:error AS text) IS NULL THEN errors
        ELSE CAST(CASE WHEN jsonb_array_length(COALESCE(CAST(errors AS jsonb), CAST('[]' AS jsonb))) >= :max_errors
            THEN CAST(errors AS jsonb) - 0 ELSE COALESCE(CAST(errors AS jsonb), CAST('[]' AS jsonb)) END
        || jsonb_build_array(jsonb_build_array(attempts, {now}, CAST(:error AS text))) AS text) END,
    expires_at = GREATEST({now} + CAST(:retain_ms AS bigint), COALESCE(keep_until, 0))
WHERE id = :id AND lease_token = :lease_token AND state = 'active'

-- name: finish
{statement:finish_update}
RETURNING 1;

-- name: workflow_release
-- A fragment (jobs.spi.WorkflowStore): the CTEs that follow a statement's "settled" (id, type,
-- state: completed, failed, cancelled, or deleted for a row deleted unfinished) and settle
-- each one's dependents in that same statement, so in its transaction. Only rows with edges
-- left (a workflow job whose parent has not settled yet) are touched: for a plain job each
-- CTE below is an index probe that finds nothing.
-- doomed: the pending dependents a parent that did not complete takes with it, down the DAG
-- (an edge with proceed = 1, on_failure="continue", stops it), each with a parent that ended
-- it. unlinked: the settled rows' edges, deleted (an edge counts once: a parent's second
-- settle, after an operator's requeue, finds none). released: each dependent waits for as
-- many parents fewer as completed, or finished in any way on a proceed edge; at 0 it is due
-- (run_at, or now if later). Two parents of one job settling in two transactions update its
-- row one after the other (the row lock; READ COMMITTED re-reads the row it waited for), so
-- waiting - n is computed from the other's result: never both at 1, never released twice.
-- A row the statement settles itself (a purge deleting a parent and its child) is left to it:
-- one statement must not write a row twice. locked: every dependent either update may write,
-- locked in id order before both (each reads it), so that two settles sharing dependents take
-- their locks in one order and never wait for each other in a circle (a deadlock, one of the
-- two failed after deadlock_timeout).
doomed(id, type, cause_id, cause_type, cause_state) AS (
    SELECT CAST(c.id AS text), CAST(c.type AS text), CAST(s.id AS text), CAST(s.type AS text),
        CAST(s.state AS text)
    FROM settled AS s
    JOIN {edges} AS e ON e.parent_id = s.id
    JOIN {table} AS c ON c.id = e.child_id
    WHERE s.state <> 'completed' AND e.proceed = 0 AND c.state = 'pending'
        AND c.id NOT IN (SELECT id FROM settled)
    UNION
    SELECT CAST(c.id AS text), CAST(c.type AS text), d.id, d.type, CAST('cancelled' AS text)
    FROM doomed AS d
    JOIN {edges} AS e ON e.parent_id = d.id
    JOIN {table} AS c ON c.id = e.child_id
    WHERE e.proceed = 0 AND c.state = 'pending' AND c.id NOT IN (SELECT id FROM settled)
),
locked AS (
    SELECT j.id FROM {table} AS j
    WHERE j.id IN (
        SELECT e.child_id FROM {edges} AS e
        WHERE e.parent_id IN (SELECT id FROM settled UNION SELECT id FROM doomed)
    ) AND j.id NOT IN (SELECT id FROM settled)
    ORDER BY j.id
    FOR UPDATE OF j
),
cancelled AS (
    UPDATE {table} AS j SET
        state = 'cancelled', lease_token = NULL, due_at = NULL, finished_at = {now},
        last_error = d.error,
        errors = CAST(CASE WHEN jsonb_array_length(COALESCE(CAST(j.errors AS jsonb), CAST('[]' AS jsonb))) >= :max_errors
                THEN CAST(j.errors AS jsonb) - 0 ELSE COALESCE(CAST(j.errors AS jsonb), CAST('[]' AS jsonb)) END
            || jsonb_build_array(jsonb_build_array(j.attempts, {now}, d.error)) AS text),
        expires_at = GREATEST({now} + CAST(:retain_cancelled_ms AS bigint), COALESCE(j.keep_until, 0))
    FROM (
        SELECT DISTINCT ON (id) id, CAST(:cancelled_head AS text) || cause_id
            || CAST(:cancelled_middle AS text) || cause_type || CAST(:cancelled_state AS text)
            || cause_state || CAST(:cancelled_tail AS text) AS error
        FROM doomed
        ORDER BY id, cause_id
    ) AS d
    WHERE j.id = d.id AND j.state = 'pending' AND j.id IN (SELECT id FROM locked)
    RETURNING j.id
),
unlinked AS (
    DELETE FROM {edges} AS e
    WHERE e.parent_id IN (SELECT id FROM settled UNION SELECT id FROM doomed)
    RETURNING e.parent_id, e.child_id, e.proceed
),
released AS (
    UPDATE {table} AS j SET
        waiting = j.waiting - u.n,
        run_at = CASE WHEN j.waiting > u.n THEN j.run_at ELSE GREATEST(j.run_at, {now}) END,
        due_at = CASE WHEN j.waiting > u.n THEN NULL ELSE GREATEST(j.run_at, {now}) END
    FROM (
        SELECT u.child_id, count(*) AS n
        FROM unlinked AS u
        LEFT JOIN settled AS s ON s.id = u.parent_id
        WHERE (u.proceed = 1 OR s.state = 'completed')
            AND u.child_id NOT IN (SELECT id FROM doomed)
            AND u.child_id NOT IN (SELECT id FROM settled)
        GROUP BY u.child_id
    ) AS u
    WHERE j.id = u.child_id AND j.state = 'pending' AND j.waiting > 0
        AND j.id IN (SELECT id FROM locked)
    RETURNING j.id, j.type, j.due_at
)

-- name: workflow_outcome
-- A fragment: what a statement ending in workflow_release returns: its settled rows (released
-- false) and the dependents it made due (released true, for the wake-up).
SELECT id, type, false AS released FROM settled
UNION ALL
SELECT id, type, true FROM released WHERE due_at IS NOT NULL

-- name: finish_workflow
-- finish of a workflow job (its lease token says so: the claim marks it), its dependents
-- settled with it (workflow_release).
WITH RECURSIVE settled AS (
    {statement:finish_update}
    RETURNING id, type, state
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: settle_workflow_parents
-- workflow_release for finished parents whose edges are left (a claim that failed a workflow
-- job whose lease expired too often, in the statement after it; and the sweep that runs with
-- the prune): those of :ids, or with :ids NULL every such parent, up to :batch; a parent
-- row that is gone counts as deleted.
WITH RECURSIVE parents AS (
    SELECT DISTINCT parent_id AS id FROM {edges}
    WHERE CAST(:ids AS text[]) IS NULL OR parent_id = ANY(CAST(:ids AS text[]))
),
settled AS (
    SELECT p.id, COALESCE(j.type, '?') AS type, COALESCE(j.state, 'deleted') AS state
    FROM parents AS p LEFT JOIN {table} AS j ON j.id = p.id
    WHERE j.id IS NULL OR j.state IN ('completed', 'failed', 'cancelled')
    LIMIT :batch
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: enqueue_workflow
-- A workflow's jobs (each a batch column, as enqueue_many's) with their edges, in one
-- statement. A job with parents is stored waiting for them (waiting > 0, due_at NULL: no
-- claim sees it); workflow_seq keeps the order they were given in.
WITH stored AS (
    INSERT INTO {table} (
        id, type, payload, state, attempts, max_attempts, run_at, due_at, timeout_ms, key,
        trace_context, keep_until, created_at, max_stalls, priority, queue, workflow_id,
        workflow_seq, depends_on, waiting
    )
    SELECT b.id, b.type, b.payload, 'pending', 0, b.max_attempts,
        COALESCE(b.run_at, {now} + b.delay_ms),
        CASE WHEN b.waiting = 0 THEN COALESCE(b.run_at, {now} + b.delay_ms) END,
        b.timeout_ms, NULL, b.trace_context, b.keep_until, {now}, b.max_stalls, b.priority, b.queue,
        CAST(:workflow_id AS text), b.seq - 1, b.depends_on, b.waiting
    FROM unnest(
        CAST(:ids AS text[]), CAST(:types AS text[]), CAST(:payloads AS text[]),
        CAST(:max_attempts AS integer[]), CAST(:run_ats AS bigint[]), CAST(:delays AS bigint[]),
        CAST(:timeouts AS bigint[]), CAST(:trace_contexts AS text[]),
        CAST(:keep_untils AS bigint[]), CAST(:max_stalls AS integer[]),
        CAST(:priorities AS integer[]), CAST(:depends_ons AS text[]), CAST(:waitings AS integer[]),
        CAST(:queues AS text[])
    ) WITH ORDINALITY AS b(id, type, payload, max_attempts, run_at, delay_ms, timeout_ms,
        trace_context, keep_until, max_stalls, priority, depends_on, waiting, queue, seq)
    RETURNING 1
),
linked AS (
    INSERT INTO {edges} (parent_id, child_id, proceed)
    SELECT * FROM unnest(
        CAST(:parents AS text[]), CAST(:children AS text[]), CAST(:proceeds AS integer[])
    )
    RETURNING 1
)
SELECT (SELECT count(*) FROM stored) AS jobs, (SELECT count(*) FROM linked) AS edges;

-- name: workflow_jobs
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress,
    workflow_id, depends_on
FROM {table}
WHERE workflow_id = :workflow_id AND (expires_at IS NULL OR expires_at > {now})
ORDER BY workflow_seq;


-- name: complete_many_update
-- (A fragment: complete_many and complete_many_workflow end it with what they return.)
-- complete for a group of (id, lease_token, result) at once.
UPDATE {table} AS j SET
    state = 'completed', lease_token = NULL, due_at = NULL, finished_at = {now},
    result = done.result,
    expires_at = GREATEST({now} + CAST(:retain_ms AS bigint), COALESCE(j.keep_until, 0))
FROM unnest(CAST(:ids AS text[]), CAST(:lease_tokens AS text[]), CAST(:results AS text[]))
    AS done(id, lease_token, result)
WHERE j.id = done.id AND j.lease_token = done.lease_token AND j.state = 'active'

-- name: complete_many
-- Returns the ids it completed.
{statement:complete_many_update}
RETURNING j.id;

-- name: complete_many_workflow
-- complete_many of workflow jobs (their lease tokens say so), their dependents settled with
-- them (workflow_release): two parents of one job completed here count it down by two.
WITH RECURSIVE settled AS (
    {statement:complete_many_update}
    RETURNING j.id, j.type, j.state
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: retry
-- :uncount 1 gives the attempt back (RetryLater: attempts - 1), 0 keeps it spent.
UPDATE {table} SET
    state = 'pending', lease_token = NULL, last_error = :error,
    attempts = attempts - CAST(:uncount AS integer),
    errors = CAST(CASE WHEN jsonb_array_length(COALESCE(CAST(errors AS jsonb), CAST('[]' AS jsonb))) >= :max_errors
            THEN CAST(errors AS jsonb) - 0 ELSE COALESCE(CAST(errors AS jsonb), CAST('[]' AS jsonb)) END
        || jsonb_build_array(jsonb_build_array(attempts, {now}, CAST(:error AS text))) AS text),
    run_at = {now} + CAST(:delay_ms AS bigint), due_at = {now} + CAST(:delay_ms AS bigint)
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING type;

-- name: release
-- A held job handed back at no cost: pending, due now, the attempt it held given back.
UPDATE {table} SET
    state = 'pending', lease_token = NULL, attempts = attempts - 1, run_at = {now}, due_at = {now}
WHERE id = :id AND lease_token = :lease_token AND state = 'active'
RETURNING type;

-- name: release_many
-- release for a group of (id, lease_token) pairs at once; returns the ids it released.
UPDATE {table} AS j SET
    state = 'pending', lease_token = NULL, attempts = j.attempts - 1, run_at = {now},
    due_at = {now}
FROM unnest(CAST(:ids AS text[]), CAST(:lease_tokens AS text[])) AS held(id, lease_token)
WHERE j.id = held.id AND j.lease_token = held.lease_token AND j.state = 'active'
RETURNING j.id, j.type;

-- name: get_job
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE id = :id AND (expires_at IS NULL OR expires_at > {now});

-- name: counts
SELECT state, count(*) AS jobs FROM {table}
WHERE expires_at IS NULL OR expires_at > {now}
GROUP BY state;

-- name: next_due
-- Milliseconds until the next job of :types is due (negative: overdue; NULL: none).
SELECT min(due_at) - {now} AS due_in FROM {table}
WHERE due_at IS NOT NULL AND type = ANY(CAST(:types AS text[]))
    AND queue = ANY(CAST(:queues AS text[]));

-- name: prune
DELETE FROM {table}
WHERE expires_at <= {now} AND id IN (
    SELECT id FROM {table} WHERE expires_at <= {now}
    LIMIT :batch FOR UPDATE SKIP LOCKED
)
RETURNING 1;

-- name: list_jobs
-- Newest first, resuming strictly after the cursor's (created_at, id) (the first page binds
-- one past every row): a backward range scan of the created index. No "param IS NULL OR"
-- here: asyncpg's prepared statement gets a generic plan, which could not use the index then.
-- Run with sorting priced out (PostgresBackend.fetch_unsorted): the planner's row estimate
-- (a few rows on a fresh table) would otherwise have it sort every match instead.
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE (created_at, id) < (CAST(:before_at AS bigint), CAST(:before_id AS text))
    AND type = COALESCE(CAST(:type AS text), type)
    AND queue = COALESCE(CAST(:queue AS text), queue)
    AND (expires_at IS NULL OR expires_at > {now})
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: list_jobs_in_state
-- list_jobs of one state: a backward range scan of the state index, whose first column keys
-- pending and active jobs alike as 'live' (tables.listed_state; :listed is that key of :state) (run as list_jobs is).
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE (created_at, id) < (CAST(:before_at AS bigint), CAST(:before_id AS text))
    AND (CASE WHEN state IN ('pending', 'active') THEN 'live' ELSE state END)
        = CAST(:listed AS text)
    AND state = CAST(:state AS text)
    AND type = COALESCE(CAST(:type AS text), type)
    AND queue = COALESCE(CAST(:queue AS text), queue)
    AND (expires_at IS NULL OR expires_at > {now})
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: find_job
SELECT id, type, state, payload, attempts, max_attempts, run_at, last_error, key, timeout_ms,
    created_at, finished_at, trace_context, errors, stalls, max_stalls, priority, queue, result, progress, workflow_id,
    depends_on
FROM {table}
WHERE key = :key AND (expires_at IS NULL OR expires_at > {now});

-- name: purge_jobs
-- Live jobs in :states (never active) finished, or if pending created, by the cutoff; pending
-- workflow jobs settle their dependents as delete_job's do.
WITH RECURSIVE settled AS (
    DELETE FROM {table}
    WHERE state = ANY(CAST(:states AS text[])) AND state <> 'active' AND (expires_at IS NULL OR expires_at > {now})
        AND (CAST(:type AS text) IS NULL OR type = CAST(:type AS text))
        AND (CAST(:older_than_ms AS bigint) IS NULL
            OR COALESCE(finished_at, created_at) <= {now} - CAST(:older_than_ms AS bigint))
    RETURNING id, type, CASE WHEN state = 'pending' THEN 'deleted' ELSE state END AS state
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: delete_job
-- A pending workflow job deleted settles its dependents as a parent that ended "deleted"
-- (workflow_release).
WITH RECURSIVE settled AS (
    DELETE FROM {table}
    WHERE id = :id AND state <> 'active' AND (expires_at IS NULL OR expires_at > {now})
    RETURNING id, type, CASE WHEN state = 'pending' THEN 'deleted' ELSE state END AS state
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: cancel_job
-- A pending or active job becomes cancelled (finished); clearing its lease token refuses the
-- worker's next heartbeat and settle. Its dependents go with it (workflow_release).
WITH RECURSIVE settled AS (
    UPDATE {table} SET
        state = 'cancelled', lease_token = NULL, due_at = NULL, finished_at = {now},
        expires_at = GREATEST({now} + CAST(:retain_ms AS bigint), COALESCE(keep_until, 0))
    WHERE id = :id AND state IN ('pending', 'active')
    RETURNING id, type, state
),
{statement:workflow_release}
{statement:workflow_outcome};

-- name: stats
-- Per type: live jobs by state (pending split into due and scheduled; a workflow's job waiting
-- for its parents, due_at NULL, is neither), and how long the oldest due job has been due. One
-- pass over the live rows.
SELECT type,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= {now} THEN 1 ELSE 0 END)
        AS due,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at > {now} THEN 1 ELSE 0 END)
        AS scheduled,
    sum(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS active,
    sum(CASE WHEN state = 'completed' THEN 1 ELSE 0 END) AS completed,
    sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    {now} - min(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= {now}
        THEN run_at END)
        AS oldest_due_age_ms
FROM {table}
WHERE expires_at IS NULL OR expires_at > {now}
GROUP BY type;

-- name: queue_stats
-- stats per named queue instead of per type: live jobs by state (a workflow's job waiting for its
-- parents is neither due nor scheduled), the oldest due job's age.
SELECT queue,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= {now} THEN 1 ELSE 0 END)
        AS due,
    sum(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at > {now} THEN 1 ELSE 0 END)
        AS scheduled,
    sum(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS active,
    sum(CASE WHEN state = 'completed' THEN 1 ELSE 0 END) AS completed,
    sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS failed,
    sum(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    {now} - min(CASE WHEN state = 'pending' AND due_at IS NOT NULL AND run_at <= {now}
        THEN run_at END)
        AS oldest_due_age_ms
FROM {table}
WHERE expires_at IS NULL OR expires_at > {now}
GROUP BY queue;

-- name: requeue_job
-- An operator's retry: a live failed or cancelled job becomes pending, due now, with exactly
-- one more attempt; id, key, payload and errors stay.
UPDATE {table} SET
    state = 'pending', max_attempts = attempts + 1, run_at = {now}, due_at = {now},
    lease_token = NULL, finished_at = NULL, expires_at = NULL
WHERE id = :id AND state IN ('failed', 'cancelled') AND expires_at > {now}
RETURNING type;

-- name: requeue_failed
-- requeue_job for every live failed job (of :type); each row moves on its own.
UPDATE {table} SET
    state = 'pending', max_attempts = attempts + 1, run_at = {now}, due_at = {now},
    lease_token = NULL, finished_at = NULL, expires_at = NULL
WHERE state = 'failed' AND expires_at > {now}
    AND (CAST(:type AS text) IS NULL OR type = CAST(:type AS text))
RETURNING type;

-- name: never_analysed
-- Whether the job table has never been analysed (by ANALYZE or autovacuum): until it is, the
-- planner estimates one row for the claim's queue = $1 AND due_at <= now, and sorts every due
-- job instead of reading the claim index in order. :relation is the quoted table name.
SELECT last_analyze IS NULL AND last_autoanalyze IS NULL AS never
FROM pg_stat_user_tables WHERE relid = to_regclass(CAST(:relation AS text));

-- name: analyse
ANALYZE {table};
