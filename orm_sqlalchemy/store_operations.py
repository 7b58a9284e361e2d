"""The operations SPI on the SQL job store, so far list_jobs, find_job, requeue, cancel, purge,
delete and stats (each one statement, so one atomic step per job), and the worker registry (a
``<prefix>workers`` table beside the job table, stamped by the store's clock).

``SQLAlchemyJobStore`` holds one ``SQLOperations`` and hands each operation to it. The object is
given what it uses and nothing of the store's: a way to run the store's statements
(``sql/jobs_*.sql``; the store's ``fetch`` checks it is open, makes the schema and binds ``:now``
from its clock), the wake-up for jobs an operation makes due (``announce``), which database it
is on and the retention. Arguments are checked (``jobs.spi.support``) before any I/O.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from jobs.spi import (
    AUDIT_KEEP_MS,
    AUDIT_MAX_ENTRIES,
    COUNTERS_KEEP_MS,
    DURATION_BOUNDS_MS,
    AuditEntry,
    AuditPage,
    JobInfo,
    JobPage,
    JobState,
    JobTypeStats,
    OutcomeCount,
    QueueStats,
    WorkerInfo,
    WorkerRegistration,
)
from jobs.spi.support import (
    Retention,
    check_age,
    check_cursor,
    check_job_id,
    check_key,
    check_limit,
    check_purge_states,
    check_queue,
    check_state,
    check_type,
    decode_cursor,
    encode_cursor,
    new_action_id,
    to_datetime,
    to_epoch_ms,
)

from ._database.connections import Row
from .rows import job_info, worker_info
from .tables import state_key

__all__ = ["Fetch", "SQLOperations"]

_PAST_EVERY_ROW = (2**63 - 1, "")
"""The (created_at, id) the first page resumes after: greater than any row's."""

_STATS_COUNTS = ("due", "scheduled", "active", "completed", "failed", "cancelled")


class Fetch(Protocol):
    """Runs one of the store's named statements with ``params``; its rows."""

    def __call__(self, statement: str, **params: Any) -> Awaitable[list[Row]]: ...


class SQLOperations:
    """The operations SPI over the store's statements (held by ``SQLAlchemyJobStore``).

    ``fetch`` runs a statement; ``fetch_unsorted`` runs a listing page, whose ORDER BY is read
    off an index; ``settle`` runs one that ends jobs (cancel, delete, purge) with their
    workflow dependents settled in its transaction, returning the rows it ended; ``announce``
    wakes the waiters for a type an operation made due (here and, on PostgreSQL, other stores
    by NOTIFY); ``postgres`` picks the parameter shapes.
    """

    __slots__ = ("_announce", "_fetch", "_fetch_unsorted", "_postgres", "_retention", "_settle")

    def __init__(
        self,
        *,
        fetch: Fetch,
        fetch_unsorted: Fetch,
        announce: Callable[[str], None],
        settle: Fetch,
        postgres: bool,
        retention: Retention,
    ) -> None:
        self._fetch = fetch
        self._fetch_unsorted = fetch_unsorted
        self._announce = announce
        self._settle = settle
        self._postgres = postgres
        self._retention = retention

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        limit = check_limit(limit)
        before_at, before_id = _PAST_EVERY_ROW
        if cursor is not None:
            before_at, before_id = decode_cursor(check_cursor(cursor))
        state = None if state is None else check_state(state)
        rows = await self._fetch_unsorted(
            "list_jobs" if state is None else "list_jobs_in_state",
            state=state,  # list_jobs reads neither
            listed=None if state is None else state_key(state),
            type=None if job_type is None else check_type(job_type),
            queue=None if queue is None else check_queue(queue),
            before_at=before_at,
            before_id=before_id,
            limit=limit + 1,
        )
        jobs = [job_info(row) for row in rows[:limit]]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return JobPage(
            jobs=jobs,
            next_cursor=None if last is None else encode_cursor(last["created_at"], last["id"]),
        )

    async def find_job(self, key: str) -> JobInfo | None:
        rows = await self._fetch("find_job", key=check_key(key))
        return job_info(rows[0]) if rows else None

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        chosen = list(check_purge_states(states))
        rows = await self._settle(
            "purge_jobs",
            states=chosen if self._postgres else json.dumps(chosen),
            type=None if job_type is None else check_type(job_type),
            older_than_ms=None if older_than_ms is None else check_age(older_than_ms),
        )
        return len(rows)

    async def requeue(self, job_id: str) -> bool:
        rows = await self._fetch("requeue_job", id=check_job_id(job_id))
        for job_type in {row["type"] for row in rows}:
            self._announce(job_type)
        return bool(rows)

    async def requeue_failed(self, job_type: str | None = None) -> int:
        rows = await self._fetch(
            "requeue_failed", type=None if job_type is None else check_type(job_type)
        )
        for moved_type in {row["type"] for row in rows}:
            self._announce(moved_type)
        return len(rows)

    async def cancel(self, job_id: str) -> bool:
        retain_ms = self._retention.of_state("cancelled")
        return bool(await self._settle("cancel_job", id=check_job_id(job_id), retain_ms=retain_ms))

    async def stats(self) -> dict[str, JobTypeStats]:
        rows = await self._fetch("stats")
        return {
            row["type"]: JobTypeStats(
                type=row["type"],
                **{state: int(row[state]) for state in _STATS_COUNTS},
                oldest_due_age_ms=(
                    None if row["oldest_due_age_ms"] is None else int(row["oldest_due_age_ms"])
                ),
            )
            for row in sorted(rows, key=lambda row: str(row["type"]))
        }

    async def queue_stats(self) -> dict[str, QueueStats]:
        rows = await self._fetch("queue_stats")
        return {
            row["queue"]: QueueStats(
                queue=row["queue"],
                **{state: int(row[state]) for state in _STATS_COUNTS},
                oldest_due_age_ms=(
                    None if row["oldest_due_age_ms"] is None else int(row["oldest_due_age_ms"])
                ),
            )
            for row in sorted(rows, key=lambda row: str(row["queue"]))
        }

    async def delete(self, job_id: str) -> bool:
        return bool(await self._settle("delete_job", id=check_job_id(job_id)))

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        if ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be positive, got {ttl_ms}")
        await self._fetch(
            "register_worker",
            id=worker.id,
            host=worker.host,
            pid=worker.pid,
            types=json.dumps(list(worker.types)),
            queues=json.dumps(list(worker.queues)),
            concurrency=worker.concurrency,
            in_flight=worker.in_flight,
            ttl_ms=ttl_ms,
        )

    async def deregister_worker(self, worker_id: str) -> None:
        await self._fetch("deregister_worker", id=worker_id)

    async def list_workers(self) -> list[WorkerInfo]:
        if not self._postgres:  # PostgreSQL deletes them in the listing's statement
            await self._fetch("prune_workers")
        return [worker_info(row) for row in await self._fetch("list_workers")]

    # -- outcome counters (a <prefix>counters table, one row per minute, type and outcome) ----

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        for row in counts:  # a flush every heartbeat interval: a few rows, off the hot path
            buckets = {f"b{index}": value for index, value in enumerate(row.buckets)}
            await self._fetch(
                "add_counts", minute=row.minute_ms, type=row.type, outcome=row.outcome,
                count=row.count, duration_ms=row.duration_ms, **buckets,
            )  # fmt: skip
        if counts:
            await self._fetch("prune_counts", keep_ms=COUNTERS_KEEP_MS)

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        rows = await self._fetch("read_counts", since=since_ms, type=job_type)
        buckets = len(DURATION_BOUNDS_MS) + 1
        return [
            OutcomeCount(
                minute_ms=int(row["minute"]),
                type=str(row["type"]),
                outcome=str(row["outcome"]),
                count=int(row["count"]),
                duration_ms=int(row["duration_ms"]),
                buckets=tuple(int(row[f"b{index}"]) for index in range(buckets)),
            )
            for row in rows
        ]

    # -- the audit trail (a <prefix>audit table; PostgreSQL trims it in the insert) ----------

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        bounds = {"keep_ms": AUDIT_KEEP_MS, "max_entries": AUDIT_MAX_ENTRIES}
        await self._fetch(
            "record_action", id=new_action_id(), action=action, target=target, actor=actor,
            source=source, count=count, **(bounds if self._postgres else {}),
        )  # fmt: skip
        if not self._postgres:
            await self._fetch("trim_actions", **bounds)

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        check_limit(limit)
        before_at, before_id = (
            decode_cursor(check_cursor(cursor)) if cursor is not None else _PAST_EVERY_ROW
        )
        rows = await self._fetch(
            "list_actions", before_at=before_at, before_id=before_id, limit=limit + 1
        )
        entries = [
            AuditEntry(
                id=str(row["id"]),
                at=to_datetime(int(row["at"])),
                action=str(row["action"]),
                target=str(row["target"]),
                actor=str(row["actor"]),
                source=str(row["source"]),
                count=int(row["count"]),
            )
            for row in rows[:limit]
        ]
        next_cursor = None
        if len(rows) > limit:
            last = entries[-1]
            next_cursor = encode_cursor(to_epoch_ms(last.at), last.id)
        return AuditPage(entries=entries, next_cursor=next_cursor)
