"""The in-process driver: reference semantics in memory, for development and tests.

Not durable: jobs live as long as the process. It trusts its requests to come from a
``JobQueue``, which checked their options (``jobs.options``): unlike the stores, it does not
check them again (``check_request`` would cost an in-memory enqueue some 3%).

Pending jobs sit in one heap per type and priority ordered by ``run_at`` and active ones in
one heap per type ordered by lease expiry, so a claim looks at the heads of the heaps it needs
(the highest priority with a due head wins), never at every job. Heap entries carry a
sequence number; an entry whose number no longer matches its job's is stale and skipped when
it surfaces. Listing and stats read a ``JobIndex`` of sorted
lists kept beside the heaps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TypeVar

from .audit import MemoryAuditTrail
from .clock import Clock, ManualClock, SystemClock
from .counters import MemoryCounters
from .errors import DriverError
from .inprocess_index import JobIndex
from .inprocess_limits import LimitLedger
from .inprocess_record import JobRecord, job_info
from .operations import decode_cursor, encode_cursor
from .options import DEFAULT_QUEUE, check_workflow_jobs
from .settings import Retention
from .spi.limits import ClaimedJobs, ClaimLimits, plan_claim
from .spi.records import (
    AuditPage,
    ClaimedJob,
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
    workflow_cancelled_error,
)
from .worker_table import WorkerTable

_Entry = tuple[int, int, str]  # (time ms, sequence, job id)
_Lane = tuple[str, str]  # (queue, type): a named queue's jobs of one type


class InProcessJobDriver:
    """Jobs in a dict, ordered by heaps; wakes idle runners at once; takes an injectable clock.

    Not durable (``durable = False``): its jobs end with the process, so an application that
    declares an outbox with it as ``JOB_DRIVER`` fails ``run()`` unless its settings allow it
    (``JobsSettings(allow_volatile_outbox=True)``, for tests).
    """

    durable = False

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        retain_completed_ms: int | None = None,
        retain_failed_ms: int | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._retention = Retention.of(retain_completed_ms, retain_failed_ms)
        self._jobs: dict[str, JobRecord] = {}
        self._keys: dict[str, str] = {}
        self._ready: dict[_Lane, dict[int, list[_Entry]]] = {}  # -> priority -> heap
        self._leased: dict[_Lane, list[_Entry]] = {}
        self._finished: list[_Entry] = []
        self._paused: set[str] = set()
        self._limit_ledger = LimitLedger()
        self._workflows: dict[str, dict[str, None]] = {}
        """A workflow's id -> its jobs' ids still stored, in the order they were stored."""
        self._dependents: dict[str, list[str]] = {}
        """A workflow job's id -> the ids of the jobs that run after it (until it finishes)."""
        self._index = JobIndex()
        self._workers = WorkerTable(self._clock)
        self._audit = MemoryAuditTrail(self._clock)
        self._counters = MemoryCounters(self._clock)
        self._seq = itertools.count(1)
        self._waiters: set[asyncio.Future[None]] = set()
        self._closed = False
        self._unsubscribe = (
            self._clock.subscribe(self._notify) if isinstance(self._clock, ManualClock) else None
        )

    @property
    def clock(self) -> Clock:
        """The clock it keeps time by (``ClockedDriver``): the one given, else this host's."""
        return self._clock

    # -- producer ------------------------------------------------------------------------------

    async def enqueue(self, job: JobRequest) -> str | None:
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        job_id = self._store(job, now)
        if job_id is not None:
            self._notify()
        return job_id

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        self._check_open()
        if not jobs:
            return []
        now = self._clock.now_ms()
        self._prune(now)
        ids = {job.id for job in jobs}
        if len(ids) < len(jobs) or not ids.isdisjoint(self._jobs):
            raise DriverError("the batch repeats a job id, or holds one that already exists")
        results = [self._store(job, now) for job in jobs]
        if any(result is not None for result in results):
            self._notify()
        return results

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
        """Every job at once (nothing awaited in between: atomic on this loop)."""
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        check_workflow_jobs(jobs)
        for job in jobs:
            if job.request.id in self._jobs:
                raise DriverError(f"job id {job.request.id!r} exists already")
        for job in jobs:
            self._store(job.request, now, ready=not job.depends_on)
            record = self._jobs[job.request.id]
            record.workflow_id = workflow_id
            self._workflows.setdefault(workflow_id, {})[record.id] = None
            record.depends_on = job.depends_on
            record.continue_after = job.continue_after
            record.waiting = len(job.depends_on)
            for parent in job.depends_on:
                self._dependents.setdefault(parent, []).append(record.id)
        self._notify()

    async def workflow_jobs(self, workflow_id: str) -> list[JobInfo]:
        self._check_open()
        self._prune(self._clock.now_ms())
        ids = self._workflows.get(workflow_id, {})
        return [job_info(self._jobs[job_id]) for job_id in ids if job_id in self._jobs]

    def _release_dependents(self, parent: JobRecord, now: int, ended: str | None = None) -> None:
        """``parent`` finished: each dependent waits for one parent less (due at zero), or,
        when ``parent`` did not complete and the edge does not continue, is cancelled (and so
        on down the DAG, through ``_finish``)."""
        for child_id in self._dependents.pop(parent.id, ()):
            child = self._jobs.get(child_id)
            if child is None or child.state != "pending" or child.waiting <= 0:
                continue
            if (ended or parent.state) == "completed" or parent.id in child.continue_after:
                child.waiting -= 1
                if child.waiting == 0:
                    child.run_at = max(child.run_at, now)
                    self._push_ready(child)
                    self._notify()
            else:
                error = workflow_cancelled_error(parent.id, parent.type, ended or parent.state)
                self._finish(child, "cancelled", error, now)

    def _store(self, job: JobRequest, now: int, *, ready: bool = True) -> str | None:
        if job.key is not None and job.key in self._keys:
            return None
        if job.id in self._jobs:
            raise DriverError(f"job id {job.id!r} already exists")
        run_at = job.run_at_ms if job.run_at_ms is not None else now + job.delay_ms
        record = JobRecord(
            id=job.id,
            type=job.type,
            payload=job.payload,
            max_attempts=job.max_attempts,
            run_at=run_at,
            timeout_ms=job.timeout_ms,
            key=job.key,
            trace_context=job.trace_context,
            keep_until=job.keep_until_ms,
            created_at=now,
            max_stalls=job.max_stalls,
            priority=job.priority,
            queue=job.queue,
        )
        self._jobs[job.id] = record
        if job.key is not None:
            self._keys[job.key] = job.id
        self._index.enter(record, now)
        if ready:
            self._push_ready(record)
        return job.id

    # -- consumer ------------------------------------------------------------------------------

    async def claim(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str = DEFAULT_QUEUE,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        if limits is not None and limits.applies(types):
            return self._claim_limited(limit, lease_ms, types, queue, limits, now)
        claimed: list[ClaimedJob] = []
        for job_type in types:
            while len(claimed) < limit:
                job = self._reclaim(job_type, queue, lease_ms, now)
                if job is None:
                    break
                claimed.append(job)
        while len(claimed) < limit:
            record = self._pop_due(types, queue, now)
            if record is None:
                break
            claimed.append(self._lease(record, lease_ms, now, reclaimed=False))
        return claimed

    def _reclaim(self, job_type: str, queue: str, lease_ms: int, now: int) -> ClaimedJob | None:
        """Lease the job of the lane whose lease expired first (a stall), failing on the way
        those past their ``max_stalls``; None when no lease of the lane has expired."""
        heap = self._leased.get((queue, job_type))
        while heap and heap[0][0] <= now:
            _, seq, job_id = heapq.heappop(heap)
            record = self._jobs.get(job_id)
            if record is None or record.seq != seq or record.state != "active":
                continue
            record.stalls += 1
            if record.stalls > record.max_stalls:
                self._finish(record, "failed", stalled_error(record.stalls, record.max_stalls), now)
                continue
            return self._lease(record, lease_ms, now, reclaimed=True)
        return None

    def _claim_limited(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str,
        limits: ClaimLimits,
        now: int,
    ) -> ClaimedJobs:
        """The claim under fleet-wide limits (``jobs.spi.limits``): the plan's types, each
        within its cap, walked in the plain claim's order (a type that reaches its cap leaves
        the walk; its jobs keep their places)."""
        holds = self._holds_lease
        usage = {
            key: self._limit_ledger.usage(key, fleet, now, holds)
            for key, fleet in limits.keys(types, queue)
        }
        plan = plan_claim(limit, types, queue, limits, usage, now)
        caps = dict(plan.caps)
        open_types = list(plan.types)
        claimed: list[ClaimedJob] = []
        while len(claimed) < plan.limit and open_types:
            job = next(
                (j for t in open_types if (j := self._reclaim(t, queue, lease_ms, now))), None
            )
            if job is None:
                record = self._pop_due(open_types, queue, now)
                if record is None:
                    break
                job = self._lease(record, lease_ms, now, reclaimed=False)
            claimed.append(job)
            self._limit_ledger.record(plan.keys.get(job.type, ()), now, job.id, job.lease_token)
            cap = caps.get(job.type)
            if cap is not None:
                caps[job.type] = cap - 1
                if cap == 1:
                    open_types.remove(job.type)
        return plan.result(claimed)

    def _holds_lease(self, job_id: str, token: str) -> bool:
        record = self._jobs.get(job_id)
        return (
            record is not None
            and record.state == "active"
            and record.token == token
            and record.lease_until > self._clock.now_ms()
        )

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        record.lease_until = self._clock.now_ms() + lease_ms
        record.seq = next(self._seq)
        heapq.heappush(
            self._leased.setdefault((record.queue, record.type), []),
            (record.lease_until, record.seq, record.id),
        )
        return True

    async def set_progress(self, job_id: str, lease_token: str, progress: str) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        record.progress = progress
        return True

    async def complete(self, job_id: str, lease_token: str, result: str | None = None) -> bool:
        return self._complete(job_id, lease_token, result)

    async def complete_many(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None = None
    ) -> list[bool]:
        if results is None:
            return [self._complete(job_id, lease_token, None) for job_id, lease_token in jobs]
        return [
            self._complete(job_id, lease_token, result)
            for (job_id, lease_token), result in zip(jobs, results, strict=True)
        ]

    def _complete(self, job_id: str, lease_token: str, result: str | None) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        record.result = result
        self._finish(record, "completed", None, self._clock.now_ms())
        return True

    async def retry(
        self,
        job_id: str,
        lease_token: str,
        *,
        delay_ms: int,
        error: str,
        count_attempt: bool = True,
    ) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        now = self._clock.now_ms()
        record.add_error(now, error)
        if not count_attempt:
            record.attempts -= 1
        self._to_pending(record, now + delay_ms, now)
        return True

    async def release(self, job_id: str, lease_token: str) -> bool:
        return self._release(job_id, lease_token)

    async def release_many(self, jobs: Sequence[tuple[str, str]]) -> list[bool]:
        return [self._release(job_id, lease_token) for job_id, lease_token in jobs]

    def _release(self, job_id: str, lease_token: str) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        now = self._clock.now_ms()
        record.attempts -= 1
        self._to_pending(record, now, now)
        return True

    async def fail(self, job_id: str, lease_token: str, *, error: str) -> bool:
        record = self._held(job_id, lease_token)
        if record is None:
            return False
        self._finish(record, "failed", error, self._clock.now_ms())
        return True

    # -- inspection ----------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobInfo | None:
        self._prune(self._clock.now_ms())
        record = self._jobs.get(job_id)
        return None if record is None else job_info(record)

    async def counts(self) -> JobStateCounts:
        self._prune(self._clock.now_ms())
        return self._index.counts()

    # -- operations ----------------------------------------------------------------------------

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        self._prune(self._clock.now_ms())
        before = decode_cursor(cursor) if cursor is not None else None
        ids, last = self._index.page(state, job_type, limit, before, queue)
        return JobPage(
            jobs=[job_info(self._jobs[job_id]) for job_id in ids],
            next_cursor=encode_cursor(*last) if last is not None else None,
        )

    async def find_job(self, key: str) -> JobInfo | None:
        self._prune(self._clock.now_ms())
        job_id = self._keys.get(key)
        return None if job_id is None else job_info(self._jobs[job_id])

    async def requeue(self, job_id: str) -> bool:
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        record = self._jobs.get(job_id)
        if record is None or record.state not in ("failed", "cancelled"):
            return False
        record.max_attempts = record.attempts + 1
        record.finished_at = None
        record.expires_at = 0
        self._to_pending(record, now, now)
        return True

    async def requeue_failed(self, job_type: str | None = None) -> int:
        moved = 0
        for job_id in self._index.ids("failed", job_type):
            moved += await self.requeue(job_id)
        return moved

    async def cancel(self, job_id: str) -> bool:
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        record = self._jobs.get(job_id)
        if record is None or record.state not in ("pending", "active"):
            return False
        self._finish(record, "cancelled", None, now)
        return True

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        self._check_open()
        now = self._clock.now_ms()
        self._prune(now)
        cutoff = None if older_than_ms is None else now - older_than_ms
        purged = 0
        for state in dict.fromkeys(states):
            if state == "active":
                raise ValueError("purge refuses state 'active': a worker still holds those jobs")
            for job_id in self._index.ids(state, job_type):
                record = self._jobs[job_id]
                since = record.created_at if record.finished_at is None else record.finished_at
                if cutoff is None or since <= cutoff:
                    self._delete(record)
                    purged += 1
        return purged

    async def delete(self, job_id: str) -> bool:
        self._check_open()
        self._prune(self._clock.now_ms())
        record = self._jobs.get(job_id)
        if record is None or record.state == "active":
            return False
        self._delete(record)
        return True

    async def stats(self) -> dict[str, JobTypeStats]:
        now = self._clock.now_ms()
        self._prune(now)
        stats = self._index.stats(now, self._oldest_pending)
        return self._without_waiting(stats, now, _type_of) if self._dependents else stats

    def _without_waiting(
        self, stats: dict[str, S], now: int, by: Callable[[JobRecord], str]
    ) -> dict[str, S]:
        """``stats`` (grouped ``by`` type or queue) with each workflow job still waiting for a
        parent taken out of ``due`` or ``scheduled`` (it is neither until its last parent
        finishes). A walk of the parents' dependents, which only jobs of unfinished workflows
        have: off the hot path."""
        waiting: dict[str, list[int]] = {}  # group -> [due by run_at, scheduled]
        seen: set[str] = set()  # a child of several parents is listed under each
        for child_ids in self._dependents.values():
            for child_id in child_ids:
                child = self._jobs.get(child_id)
                if (
                    child_id in seen
                    or child is None
                    or child.state != "pending"
                    or child.waiting <= 0
                ):
                    continue
                seen.add(child_id)
                counts = waiting.setdefault(by(child), [0, 0])
                counts[child.run_at > now] += 1
        for group, (due, scheduled) in waiting.items():
            row = stats.get(group)
            if row is not None:
                stats[group] = replace(row, due=row.due - due, scheduled=row.scheduled - scheduled)
        return stats

    async def queue_stats(self) -> dict[str, QueueStats]:
        now = self._clock.now_ms()
        self._prune(now)
        stats = self._index.queue_stats(now, self._oldest_in_queue)
        return self._without_waiting(stats, now, _queue_of) if self._dependents else stats

    async def pause_queue(self, queue: str) -> bool:
        self._check_open()
        if queue in self._paused:
            return False
        self._paused.add(queue)
        return True

    async def resume_queue(self, queue: str) -> bool:
        self._check_open()
        if queue not in self._paused:
            return False
        self._paused.discard(queue)
        self._notify()  # its due jobs may be claimed again
        return True

    async def paused_queues(self) -> set[str]:
        return set(self._paused)

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        self._check_open()
        self._workers.register(worker, ttl_ms)

    async def deregister_worker(self, worker_id: str) -> None:
        self._workers.deregister(worker_id)

    async def list_workers(self) -> list[WorkerInfo]:
        return self._workers.live()

    # -- the audit trail -----------------------------------------------------------------------

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        self._check_open()
        await self._audit.record_action(
            action=action, target=target, actor=actor, source=source, count=count
        )

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        return await self._audit.list_actions(limit=limit, cursor=cursor)

    # -- outcome counters ----------------------------------------------------------------------

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        self._check_open()
        await self._counters.add_counts(counts)

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        return await self._counters.read_counts(since_ms, job_type)

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = (DEFAULT_QUEUE,)
    ) -> None:
        self._check_open()
        now = self._clock.now_ms()
        next_due = self._next_due(types, queues)
        if next_due is not None and next_due <= now:
            return
        wait_ms = timeout_ms if next_due is None else min(timeout_ms, next_due - now)
        # A bare future and a timer, not wait_for(event.wait()): that one is a task more and
        # two steps of the event loop more between an enqueue and the runner that claims it.
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(wait_ms / 1000, _wake, woken)
        self._waiters.add(woken)
        try:
            await woken
        finally:
            timer.cancel()
            self._waiters.discard(woken)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._notify()

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DriverError("the in-process job driver is closed")

    def _notify(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for woken in waiters:
                _wake(woken)

    def _push_ready(self, record: JobRecord) -> None:
        record.seq = next(self._seq)
        lane = (record.queue, record.type)
        heaps = self._ready.get(lane)
        if heaps is None:
            heaps = self._ready[lane] = {}
        heap = heaps.get(record.priority)
        if heap is None:
            heap = heaps[record.priority] = []
        heapq.heappush(heap, (record.run_at, record.seq, record.id))

    def _head(self, heap: list[_Entry] | None, state: JobState) -> _Entry | None:
        """The heap's first live entry, dropping stale ones on the way."""
        while heap:
            entry = heap[0]
            record = self._jobs.get(entry[2])
            if record is not None and record.seq == entry[1] and record.state == state:
                return entry
            heapq.heappop(heap)
        return None

    def _pop_due(self, types: Collection[str], queue: str, now: int) -> JobRecord | None:
        """The due pending job to claim next: the highest priority, then the earliest run_at
        (then the earliest pushed)."""
        best: tuple[int, int, int] | None = None
        best_entry: _Entry | None = None
        best_heap: list[_Entry] | None = None
        for job_type in types:
            heaps = self._ready.get((queue, job_type))
            if not heaps:
                continue
            for priority, heap in heaps.items():
                entry = self._head(heap, "pending")
                if entry is None or entry[0] > now:
                    continue
                rank = (-priority, entry[0], entry[1])
                if best is None or rank < best:
                    best, best_entry, best_heap = rank, entry, heap
        if best_entry is None or best_heap is None:
            return None
        heapq.heappop(best_heap)
        return self._jobs[best_entry[2]]

    def _ready_heads(self, lane: _Lane) -> list[_Entry]:
        """The head of each of the lane's pending heaps (one per priority)."""
        heads = []
        for heap in self._ready.get(lane, {}).values():
            entry = self._head(heap, "pending")
            if entry is not None:
                heads.append(entry)
        return heads

    def _next_due(self, types: Collection[str], queues: Collection[str]) -> int | None:
        lanes = [(queue, job_type) for queue in queues for job_type in types]
        times = [entry[0] for lane in lanes for entry in self._ready_heads(lane)]
        for lane in lanes:
            entry = self._head(self._leased.get(lane), "active")
            if entry is not None:
                times.append(entry[0])
        return min(times, default=None)

    def _oldest_pending(self, job_type: str) -> int | None:
        lanes = [lane for lane in self._ready if lane[1] == job_type]
        return min((entry[0] for lane in lanes for entry in self._ready_heads(lane)), default=None)

    def _oldest_in_queue(self, queue: str) -> int | None:
        lanes = [lane for lane in self._ready if lane[0] == queue]
        return min((entry[0] for lane in lanes for entry in self._ready_heads(lane)), default=None)

    def _to_pending(self, record: JobRecord, run_at: int, now: int) -> None:
        record.state = "pending"
        record.token = None
        record.run_at = run_at
        self._index.enter(record, now)
        self._push_ready(record)
        self._notify()

    def _lease(self, record: JobRecord, lease_ms: int, now: int, *, reclaimed: bool) -> ClaimedJob:
        if not reclaimed:  # a reclaim runs the attempt that stalled again (claim counted it)
            record.attempts += 1
        if record.state != "active":
            record.state = "active"
            self._index.enter(record, now)
        record.seq = next(self._seq)
        record.token = f"{record.attempts}:{record.seq}"
        record.lease_until = now + lease_ms
        heapq.heappush(
            self._leased.setdefault((record.queue, record.type), []),
            (record.lease_until, record.seq, record.id),
        )
        return ClaimedJob(
            id=record.id,
            type=record.type,
            payload=record.payload,
            attempt=record.attempts,
            max_attempts=record.max_attempts,
            lease_token=record.token,
            timeout_ms=record.timeout_ms,
            key=record.key,
            trace_context=record.trace_context,
            reclaimed=reclaimed,
            run_at_ms=record.run_at,
            stalls=record.stalls,
            depends_on=record.depends_on,
        )

    def _held(self, job_id: str, lease_token: str) -> JobRecord | None:
        record = self._jobs.get(job_id)
        if record is None or record.state != "active" or record.token != lease_token:
            return None
        return record

    def _finish(self, record: JobRecord, state: JobState, error: str | None, now: int) -> None:
        retain = self._retention.of_state(state)
        record.state = state
        self._index.enter(record, now)
        record.token = None
        record.seq = next(self._seq)
        record.finished_at = now
        if error is not None:
            record.add_error(now, error)
        record.expires_at = max(now + retain, record.keep_until or 0)
        heapq.heappush(self._finished, (record.expires_at, record.seq, record.id))
        if record.id in self._dependents:
            self._release_dependents(record, now)

    def _prune(self, now: int) -> None:
        finished = self._finished
        while finished and finished[0][0] <= now:
            _, seq, job_id = heapq.heappop(finished)
            record = self._jobs.get(job_id)
            if record is None or record.seq != seq:
                continue
            self._delete(record)

    def _delete(self, record: JobRecord) -> None:
        if record.id in self._dependents:  # an unfinished parent, deleted by an operator
            self._release_dependents(record, self._clock.now_ms(), ended="deleted")
        if record.workflow_id is not None:
            members = self._workflows.get(record.workflow_id)
            if members is not None:
                members.pop(record.id, None)
                if not members:
                    del self._workflows[record.workflow_id]
        self._index.leave(record)
        del self._jobs[record.id]
        if record.key is not None and self._keys.get(record.key) == record.id:
            del self._keys[record.key]


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


S = TypeVar("S", JobTypeStats, QueueStats)


def _type_of(record: JobRecord) -> str:
    return record.type


def _queue_of(record: JobRecord) -> str:
    return record.queue
