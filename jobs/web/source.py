"""What the dashboard reads and changes: the queue's operations API, and the scheduler if known.

Every list the dashboard shows is one page of ``JobQueue.list_jobs``; nothing here loads all
jobs. The throughput chart is the one exception to "one call per view": see ``throughput``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loguru import logger

from framework import ApplicationContext

from ..audit import Actor
from ..counters import TypeHistory, summarize
from ..failures import describe_cause
from ..outbox_status import outbox_operations, outbox_status
from ..queue import JobQueue
from ..schedule import Schedule
from ..scheduler import JobScheduler
from ..spi import JobInfo, JobTypeStats, WorkerInfo
from ..spi.outbox import OutboxOperations
from ..tokens import JOB_QUEUE, JOB_SCHEDULER, OUTBOX_STORE
from .throughput import Throughput, count_throughput

THROUGHPUT_CACHE_S = 10.0
MAX_LOOKBACK_MS = 400 * 86_400_000


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One schedule as the schedules page shows it."""

    name: str
    job_type: str
    cron: str
    timezone: str
    next_at_ms: int | None
    last_at_ms: int | None
    last_key: str | None
    last_job: JobInfo | None


class DashboardSource:
    """The queue (and scheduler) behind a dashboard, resolved from a queue or a context."""

    def __init__(
        self, queue_or_context: JobQueue | ApplicationContext, *, outbox: object = None
    ) -> None:
        self._outbox = outbox
        if isinstance(queue_or_context, JobQueue):
            self._queue: JobQueue | None = queue_or_context
            self._context: ApplicationContext | None = None
        elif isinstance(queue_or_context, ApplicationContext):
            self._queue = None
            self._context = queue_or_context
        else:
            raise TypeError(
                "create_dashboard needs a JobQueue or an ApplicationContext holding one, got "
                f"{type(queue_or_context).__name__}"
            )
        self._throughput: tuple[float, Throughput] | None = None

    @property
    def queue(self) -> JobQueue:
        if self._queue is not None:
            return self._queue
        assert self._context is not None
        return self._context.get_value(JOB_QUEUE)

    @property
    def scheduler(self) -> JobScheduler | None:
        if self._context is None or JOB_SCHEDULER not in self._context:
            return None
        return self._context.get_value(JOB_SCHEDULER)

    @property
    def outbox(self) -> OutboxOperations | None:
        """The outbox store given, else the context's (bean ``outbox_store``), when it has
        ``OutboxOperations``; None otherwise (the Outbox page then says so)."""
        store = self._outbox
        if store is None and self._context is not None and OUTBOX_STORE.name in self._context:
            store = self._context.get_value(OUTBOX_STORE)
        return outbox_operations(store)

    # -- reading -------------------------------------------------------------------------------

    async def outbox_status(self) -> dict[str, Any] | None:
        """The overview's outbox numbers (``jobs.outbox_status``); None without an outbox. A
        failing outbox store does not take the page down: ``{"error": ...}`` says why."""
        try:
            return await outbox_status(self.outbox)
        except Exception as exc:
            logger.warning("dashboard: the outbox store failed: {}", describe_cause(exc))
            return {"error": describe_cause(exc)}

    async def stats(self) -> dict[str, JobTypeStats]:
        """Per type: due, scheduled, active, completed, failed, cancelled, oldest_due_age_ms."""
        return await self.queue.stats()

    async def workers(self) -> list[WorkerInfo]:
        return await self.queue.workers()

    async def page(
        self,
        *,
        state: str | None,
        job_type: str | None,
        limit: int,
        cursor: str | None,
        queue: str | None = None,
    ) -> tuple[list[JobInfo], str | None]:
        page = await self.queue.list_jobs(
            state=state, type=job_type, limit=limit, cursor=cursor, queue=queue
        )
        return list(page.jobs), page.next_cursor

    async def queue_names(self) -> list[str]:
        """The named queues holding a live job (none when the driver reports no queues)."""
        try:
            return sorted(await self.queue.queue_stats())
        except NotImplementedError:
            return []

    async def job(self, job_id: str) -> JobInfo | None:
        return await self.queue.get_job(job_id)

    async def search(self, text: str) -> JobInfo | None:
        """The job whose id is ``text``, else the one holding the key ``text``."""
        found = await self.queue.get_job(text)
        if found is not None:
            return found
        try:
            return await self.queue.find_job(key=text)
        except ValueError:  # not something a key can be: so no job holds it
            return None

    async def throughput(self, now_ms: int | None = None) -> Throughput:
        """Completions and failures per minute over the last hour (cached for a few seconds)."""
        cached = self._throughput
        if (
            now_ms is None
            and cached is not None
            and time.monotonic() - cached[0] < THROUGHPUT_CACHE_S
        ):
            return cached[1]
        result = await count_throughput(self.queue, now_ms=now_ms)
        self._throughput = (time.monotonic(), result)
        return result

    async def runtimes(self, now_ms: int | None = None) -> dict[str, TypeHistory]:
        """Per type, the last hour's executions and runtime p50/p95, from the store's counters
        (empty for a store without them)."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        try:
            rows = await self.queue.outcome_counts(since_ms=max(now - 3_600_000, 0))
        except NotImplementedError:
            return {}
        return {row.type: row for row in summarize(rows)}

    async def schedules(self, now_ms: int) -> list[ScheduleRow]:
        scheduler = self.scheduler
        if scheduler is None:
            return []
        rows = []
        for schedule in scheduler.schedules:
            last = _last_occurrence(schedule, now_ms)
            key = schedule.key(last) if last is not None else None
            rows.append(
                ScheduleRow(
                    name=schedule.key_prefix,
                    job_type=schedule.job_type,
                    cron=schedule.cron,
                    timezone=schedule.timezone,
                    next_at_ms=schedule.next_after(now_ms),
                    last_at_ms=last,
                    last_key=key,
                    last_job=await self.queue.find_job(key=key) if key is not None else None,
                )
            )
        return rows

    # -- acting --------------------------------------------------------------------------------

    async def retry(self, job_id: str, actor: Actor | None = None) -> bool:
        return await self.queue.retry(job_id, actor=actor)

    async def cancel(self, job_id: str, actor: Actor | None = None) -> bool:
        return await self.queue.cancel(job_id, actor=actor)

    async def delete(self, job_id: str, actor: Actor | None = None) -> bool:
        return await self.queue.delete(job_id, actor=actor)

    async def retry_failed(self, job_type: str | None, actor: Actor | None = None) -> int:
        return await self.queue.retry_failed(type=job_type, actor=actor)


def _last_occurrence(schedule: Schedule, now_ms: int) -> int | None:
    """The latest occurrence at or before ``now_ms`` within the last 400 days, if any."""
    window = 60_000  # grown eightfold until it holds one: a few occurrences looked at, at most
    while window <= MAX_LOOKBACK_MS:
        latest = None
        for occurrence in schedule.occurrences(now_ms - window, now_ms):
            latest = occurrence
        if latest is not None:
            return latest
        window *= 8
    return None
