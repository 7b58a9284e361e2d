"""SQLAlchemyJobStore: the durable job driver, on one SQLite file or one PostgreSQL database.

Clock. Due-ness, lease expiry and retention are judged by one clock, the store's: on
PostgreSQL the database's ``now()`` (computed in the statement, never the worker's clock); on
SQLite, a local file on one host, the host's wall clock, read in Python and bound to the
statement. A ``clock`` given to the store replaces both (tests move time with a ManualClock);
the statements are the same, with ``:now`` bound.

Transitions. Enqueue (with key dedupe), claim (with reclaim or terminal failure of expired
leases), heartbeat, complete, retry and fail are one statement each, so one round trip and one
transaction: see ``_database/sql/`` for the statements and ``_database.connections`` for how they
are run.
Under load, calls that arrive together share a commit: SQLite runs them in one transaction
(``_database.connections``), and ``complete_many`` (the runner's coalesced completes) is one
statement on either database; each caller still gets its own outcome, once durable.

Engine. ``SQLAlchemyJobStore(url=...)`` makes an engine with ``orm_sqlalchemy.engine`` and
disposes it on close; ``engine=`` borrows one, which stays open (a SQLite engine is given the
same set-up by ``configure_sqlite``).

Schema. The table is created on first use (under an advisory lock on PostgreSQL and a write
transaction on SQLite, so processes starting together do not race), or by ``create_schema()``;
with ``create_tables=False`` it is only checked, and nothing is created (a missing SQLite file is
an error naming it). ``store.metadata`` holds it for Alembic.

Retention. A finished job is kept until ``max(finished_at + retain_*_ms, keep_until)``; while
kept, its key drops repeats; after, it reads as gone and a new job may take its key. Expired
rows are deleted in passing (at most every ``prune_interval_ms``, a bounded batch) or by
``prune()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Collection, Sequence
from types import TracebackType
from typing import Any, Self, cast

from loguru import logger
from sqlalchemy import MetaData, Table
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.errors import DriverError
from jobs.spi import (
    MAX_ERRORS_KEPT,
    AuditPage,
    ClaimedJob,
    ClaimedJobs,
    ClaimLimits,
    JobInfo,
    JobPage,
    JobRequest,
    JobState,
    JobStateCounts,
    JobTypeStats,
    OutcomeCount,
    QueueStats,
    WorkerInfo,
    WorkerRegistration,
    WorkflowJob,
    stalled_error,
)
from jobs.spi.support import (
    DEFAULT_QUEUE,
    Clock,
    ManualClock,
    Retention,
    check_request,
    check_workflow_jobs,
    redact_url,
    stalled_error_parts,
)

from ._database.connections import Backend, PostgresBackend, Row
from ._database.errors import check_engine, store_error
from ._database.in_transaction import InTransactionCompletion
from ._database.limits import LimitedRun, limited_claim_steps, lock_script
from ._database.listener import listen_engine
from ._database.next_due import NextDue
from ._database.sqlite_writes import Script, SQLiteBackend, sqlite_commits
from ._database.statements import load_statements
from ._database.wakeup import PostgresWakeups, Waiters
from ._database.workflows import (
    Steps,
    cancelled_error_parts,
    is_workflow_token,
    release_steps,
    workflow_params,
)
from ._sqlite_files import require_database
from .engine import configure_sqlite, create_engine
from .rows import (
    batch_params,
    claimed_job,
    first_of_each_key,
    job_info,
    malformed,
    state_counts,
)
from .store_operations import SQLOperations
from .tables import DEFAULT_TABLE_PREFIX, job_schema, set_up_job_table

__all__ = ["PRUNE_BATCH", "SQLAlchemyJobStore"]

STALLED_HEAD, STALLED_MIDDLE, STALLED_TAIL = stalled_error_parts()
CANCELLED_HEAD, CANCELLED_MIDDLE, CANCELLED_STATE, CANCELLED_TAIL = cancelled_error_parts()

PRUNE_BATCH = 1_000
"""At most this many expired rows are deleted by one ``prune()``."""


class SQLAlchemyJobStore:
    """The JobDriver on SQLAlchemy: SQLite (aiosqlite) or PostgreSQL (asyncpg).

    ``url`` or ``engine`` (exactly one): a URL makes an engine the store owns; an engine is
    borrowed. ``table_prefix`` names the table (``<prefix>queue``) and ``schema`` its
    PostgreSQL schema. ``clock`` replaces the store's clock (tests). ``retain_*_ms`` keep
    finished jobs (defaults: jobs.settings). ``create_tables=False`` only checks the table
    (for schemas under migrations). ``pool_size`` caps how many of the engine's pooled
    PostgreSQL connections the store uses at once (it holds one more, to LISTEN).
    ``listen_url`` gives LISTEN a direct connection when ``url``/``engine`` go through a
    pooler in transaction mode (PgBouncer), where LISTEN cannot work (see the docs,
    "Run behind PgBouncer"); without it the store finds that out, says so once and polls.
    ``prune_interval_ms`` spaces the in-passing deletion of expired rows (None: only
    ``prune()``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: AsyncEngine | None = None,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        schema: str | None = None,
        clock: Clock | None = None,
        retain_completed_ms: int | None = None,
        retain_failed_ms: int | None = None,
        create_tables: bool = True,
        pool_size: int = 10,
        prune_interval_ms: int | None = 60_000,
        listen_url: str | None = None,
    ) -> None:
        if (url is None) == (engine is None):
            raise ValueError("SQLAlchemyJobStore takes a url or an engine (exactly one)")
        self._retention = Retention.of(retain_completed_ms, retain_failed_ms)
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self._schema = job_schema(table_prefix, schema=schema)
        self._owns_engine = engine is None
        self._engine = engine if engine is not None else create_engine(cast(str, url))
        dialect = self._engine.dialect
        check_engine(self._engine)
        configure_sqlite(self._engine)
        self._postgres = dialect.name == "postgresql"
        url_text = redact_url(self._engine.url)
        self._name = f"SQLAlchemyJobStore({url_text}, table {self._schema.qualified_name})"
        quoted = dialect.identifier_preparer.format_table
        edges = quoted(self._schema.edges)
        self._quoted_jobs = quoted(self._schema.jobs)
        self._quoted_limits = quoted(self._schema.limit_claims)
        self._statistics_checked = dialect.name != "postgresql"
        self._in_transaction = InTransactionCompletion(
            self._engine, quoted(self._schema.jobs), edges
        )
        self._sql = (
            load_statements(
                dialect.name, quoted(self._schema.jobs), edges=edges, limits=self._quoted_limits
            )
            | load_statements(dialect.name, quoted(self._schema.workers), resource="workers")
            | load_statements(dialect.name, quoted(self._schema.audit), resource="audit")
            | load_statements(dialect.name, quoted(self._schema.counters), resource="counters")
            | load_statements(dialect.name, quoted(self._schema.paused), resource="queues")
        )
        self._backend: Backend
        self._wakeups: PostgresWakeups | None = None
        self._listen_engine = listen_engine(
            listen_url, postgres=self._postgres, store="SQLAlchemyJobStore"
        )
        if self._postgres:
            backend = PostgresBackend(self._engine, size=pool_size, name=self._name)
            self._wakeups = PostgresWakeups(
                backend,
                listen_engine=self._listen_engine,
                channel=self._schema.notify_channel,
                name=self._name,
                on_wake=self._wake,
            )
            self._backend = backend
            self._sqlite: SQLiteBackend | None = None
        else:
            self._backend = self._sqlite = SQLiteBackend(self._engine, name=self._name)
        self._release_params = self._in_transaction.release_params = {
            "max_errors": MAX_ERRORS_KEPT,
            "retain_cancelled_ms": self._retention.of_state("cancelled"),
            **(
                {
                    "cancelled_head": CANCELLED_HEAD,
                    "cancelled_middle": CANCELLED_MIDDLE,
                    "cancelled_state": CANCELLED_STATE,
                    "cancelled_tail": CANCELLED_TAIL,
                }
                if self._postgres
                else {}
            ),
        }
        self._commits = None if self._postgres else sqlite_commits(self._engine)
        self._lease_constants = {  # the claim's parameters for the lease it gives, but lease_ms
            "stalled_head": STALLED_HEAD,
            "stalled_middle": STALLED_MIDDLE,
            "stalled_tail": STALLED_TAIL,
            "max_errors": MAX_ERRORS_KEPT,
            "retain_failed_ms": self._retention.failed_ms,
        }
        self._clock = clock
        self._create_tables = create_tables
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()
        self._prune_interval_s = None if prune_interval_ms is None else prune_interval_ms / 1000
        self._next_prune = 0.0
        self._waiters = Waiters()
        self._next_due = NextDue(self._waiters)
        self._unsubscribe = clock.subscribe(self._wake) if isinstance(clock, ManualClock) else None
        self._closed = False
        self._operations = SQLOperations(
            fetch=self._fetch,
            fetch_unsorted=self._fetch_unsorted,
            announce=self._announce,
            settle=self._settle,
            postgres=self._postgres,
            retention=self._retention,
        )

    def __repr__(self) -> str:
        return self._name

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def metadata(self) -> MetaData:
        """The MetaData holding the job table, for Alembic (``target_metadata``)."""
        return self._schema.metadata

    @property
    def table(self) -> Table:
        return self._schema.jobs

    @property
    def clock(self) -> Clock | None:
        """The clock given in place of the store's (``ClockedDriver``), or None."""
        return self._clock

    # -- producer ------------------------------------------------------------------------------

    async def enqueue(self, job: JobRequest) -> str | None:
        """Store ``job``; its id, or None when a live job holds its key. A job without a key
        is a plain INSERT (``enqueue_unkeyed``): stored unless the statement raises.
        JobOptionError, before any I/O, for a number out of its range (``check_request``: on
        SQLite a NaN would be stored as NULL)."""
        check_request(job)
        keyed = job.key is not None
        rows = await self._fetch(
            "enqueue" if keyed else "enqueue_unkeyed",
            id=job.id,
            type=job.type,
            payload=job.payload,
            max_attempts=job.max_attempts,
            run_at=job.run_at_ms,
            delay_ms=job.delay_ms,
            timeout_ms=job.timeout_ms,
            key=job.key,
            trace_context=job.trace_context,
            keep_until=job.keep_until_ms,
            max_stalls=job.max_stalls,
            priority=job.priority,
            queue=job.queue,
        )
        stored = bool(rows) or not keyed
        if not self._statistics_checked:
            await self._analyse_if_never()
        if stored:
            self._announce(job.type)
        if self._prune_due():
            await self._prune_in_passing()
        return job.id if stored else None

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        """The batch in one statement (one round trip, one commit); results in order, None
        where the key was taken by a live job or by an earlier job of the batch."""
        if not jobs:
            self._check_open()
            return []
        for job in jobs:
            check_request(job)
        batch = first_of_each_key(jobs)
        rows = await self._fetch("enqueue_many", **batch_params(batch, postgres=self._postgres))
        stored = {row["id"] for row in rows}
        if not self._statistics_checked:
            await self._analyse_if_never()
        for job_type in {row["type"] for row in rows}:
            self._announce(job_type)
        if self._prune_due():
            await self._prune_in_passing()
        return [job.id if job.id in stored else None for job in jobs]

    # -- workflows (jobs.spi.WorkflowStore; see _database.workflows) --------------------------

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
        """Every job and edge of the workflow in one transaction (PostgreSQL: one statement)."""
        check_workflow_jobs(jobs)
        if not jobs:
            self._check_open()
            return
        params = workflow_params(workflow_id, jobs, postgres=self._postgres)
        if self._sqlite is None:
            await self._fetch("enqueue_workflow", **params)
        else:
            sql = self._sql

            def steps() -> Steps:
                yield sql["enqueue_workflow"], params
                yield sql["enqueue_workflow_edges"], params
                return []

            await self._fetch_script(Script("enqueue_workflow", steps), params)
        for job_type in {job.request.type for job in jobs if not job.depends_on}:
            self._announce(job_type)

    async def workflow_jobs(self, workflow_id: str) -> list[JobInfo]:
        rows = await self._fetch("workflow_jobs", workflow_id=workflow_id)
        return [job_info(row) for row in rows]

    async def _settle(self, statement: str, **params: Any) -> list[Row]:
        """Run ``statement``, one that settles jobs (finish_workflow, cancel_job, delete_job,
        purge_jobs), with their dependents settled in its transaction (``workflow_release``);
        the rows it settled (id, type). The dependents it made due are announced."""
        if self._sqlite is None:
            rows = await self._fetch(statement, **{**self._release_params, **params})
        else:
            sql, release = self._sql, self._release_params

            def steps() -> Steps:
                settled = yield sql[statement], params
                ended = [row for row in settled if row["workflow_id"] is not None]
                due = yield from release_steps(sql, ended, {**release, "now": params["now"]})
                return [
                    *({"id": row["id"], "type": row["type"], "released": False} for row in settled),
                    *({"id": row["id"], "type": row["type"], "released": True} for row in due),
                ]

            rows = await self._fetch_script(Script(statement, steps), params)
        for job_type in {row["type"] for row in rows if row["released"]}:
            self._announce(job_type)
        return [row for row in rows if not row["released"]]

    async def _settle_parents(self, ids: list[str] | None) -> None:
        """Settle the dependents of finished parents whose edges are left: ``ids`` (a claim
        that failed workflow jobs whose leases expired too often), or any (the sweep)."""
        if self._sqlite is None:
            params = {**self._release_params, "ids": ids, "batch": PRUNE_BATCH}
            rows = await self._fetch("settle_workflow_parents", **params)
            for job_type in {row["type"] for row in rows if row["released"]}:
                self._announce(job_type)
            return
        sql, release = self._sql, self._release_params

        def steps() -> Steps:
            params = {"ids": None if ids is None else json.dumps(ids), "batch": PRUNE_BATCH}
            settled = yield sql["workflow_parents"], params
            due = yield from release_steps(sql, settled, {**release, "now": self._now()})
            return due

        for job_type in {
            row["type"]
            for row in await self._fetch_script(Script("settle_workflow_parents", steps), {})
        }:
            self._announce(job_type)

    # -- consumer ------------------------------------------------------------------------------

    async def claim(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str = DEFAULT_QUEUE,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs (``jobs.spi.JobStore.claim``): one statement; with
        ``limits`` that apply to it, the limited claim (``_claim_limited``), a ``ClaimedJobs``."""
        if limits is not None:
            if limit > 0 and types and limits.applies(types):
                return await self._claim_limited(limit, lease_ms, types, queue, limits)
            return ClaimedJobs(await self.claim(limit, lease_ms, types, queue))
        if limit <= 0 or not types:
            self._check_open()
            return []
        watch = self._watch_claim(types, queue)
        try:
            rows = await self._fetch(
                "claim" if watch is None else "claim_next_due",
                types=self._types(types),
                queue=queue,
                limit=limit,
                lease_ms=lease_ms,
                **self._lease_constants,
            )
        except BaseException:
            if watch is not None:
                self._next_due.drop(watch)
            raise
        leased, stalled_parents, taken = _sort_claimed(rows)
        self._next_due.claimed(types, took_all=taken >= limit, queue=queue)
        if watch is not None:
            if rows and taken < limit:
                due_in: int | None = rows[0]["due_in"]
                if leased:  # those leases end then, and the answer left them out
                    due_in = lease_ms if due_in is None else min(due_in, lease_ms)
                self._next_due.keep(types, watch, due_in, queue)
            else:
                self._next_due.drop(watch)
        return await self._claimed(leased, stalled_parents)

    async def _claimed(self, leased: list[Row], stalled_parents: list[Row]) -> list[ClaimedJob]:
        """After a claim: fail the workflow jobs it leased for their stalls and the rows no
        worker can run, prune in passing; the jobs to run, in claim order."""
        for row in stalled_parents:
            await self._fail_stalled_workflow_job(row)
        if self._prune_due():
            await self._prune_in_passing()
        broken = [(row, why) for row in leased if (why := malformed(row)) is not None]
        if broken:
            leased = await self._fail_malformed(leased, broken)
        leased.sort(key=_claim_order)
        return [claimed_job(row) for row in leased]

    async def _claim_limited(
        self, limit: int, lease_ms: int, types: Collection[str], queue: str, limits: ClaimLimits
    ) -> ClaimedJobs:
        """The claim under fleet-wide limits (``_database.limits``): count, plan, choose, lease
        and record in one transaction (PostgreSQL: under an advisory lock per key; SQLite: one
        write transaction). What a full limit held back is on the result. The next-due answer
        of the plain claim (``claim_next_due``) is not given: the wait after it asks."""
        lease = {"lease_ms": lease_ms, **self._lease_constants}
        run = LimitedRun(limit, types, queue, limits, lease)
        if self._sqlite is None:
            rows = await self._claim_limited_postgres(run)
        else:
            rows = await self._claim_limited_sqlite(run)
        leased, stalled_parents, _ = _sort_claimed(rows)
        assert run.plan is not None
        return run.plan.result(await self._claimed(leased, stalled_parents))

    async def _claim_limited_postgres(self, run: LimitedRun) -> list[Row]:
        """The limited claim's transaction on PostgreSQL, opened with the keys' locks."""
        if self._closed or not self._schema_ready:
            await self._ready({})
        assert isinstance(self._backend, PostgresBackend)
        sql, now = self._sql, self._now()
        keys = [key for key, _ in run.limits.keys(run.types, run.queue)]

        def steps() -> Steps:
            return limited_claim_steps(sql, run, now, postgres=True)

        return await self._backend.fetch_script(lock_script(self._quoted_limits, keys), steps)

    async def _claim_limited_sqlite(self, run: LimitedRun) -> list[Row]:
        """The limited claim's write transaction on SQLite (a script). Its clock is read when
        the steps start, inside the write transaction, not when the claim was asked for: a
        claim that waited for its write turn counts and records its claims at the time they
        are made, so a rate window holds in real time, not only in recorded time."""
        sql, clock = self._sql, self._now
        params: dict[str, Any] = {}

        def steps() -> Steps:
            return limited_claim_steps(sql, run, clock(), postgres=False)

        return await self._fetch_script(Script("claim_limited", steps), params)

    async def _fail_stalled_workflow_job(self, row: Row) -> None:
        """Fail a workflow job whose lease expired more often than its max_stalls: the claim
        leased it (rather than failing it in place, as a plain job) so that ``finish`` fails it
        and settles its dependents in one statement or transaction. A crash before this leaves
        it leased: the lease expires, and the next claim hands it here again."""
        _log_stall_failure(row)
        error = stalled_error(row["stalls"], row["max_stalls"])
        try:
            await self._finish(row["id"], row["lease_token"], "failed", error)
        except DriverError as exc:
            logger.warning(
                "{} could not fail workflow job {} yet (its lease expires, and a later claim "
                "fails it): {}",
                self._name,
                row["id"],
                exc,
            )

    async def _analyse_if_never(self) -> None:
        """PostgreSQL, once per store, after its first enqueue: ANALYZE the job table if it
        was never analysed. Without statistics the planner estimates one row for the claim's
        ``queue = $1 AND due_at <= now`` and sorts every due job (27 ms among 100,000, filled
        and claimed at once) rather than read the claim index in order (0.6 ms), until
        autovacuum analyses the table. A failure (not the table's owner ...) is only logged."""
        self._statistics_checked = True
        try:
            rows = await self._fetch("never_analysed", relation=self._quoted_jobs)
            if rows and rows[0]["never"]:
                await self._fetch("analyse")
        except DriverError as exc:
            logger.debug("could not analyse the job table {}: {}", self._name, exc)

    async def _fail_malformed(
        self, leased: list[Row], broken: list[tuple[Row, str]]
    ) -> list[Row]:
        """Fail each claimed row a worker cannot run, alone (its batch-mates are returned):
        'malformed job record: ...' naming the field. The rest of ``leased``."""
        for row, why in broken:
            error = f"malformed job record: job {row['id']} ({row['type']!s}): {why}"
            logger.error("{}; failed, the other jobs of the claim go on", error)
            await self._finish(row["id"], row["lease_token"], "failed", error)
        bad = {row["id"] for row, _ in broken}
        return [row for row in leased if row["id"] not in bad]

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        rows = await self._fetch("heartbeat", id=job_id, lease_token=lease_token, lease_ms=lease_ms)
        return bool(rows)

    def _finish_params(
        self,
        job_id: str,
        lease_token: str,
        state: str,
        error: str | None,
        result: str | None = None,
    ) -> dict[str, Any]:
        """The ``finish`` statement's parameters but ``now`` (``complete``, ``fail`` and an
        inbox's ``complete_in``)."""
        return {
            "id": job_id,
            "lease_token": lease_token,
            "state": state,
            "error": error,
            "result": result,
            "retain_ms": self._retention.of_state(state),
            "max_errors": MAX_ERRORS_KEPT,
        }

    async def set_progress(self, job_id: str, lease_token: str, progress: str) -> bool:
        rows = await self._fetch(
            "set_progress", id=job_id, lease_token=lease_token, progress=progress
        )
        return bool(rows)

    async def complete(self, job_id: str, lease_token: str, result: str | None = None) -> bool:
        return await self._finish(job_id, lease_token, "completed", None, result)

    def completes_in(self, bind: Any) -> bool:
        """``jobs.spi.CompletesInTransaction``: whether ``bind`` (a SQLAlchemy Engine or
        Connection) is on this store's database (certainly: else the runner settles)."""
        return self._in_transaction.reaches(bind)

    async def complete_in(
        self, connection: Any, job_id: str, lease_token: str, result: str | None = None
    ) -> bool:
        """``complete`` through ``connection`` (an AsyncConnection in the app's transaction,
        on this store's database): commits or rolls back with it (an inbox's)."""
        return await self._in_transaction.complete(
            connection, self._in_transaction_params(job_id, lease_token, result)
        )

    def complete_in_sync(
        self, connection: Any, job_id: str, lease_token: str, result: str | None = None
    ) -> bool:
        """``complete_in`` through a sync ``Connection`` of the app's (a ``def`` handler's
        thread, with an inbox): commits or rolls back with the app's transaction."""
        return self._in_transaction.complete_sync(
            connection, self._in_transaction_params(job_id, lease_token, result)
        )

    def _in_transaction_params(
        self, job_id: str, lease_token: str, result: str | None
    ) -> dict[str, Any]:
        self._check_open()
        params = self._finish_params(job_id, lease_token, "completed", None, result)
        params["now"] = self._now()
        return params

    async def complete_many(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None = None
    ) -> list[bool]:
        """The batch in one statement, so one round trip and one commit on either database;
        the results in that same statement."""
        if not jobs:
            self._check_open()
            return []
        if any(is_workflow_token(token) for _, token in jobs):
            return await self._complete_workflow_jobs(jobs, results)
        params = self._completions(jobs, results)
        rows = await self._fetch("complete_many", retain_ms=self._retention.completed_ms, **params)
        completed = {row["id"] for row in rows}
        return [job_id in completed for job_id, _ in jobs]

    async def _complete_workflow_jobs(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None
    ) -> list[bool]:
        """``complete_many`` of a batch holding workflow jobs: the plain ones in one statement,
        the workflow jobs with their dependents (PostgreSQL: ``complete_many_workflow``, one
        statement; SQLite: each its ``finish_workflow`` script, sharing the group's commit)."""
        outcomes = [None if results is None else results[index] for index in range(len(jobs))]
        plain = [index for index, (_, token) in enumerate(jobs) if not is_workflow_token(token)]
        flows = [index for index, (_, token) in enumerate(jobs) if is_workflow_token(token)]
        done = [False] * len(jobs)
        if plain:
            plain_done = await self.complete_many(
                [jobs[index] for index in plain], [outcomes[index] for index in plain]
            )
            for index, plain_completed in zip(plain, plain_done, strict=True):
                done[index] = plain_completed
        if self._sqlite is None:
            params = self._completions(
                [jobs[index] for index in flows], [outcomes[index] for index in flows]
            )
            rows = await self._settle(
                "complete_many_workflow", retain_ms=self._retention.completed_ms, **params
            )
            settled = {row["id"] for row in rows}
            for index in flows:
                done[index] = jobs[index][0] in settled
            return done
        for index in flows:
            job_id, token = jobs[index]
            done[index] = await self._finish(job_id, token, "completed", None, outcomes[index])
        return done

    async def retry(
        self,
        job_id: str,
        lease_token: str,
        *,
        delay_ms: int,
        error: str,
        count_attempt: bool = True,
    ) -> bool:
        rows = await self._fetch(
            "retry",
            id=job_id,
            lease_token=lease_token,
            delay_ms=delay_ms,
            error=error,
            max_errors=MAX_ERRORS_KEPT,
            uncount=0 if count_attempt else 1,
        )
        if rows:
            self._announce(rows[0]["type"])
        return bool(rows)

    async def release(self, job_id: str, lease_token: str) -> bool:
        rows = await self._fetch("release", id=job_id, lease_token=lease_token)
        if rows:
            self._announce(rows[0]["type"])
        return bool(rows)

    async def release_many(self, jobs: Sequence[tuple[str, str]]) -> list[bool]:
        """The batch in one statement (a closing runner's jobs)."""
        if not jobs:
            self._check_open()
            return []
        rows = await self._fetch("release_many", **self._pairs(jobs))
        for job_type in {row["type"] for row in rows}:
            self._announce(job_type)
        released = {row["id"] for row in rows}
        return [job_id in released for job_id, _ in jobs]

    async def fail(self, job_id: str, lease_token: str, *, error: str) -> bool:
        return await self._finish(job_id, lease_token, "failed", error)

    # -- inspection ----------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobInfo | None:
        rows = await self._fetch("get_job", id=job_id)
        return job_info(rows[0]) if rows else None

    async def counts(self) -> JobStateCounts:
        return state_counts(await self._fetch("counts"))

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = (DEFAULT_QUEUE,)
    ) -> None:
        """Wait for a wake-up, the next due job of ``types`` or ``timeout_ms``, whichever first.

        Wakes on enqueues and retries through this store and, on PostgreSQL, through any
        store on the same table (LISTEN/NOTIFY), on SQLite on a commit to the file by any
        other connection (``_database.sqlite_writes.commits``), and when an injected ManualClock
        moves. On PostgreSQL, after a claim of the same types that took fewer jobs than asked,
        the next due time is the one that claim answered (``_database.next_due``), with no
        statement.
        """
        self._check_open()
        queues = list(queues)
        single = queues[0] if len(queues) == 1 else None
        kept = self._next_due.take(types, single) if types and single is not None else None
        event = kept.watch if kept is not None else self._waiters.register(types)
        try:
            reopened = self._wakeups is not None and await self._listen(self._wakeups)
            if event.is_set():
                return
            wait_s = timeout_ms / 1000
            if kept is not None and not reopened:
                wait_s = kept.due_in_s(wait_s)
            elif types:
                rows = await self._fetch(
                    "next_due", types=self._types(types), queues=self._types(queues)
                )
                due_in = rows[0]["due_in"] if rows else None
                if due_in is not None:
                    wait_s = min(wait_s, due_in / 1000)
            if wait_s <= 0:
                return
            if self._commits is not None:
                await self._commits.wait(event, wait_s)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), wait_s)
        finally:
            self._waiters.unregister(event)

    # -- schema and upkeep ---------------------------------------------------------------------

    async def create_schema(self) -> None:
        """Create the job table and its indexes unless they exist; then check its columns."""
        await self._set_up_schema(create=True)

    async def check_schema(self) -> None:
        """StoreSchemaError unless the job table exists with every column this version uses."""
        await self._set_up_schema(create=False)

    async def prune(self) -> int:
        """Delete up to PRUNE_BATCH finished jobs past their retention; how many went. Also
        settles the dependents of workflow jobs a crash left unsettled (``_settle_parents``)."""
        pruned = len(await self._fetch("prune", batch=PRUNE_BATCH))
        await self._settle_parents(None)
        return pruned

    async def close(self) -> None:
        """Close the store's connections, and its engine if it made it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._next_due.clear()
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._waiters.wake()
        if self._wakeups is not None:
            await self._wakeups.close()
        await self._backend.close()
        if self._commits is not None:
            await self._commits.close()
        if self._listen_engine is not None:
            await self._listen_engine.dispose()
        if self._owns_engine:
            await self._engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- operations: SQLOperations (each checks its arguments, then runs its statement) ------

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        return await self._operations.list_jobs(
            state=state, job_type=job_type, limit=limit, cursor=cursor, queue=queue
        )

    async def find_job(self, key: str) -> JobInfo | None:
        return await self._operations.find_job(key)

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        return await self._operations.purge(states, job_type, older_than_ms)

    async def requeue(self, job_id: str) -> bool:
        return await self._operations.requeue(job_id)

    async def requeue_failed(self, job_type: str | None = None) -> int:
        return await self._operations.requeue_failed(job_type)

    async def cancel(self, job_id: str) -> bool:
        return await self._operations.cancel(job_id)

    async def queue_stats(self) -> dict[str, QueueStats]:
        return await self._operations.queue_stats()

    async def stats(self) -> dict[str, JobTypeStats]:
        return await self._operations.stats()

    async def delete(self, job_id: str) -> bool:
        return await self._operations.delete(job_id)

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        await self._operations.register_worker(worker, ttl_ms)

    async def deregister_worker(self, worker_id: str) -> None:
        await self._operations.deregister_worker(worker_id)

    async def list_workers(self) -> list[WorkerInfo]:
        return await self._operations.list_workers()

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        await self._operations.add_counts(counts)

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        return await self._operations.read_counts(since_ms, job_type)

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        await self._operations.record_action(
            action=action, target=target, actor=actor, source=source, count=count
        )

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        return await self._operations.list_actions(limit=limit, cursor=cursor)

    # -- paused queues (jobs.spi.QueuePauses) ------------------------------------------------

    async def pause_queue(self, queue: str) -> bool:
        return bool(await self._fetch("pause_queue", queue=queue))

    async def resume_queue(self, queue: str) -> bool:
        return bool(await self._fetch("resume_queue", queue=queue))

    async def paused_queues(self) -> set[str]:
        return {str(row["queue"]) for row in await self._fetch("paused_queues")}

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DriverError(f"{self._name} is closed")

    def _now(self) -> int | None:
        """The bound ``:now``: the injected clock, else SQLite's host clock; None on PG."""
        if self._clock is not None:
            return self._clock.now_ms()
        return None if self._postgres else time.time_ns() // 1_000_000

    def _pairs(self, jobs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """``(job_id, lease_token)`` pairs as a batch statement's parameters."""
        if self._postgres:
            return {
                "ids": [job_id for job_id, _ in jobs],
                "lease_tokens": [token for _, token in jobs],
            }
        return {"jobs": json.dumps(jobs)}

    def _completions(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None
    ) -> dict[str, Any]:
        """``complete_many``'s parameters: the pairs, and each job's result by position."""
        if self._postgres:
            params = self._pairs(jobs)
            params["results"] = [None] * len(jobs) if results is None else list(results)
            return params
        if results is None:
            return {"jobs": json.dumps(jobs), "with_results": 0}
        triples = [(*pair, result) for pair, result in zip(jobs, results, strict=True)]
        return {"jobs": json.dumps(triples), "with_results": 1}

    def _types(self, types: Collection[str]) -> Any:
        return list(types) if self._postgres else json.dumps(list(types))

    async def _fetch(self, statement: str, **params: Any) -> list[Row]:
        if self._closed or not self._schema_ready:
            await self._ready(params)
        params["now"] = self._now()
        return await self._backend.fetch(self._sql[statement], params)

    async def _fetch_script(self, script: Script, params: dict[str, Any]) -> list[Row]:
        """Run ``script`` (SQLite: statements in one transaction); ``params`` gets ``now``."""
        if self._closed or not self._schema_ready:
            await self._ready(params)
        params["now"] = self._now()
        assert self._sqlite is not None
        return await self._sqlite.fetch(script, params)

    async def _fetch_unsorted(self, statement: str, **params: Any) -> list[Row]:
        """``_fetch`` of a listing page: its ORDER BY is read off an index, never sorted."""
        await self._ready(params)
        return await self._backend.fetch_unsorted(self._sql[statement], params)

    async def _ready(self, params: dict[str, Any]) -> None:
        self._check_open()
        if not self._schema_ready:
            await self._prepare_schema()
        params["now"] = self._now()

    def _watch_claim(self, types: Collection[str], queue: str) -> asyncio.Event | None:
        """What wakes the wait after a claim of ``types`` (``_database.next_due``); None (the
        plain claim) while a NOTIFY could go unheard (LISTEN not up yet, or impossible behind
        a pooler), and on SQLite. There the wait's next_due joins the settle's group commit
        (``SQLiteBackend``): folding it into the claim measured no faster (p50 1.42-1.50 ms
        against 1.26-1.47, CPU per job 1.61-1.81 ms against 1.65-1.87)."""
        if self._wakeups is None or not self._wakeups.listening:
            return None
        return self._next_due.watch(types, queue)

    def _wake(self, job_type: str | None = None) -> None:
        self._waiters.wake(job_type)

    def _announce(self, job_type: str) -> None:
        """Wake this store's waiters for ``job_type`` now, and other stores' by NOTIFY."""
        self._waiters.wake(job_type)
        if self._wakeups is not None and not self._closed:
            self._wakeups.announce(job_type)

    async def _finish(
        self,
        job_id: str,
        lease_token: str,
        state: str,
        error: str | None,
        result: str | None = None,
    ) -> bool:
        params = self._finish_params(job_id, lease_token, state, error, result)
        if is_workflow_token(lease_token):
            return bool(await self._settle("finish_workflow", **params))
        rows = await self._fetch("finish", **params)
        return bool(rows)

    async def _prepare_schema(self) -> None:
        async with self._schema_lock:
            if not self._schema_ready:
                await self._set_up_schema(create=self._create_tables)

    async def _set_up_schema(self, *, create: bool) -> None:
        self._check_open()
        if not create and not self._postgres:
            require_database(self._engine.url)  # connecting would create the file
        try:
            await set_up_job_table(self._engine, self._schema, create=create)
        except DriverError:
            raise
        except Exception as exc:
            raise store_error(exc, self._name) from exc
        self._schema_ready = True

    async def _listen(self, wakeups: PostgresWakeups) -> bool:
        """``wakeups.listen()``: True when a notification may have been missed."""
        try:
            return await wakeups.listen()
        except Exception as exc:
            raise store_error(exc, self._name) from exc

    def _prune_due(self) -> bool:
        """Whether ``_prune_in_passing`` has work: checked inline, no coroutine per call."""
        return self._prune_interval_s is not None and time.monotonic() >= self._next_prune

    async def _prune_in_passing(self) -> None:
        if self._prune_interval_s is None:
            return
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._prune_interval_s
        try:
            if await self.prune() >= PRUNE_BATCH:
                self._next_prune = now  # more to delete: again on the next call
        except DriverError as exc:
            logger.warning("{} could not prune expired jobs: {}", self._name, exc)


def _claim_order(row: Row) -> tuple[int, int]:
    """The order a claim hands its jobs out in: the highest priority, then the earliest due
    (the statement's RETURNING order is the update's, not its ORDER BY)."""
    priority = row["priority"]
    return -(priority if type(priority) is int else 0), cast(int, row["run_at"])


def _sort_claimed(rows: list[Row]) -> tuple[list[Row], list[Row], int]:
    """A claim's rows: those leased to run, the workflow jobs leased to be failed for their
    stalls, and how many jobs it took (failed in place included)."""
    leased: list[Row] = []
    stalled: list[Row] = []
    taken = 0
    for row in rows:
        if row["id"] is None:  # claim_next_due's row for its answer when it took none
            continue
        taken += 1
        if row["state"] != "active":
            _log_stall_failure(row)
        elif row["workflow_id"] is not None and row["stalls"] > row["max_stalls"]:
            stalled.append(row)
        else:
            leased.append(row)
    return leased, stalled, taken


def _log_stall_failure(row: Row) -> None:
    logger.warning(
        "job {} ({}) failed: its lease expired without a settle {} time(s), more than its "
        "max_stalls",
        row["id"],
        row["type"],
        row["stalls"],
    )
