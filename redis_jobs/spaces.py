"""Each named queue in a hash slot of its own: the queues' spaces of one namespace (``keys``).

``RedisJobDriver`` keeps the default queue's jobs in the namespace's space ``{ns}`` and hands
what concerns a named queue Q to a driver of Q's space ``{ns|Q}`` (``QueueSpaces.of``: the same
class on the same client, made on first use, holding its own script runner and waiter, so on a
Cluster its scripts and BLPOPs go to the master of Q's slot). What is routed where:

- ``enqueue`` by the request's queue; ``enqueue_many`` one call per queue of the batch, so a
  batch spanning queues is atomic per queue only (each queue's jobs one script, as before);
  ``enqueue_workflow`` to the one queue of its jobs: a workflow whose jobs span queues is
  refused (``DriverError``), since no script can store it atomically across slots;
- ``claim(queue=Q)`` to Q's space; heartbeat, progress, complete, retry, fail and release by
  the queue the lease token names (``<attempt>:<random>~<queue as hex>.<n>:<type>``);
- by id, key or workflow id (get_job, find_job, workflow_jobs; cancel, requeue, delete): the
  default space and every named queue's space concurrently (the named queues in use are the
  ``{ns}:queues`` set, which an enqueue into a queue fills first, once per driver); a change
  runs in every space, and only the space that holds the job finds anything to change;
- ``list_jobs`` without a queue: each space's page from the same cursor, merged newest first by
  (created_at, id), the cursor format unchanged; with ``queue=Q``: Q's space alone;
- counts, stats, queue_stats, purge, requeue_failed: each space's, summed;
- ``wait_for_work`` of several queues: a wait in each queue's space at once (a BLPOP cannot
  name keys of several slots on a Cluster); the first to return ends the others.

Namespace-level data (workers, audit, counters, pauses, the queues set) stays in ``{ns}`` and
is the namespace driver's alone.

Rules this gives on Redis: an idempotency key is unique within its queue (the same key may hold
one live job in each queue: two spaces cannot be checked in one atomic step), as is a job id
the caller chose; a workflow's jobs are all in one queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Generic, Protocol, TypeVar

from jobs.errors import DriverError
from jobs.spi import (
    JOB_STATES,
    JobInfo,
    JobPage,
    JobRequest,
    JobState,
    JobStateCounts,
    JobTypeStats,
    QueueStats,
    WorkflowJob,
)
from jobs.spi.support import (
    DEFAULT_QUEUE,
    check_request,
    decode_cursor,
    encode_cursor,
    to_epoch_ms,
)

from .errors import ReplicationTimeoutError, translate_errors
from .keys import Keys
from .workflows import check_workflow

T = TypeVar("T")


class Space(Protocol):
    """What ``QueueSpaces`` calls of a queue's space (a ``RedisJobDriver``)."""

    async def enqueue(self, job: JobRequest) -> str | None: ...

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]: ...

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None: ...

    async def counts(self) -> JobStateCounts: ...

    async def stats(self) -> dict[str, JobTypeStats]: ...

    async def queue_stats(self) -> dict[str, QueueStats]: ...

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage: ...

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = ...
    ) -> None: ...

    async def close(self) -> None: ...


D = TypeVar("D", bound=Space)

CROSS_QUEUE_WORKFLOW = (
    "a workflow's jobs must all be in one queue on Redis (each queue is a hash slot of its "
    "own, and a workflow is stored and released by one script, which reaches one slot); got "
    "queues {queues}: put the workflow's jobs in one queue"
)


class QueueSpaces(Generic[D]):
    """The named queues' spaces of one namespace, for the namespace's ``RedisJobDriver``.

    ``make(queue)`` makes the driver of a queue's space; ``text`` decodes a reply value.
    """

    __slots__ = (
        "_client",
        "_home_node",
        "_keys",
        "_make",
        "_registered",
        "_replica_timeout_ms",
        "_replicas",
        "_spaces",
        "_text",
    )

    def __init__(
        self,
        *,
        client: Any,
        keys: Keys,
        make: Callable[[str], D],
        text: Callable[[Any], str],
        replicas: int = 0,
        replica_timeout_ms: int = 1_000,
        home_node: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._make = make
        self._text = text
        self._replicas = replicas
        self._replica_timeout_ms = replica_timeout_ms
        self._home_node = home_node
        """How to aim a keyless WAIT at the namespace's node (a Cluster: its slot's master)."""
        self._spaces: dict[str, D] = {}
        self._registered: set[str] = set()

    def of(self, queue: str) -> D:
        """The driver of ``queue``'s space (a named queue), made on first use."""
        space = self._spaces.get(queue)
        if space is None:
            space = self._spaces[queue] = self._make(queue)
        return space

    async def register(self, queue: str) -> None:
        """Add ``queue`` to the namespace's queues set (once per driver), before its first job
        is stored: a look-up by id then never misses a stored job's space. With ``replicas``
        the add is confirmed by WAIT as an enqueue is (else ReplicationTimeoutError, and the
        job is not stored): a failover cannot keep the job and lose its queue's name."""
        if queue in self._registered:
            return
        with translate_errors():
            if self._replicas:
                await self._register_durably(queue)
            else:
                await self._client.sadd(self._keys.queues, queue)
        self._registered.add(queue)

    async def _register_durably(self, queue: str) -> None:
        options = await self._home_node() if self._home_node is not None else {}
        pipe = self._client.pipeline(transaction=False)  # one connection: WAIT confirms SADD
        pipe.sadd(self._keys.queues, queue)
        pipe.execute_command("WAIT", self._replicas, self._replica_timeout_ms, **options)
        _, confirmed = await pipe.execute()
        if int(confirmed) < self._replicas:
            raise ReplicationTimeoutError(
                f"Redis did not confirm the queue {queue!r} in the namespace's queues set on "
                f"{self._replicas} replica(s) within {self._replica_timeout_ms} ms "
                f"({int(confirmed)} of {self._replicas} replicas confirmed it); its job was not "
                "stored"
            )

    async def known(self) -> list[D]:
        """The drivers of every named queue's space in use (read from ``{ns}:queues``)."""
        with translate_errors():
            names = await self._client.smembers(self._keys.queues)
        return [self.of(name) for name in sorted(self._text(name) for name in names)]

    async def close(self) -> None:
        spaces, self._spaces = list(self._spaces.values()), {}
        for space in spaces:
            await space.close()

    # -- producer ------------------------------------------------------------------------------

    async def enqueue(self, job: JobRequest) -> str | None:
        check_request(job)  # before the queues set is written
        await self.register(job.queue)
        return await self.of(job.queue).enqueue(job)

    async def enqueue_many(
        self,
        jobs: Sequence[JobRequest],
        home: Callable[[Sequence[JobRequest]], Awaitable[list[str | None]]],
    ) -> list[str | None]:
        """One call per queue of the batch, at once (``home``: the default queue's); the
        results in the batch's order."""
        for job in jobs:
            check_request(job)
        positions: dict[str, list[int]] = {}
        for position, job in enumerate(jobs):
            positions.setdefault(job.queue, []).append(position)
        for queue in positions:
            if queue != DEFAULT_QUEUE:
                await self.register(queue)

        async def one(queue: str, batch: list[JobRequest]) -> list[str | None]:
            if queue == DEFAULT_QUEUE:
                return await home(batch)
            return await self.of(queue).enqueue_many(batch)

        answers = await asyncio.gather(
            *(one(queue, [jobs[p] for p in places]) for queue, places in positions.items())
        )
        results: list[str | None] = [None] * len(jobs)
        for places, answer in zip(positions.values(), answers, strict=True):
            for position, result in zip(places, answer, strict=True):
                results[position] = result
        return results

    async def enqueue_workflow(
        self,
        workflow_id: str,
        jobs: Sequence[WorkflowJob],
        home: Callable[[str, Sequence[WorkflowJob]], Awaitable[None]],
    ) -> None:
        queues = sorted({job.request.queue for job in jobs})
        if len(queues) > 1:
            raise DriverError(CROSS_QUEUE_WORKFLOW.format(queues=", ".join(queues)))
        if not queues or queues[0] == DEFAULT_QUEUE:
            await home(workflow_id, jobs)
            return
        [queue] = queues
        check_workflow(workflow_id, jobs)  # before the queues set is written
        await self.register(queue)
        await self.of(queue).enqueue_workflow(workflow_id, jobs)

    # -- every space at once ---------------------------------------------------------------------

    async def each(self, home: Awaitable[T], call: Callable[[D], Awaitable[T]]) -> list[T]:
        """``home`` (the default space's answer) and ``call`` of every named queue's space, all
        at once; their answers, the default space's first."""

        async def others() -> list[T]:
            return list(await asyncio.gather(*(call(space) for space in await self.known())))

        first, rest = await asyncio.gather(home, others())
        return [first, *rest]

    async def first(
        self, home: Awaitable[T | None], call: Callable[[D], Awaitable[T | None]]
    ) -> T | None:
        """The first answer of ``each`` that is not None (or empty)."""
        for answer in await self.each(home, call):
            if answer:
                return answer
        return None

    async def any(self, home: Awaitable[bool], call: Callable[[D], Awaitable[bool]]) -> bool:
        """Whether ``call`` changed something in a space (at most one holds the job)."""
        return any(await self.each(home, call))

    async def total(self, home: Awaitable[int], call: Callable[[D], Awaitable[int]]) -> int:
        """The sum of ``call``'s answers in every space."""
        return sum(await self.each(home, call))

    async def counts(self, home: Awaitable[JobStateCounts]) -> JobStateCounts:
        counts = dict.fromkeys(JOB_STATES, 0)
        for answer in await self.each(home, lambda space: space.counts()):
            for state, count in answer.items():
                counts[state] = counts.get(state, 0) + count
        return counts

    async def stats(self, home: Awaitable[dict[str, JobTypeStats]]) -> dict[str, JobTypeStats]:
        merged: dict[str, JobTypeStats] = {}
        for answer in await self.each(home, lambda space: space.stats()):
            for job_type, row in answer.items():
                seen = merged.get(job_type)
                merged[job_type] = row if seen is None else _sum_type(seen, row)
        return dict(sorted(merged.items()))

    async def queue_stats(
        self, home: Awaitable[dict[str, QueueStats]], home_counts: Awaitable[JobStateCounts]
    ) -> dict[str, QueueStats]:
        """Each space's rows, its finished counts judged by retention as ``counts`` judges them
        (a space's lane indexes keep a finished job until a script of that space prunes it, and
        since each queue has a slot of its own no other queue's settle prunes them): a named
        queue's are its space's counts; the default queue's its space's counts less the named
        rows stored there before queues had slots."""

        async def both(
            rows: Awaitable[dict[str, QueueStats]], counts: Awaitable[JobStateCounts]
        ) -> tuple[dict[str, QueueStats], JobStateCounts]:
            return await asyncio.gather(rows, counts)

        answers = await self.each(
            both(home, home_counts), lambda space: both(space.queue_stats(), space.counts())
        )
        merged: dict[str, QueueStats] = {}
        for index, (rows, counts) in enumerate(answers):
            for queue, row in rows.items():
                if index == 0 and queue != DEFAULT_QUEUE:
                    kept = row  # named jobs stored in {ns} before: their lanes' counts
                else:
                    others = [r for q, r in rows.items() if q != queue] if index == 0 else []
                    kept = _finished_as_counted(row, counts, others)
                seen = merged.get(queue)
                merged[queue] = kept if seen is None else _sum_queue(seen, kept)
        return dict(sorted(merged.items()))

    async def list_jobs(
        self,
        home: Callable[..., Awaitable[JobPage]],
        *,
        state: JobState | None,
        job_type: str | None,
        limit: int,
        cursor: str | None,
    ) -> JobPage:
        """Every space's page after ``cursor``, merged newest first by (created_at, id)."""
        if cursor is not None:
            decode_cursor(cursor)  # a bad cursor is refused once, as the default space would

        def page(lister: Callable[..., Awaitable[JobPage]]) -> Awaitable[JobPage]:
            return lister(state=state, job_type=job_type, limit=limit, cursor=cursor)

        pages = await self.each(page(home), lambda space: page(space.list_jobs))
        merged = heapq.merge(*(p.jobs for p in pages), key=_order, reverse=True)
        jobs = [job for _, job in zip(range(limit), merged, strict=False)]
        more = any(p.next_cursor is not None for p in pages) or sum(
            len(p.jobs) for p in pages
        ) > len(jobs)
        if not more or not jobs:
            return JobPage(jobs=jobs)
        return JobPage(jobs=jobs, next_cursor=encode_cursor(*_order(jobs[-1])))

    # -- waits -----------------------------------------------------------------------------------

    async def wait_any(
        self,
        home: Callable[[Collection[str], int, Collection[str]], Awaitable[None]],
        types: Collection[str],
        timeout_ms: int,
        queues: Collection[str],
    ) -> None:
        """A wait in each queue's space at once (``home``: the default queue's); returns when
        the first does, and ends the others."""
        waits: list[Awaitable[None]] = []
        for queue in dict.fromkeys(queues):
            if queue == DEFAULT_QUEUE:
                waits.append(home(types, timeout_ms, (DEFAULT_QUEUE,)))
            else:
                waits.append(self.of(queue).wait_for_work(types, timeout_ms, (queue,)))
        if len(waits) == 1:
            await waits[0]
            return
        tasks = [asyncio.ensure_future(wait) for wait in waits]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            with contextlib.suppress(asyncio.CancelledError):
                task.result()  # a failed wait raises its error


def _order(job: JobInfo) -> tuple[int, str]:
    """A job's place in a listing, as the list script orders it (created_at, then id)."""
    return to_epoch_ms(job.created_at or job.run_at), job.id


def _add(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return first + second


def _oldest(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return max(first, second)


def _sum_type(first: JobTypeStats, second: JobTypeStats) -> JobTypeStats:
    return JobTypeStats(
        type=first.type,
        due=first.due + second.due,
        scheduled=first.scheduled + second.scheduled,
        active=first.active + second.active,
        completed=first.completed + second.completed,
        failed=first.failed + second.failed,
        cancelled=first.cancelled + second.cancelled,
        oldest_due_age_ms=_oldest(first.oldest_due_age_ms, second.oldest_due_age_ms),
    )


def _finished_as_counted(
    row: QueueStats, counts: JobStateCounts, others: list[QueueStats]
) -> QueueStats:
    """``row`` with its finished numbers from its space's ``counts`` less ``others``' (the rows
    of named queues stored in the same space)."""

    def left(state: str, field: str) -> int:
        taken = sum(getattr(other, field) or 0 for other in others)
        return max(int(counts.get(state, 0)) - taken, 0)  # type: ignore[call-overload]

    return dataclasses.replace(
        row,
        completed=left("completed", "completed"),
        failed=left("failed", "failed"),
        cancelled=left("cancelled", "cancelled"),
    )


def _sum_queue(first: QueueStats, second: QueueStats) -> QueueStats:
    return QueueStats(
        queue=first.queue,
        due=first.due + second.due,
        scheduled=first.scheduled + second.scheduled,
        active=first.active + second.active,
        completed=_add(first.completed, second.completed),
        failed=_add(first.failed, second.failed),
        cancelled=_add(first.cancelled, second.cancelled),
        oldest_due_age_ms=_oldest(first.oldest_due_age_ms, second.oldest_due_age_ms),
    )
