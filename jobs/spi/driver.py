"""The driver SPI: what every job store implements (the records it exchanges are in ``records``).

Delivery is at least once, with leases. ``claim`` leases up to ``limit`` due jobs for
``lease_ms``. Attempts count handler failures, stalls count crashes:

- a claim of a pending job counts an attempt (``attempts + 1``; the delivery runs that
  attempt);
- a job whose lease expired without a settle (its worker crashed, was killed or lost it) is
  claimed again by the next ``claim`` (no sweeper, no leader) as a *stall*: ``stalls + 1``,
  ``attempts`` unchanged (the new delivery runs the attempt that stalled again, with the same
  number), ``ClaimedJob.reclaimed`` True;
- when that stall would take ``stalls`` past the job's ``max_stalls``, the claim fails the job
  for good instead (``stalls`` counted, the error ``stalled_error(stalls, max_stalls)``): a
  poison job that kills its workers stays bounded;
- ``release`` hands a held job back at no cost: pending, due now, the attempt it held given
  back (``attempts - 1``), no stall (a runner that closes past its drain deadline);
- ``retry(..., count_attempt=False)`` retries without spending the attempt (``RetryLater``).

Every claim hands out a fresh lease token: ``heartbeat``, ``complete``, ``retry``, ``fail`` and
``release`` apply only while that token holds the job, and otherwise change nothing and return
False. Check and change are one atomic unit in every driver.

Operations (list, find, requeue, cancel, purge, stats, workers) are fenced like the rest:
each changes one job in one atomic step, only from the states it names, and tells the loser of a
race (False, or not counted). Cancelling an active job revokes its lease token, so the holder's
next heartbeat and its settle are refused. Arguments reach a driver already validated by
``JobQueue``.

A driver given a ``Clock`` uses it in place of the store's clock (tests), and says so as
``clock`` (``ClockedDriver``): the runner counts its outcomes' minutes by that clock too.

``JobDriver`` is the union of three parts a caller may name alone: ``JobStore`` (what the
runner and the queue's producer side use), ``JobOperations`` (what an operator's tools use) and
``WorkerRegistry`` (worker presence). A driver implements all three.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from ..clock import Clock
from ..options import DEFAULT_QUEUE
from .limits import ClaimLimits
from .records import (
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
)

__all__ = [
    "JobStore",
    "JobOperations",
    "WorkerRegistry",
    "AuditTrail",
    "OutcomeCounters",
    "ProgressReports",
    "QueueOperations",
    "QueuePauses",
    "WorkflowStore",
    "ClockedDriver",
    "JobDriver",
]


@runtime_checkable
class JobStore(Protocol):
    """Storing, leasing and settling jobs: the part of the SPI the runner and ``enqueue`` use."""

    async def enqueue(self, job: JobRequest) -> str | None:
        """Store a pending job; its id, or None when a live job already holds ``job.key``."""
        ...

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        """Store a batch in one statement or script; one result per job, in order.

        Each result is the job's id, or None when its key is taken: by a live job, or by an
        earlier job of the same batch (the first wins). An empty batch makes no call.
        """
        ...

    async def claim(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str = DEFAULT_QUEUE,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs of ``types`` in the named ``queue`` (never a job of
        another queue), the highest priority first, then the oldest ``run_at``: one statement
        or script, whatever the queue. A runner serving several queues calls it once per
        queue, in its order (``JobRequest.queue``); one serving ``"default"`` alone calls it
        without ``queue``, as before named queues existed.

        ``limits``: fleet-wide limits the claim honours in the same atomic step
        (``jobs.spi.limits``): it then returns ``ClaimedJobs``, saying what a full limit held
        back. The runner passes it only when a limit applies, so a driver of before limits
        serves every runner that has none.

        Due means pending with ``run_at`` reached, or active with its lease expired. A
        pending job's attempts go up by one; an expired one's stalls go up by one (its
        attempts stay: ``ClaimedJob.attempt`` is the attempt that stalled), and one whose
        stalls then exceed its ``max_stalls`` is failed with ``stalled_error`` instead (and
        not returned).
        """
        ...

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        """Extend the lease to now + ``lease_ms``; False (and no write) if the token is stale."""
        ...

    async def complete(self, job_id: str, lease_token: str, result: str | None = None) -> bool:
        """Mark the job completed, keeping ``result`` (the handler's return value as JSON text,
        None: it returned None) in the same write; False (and no write) if the token is stale.

        The runner passes ``result`` only when there is one, so a driver written before results
        existed still completes jobs whose handlers return None.
        """
        ...

    async def complete_many(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None = None
    ) -> list[bool]:
        """Complete a batch of ``(job_id, lease_token)`` in one statement or script; one result
        per job, in order, each as ``complete`` would answer it (a stale token: False, and no
        write for that job alone). ``results``: each job's result text, by position (None: no
        result for any). A batch never holds a job twice; an empty one makes no call.
        The runner coalesces its completes into this call (``settling.Settler``).
        """
        ...

    async def retry(
        self,
        job_id: str,
        lease_token: str,
        *,
        delay_ms: int,
        error: str,
        count_attempt: bool = True,
    ) -> bool:
        """Put the job back to pending at now + ``delay_ms`` keeping ``error``; False if stale.

        ``count_attempt=False``: the attempt is given back (``attempts - 1``), so the next
        claim runs the same attempt number again (a handler's ``RetryLater``).
        """
        ...

    async def release(self, job_id: str, lease_token: str) -> bool:
        """Hand a held job back at no cost: pending, due now, ``attempts - 1`` (the attempt
        it held is given back), stalls unchanged, no error kept; False (and no write) if the
        token is stale."""
        ...

    async def release_many(self, jobs: Sequence[tuple[str, str]]) -> list[bool]:
        """``release`` for a batch of ``(job_id, lease_token)`` in one statement or script; one
        result per job, in order. A batch never holds a job twice; an empty one makes no
        call."""
        ...

    async def fail(self, job_id: str, lease_token: str, *, error: str) -> bool:
        """Mark the job failed for good with ``error``; False (and no write) if stale."""
        ...

    async def get_job(self, job_id: str) -> JobInfo | None:
        """The job, or None if it never existed or retention pruned it."""
        ...

    async def counts(self) -> JobStateCounts:
        """How many jobs are in each state (every state present, zero included)."""
        ...

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = (DEFAULT_QUEUE,)
    ) -> None:
        """Return when a job of ``types`` in one of ``queues`` may be claimable, or after
        ``timeout_ms`` (a job of another queue due is no reason to return: its runner would
        spin). The runner passes ``queues`` only when it serves more than ``"default"``.

        Wakes at once when a job is enqueued through this driver (and, where the store can
        tell, through any other client). May return early; callers claim and wait again.
        """
        ...

    async def close(self) -> None:
        """Release what the driver owns; clients it borrowed stay open. Idempotent."""
        ...


@runtime_checkable
class JobOperations(Protocol):
    """Operating a store: listing, finding, requeueing, cancelling, purging, stats."""

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        """One page of jobs, newest first (``created_at`` descending, then id descending);
        ``queue``: of that named queue only (the queue passes it only when one was asked for).

        ``cursor`` is a page's ``next_cursor``: the next page starts strictly after the last
        job of that page, so jobs enqueued while paging neither repeat nor shift pages. A page
        costs the same however many jobs the store holds (an index or sorted set, no offset).
        ``next_cursor`` is None on the last page.
        """
        ...

    async def find_job(self, key: str) -> JobInfo | None:
        """The job holding idempotency ``key``, or None."""
        ...

    async def requeue(self, job_id: str) -> bool:
        """An operator's retry: a failed or cancelled job becomes pending, due now.

        It gets exactly one more attempt (``max_attempts = attempts + 1``) and keeps its id,
        key, payload and errors. False (and no write) in any other state or for an unknown id.
        """
        ...

    async def requeue_failed(self, job_type: str | None = None) -> int:
        """``requeue`` every failed job (of ``job_type``); how many moved."""
        ...

    async def cancel(self, job_id: str) -> bool:
        """A pending or active job becomes cancelled (finished); its lease token is revoked.

        False (and no write) for a finished or unknown job.
        """
        ...

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        """Delete jobs in ``states`` (never ``active``), freeing their keys; how many went.

        ``older_than_ms``: only jobs finished (or, pending ones, created) at least that long ago
        by the store's clock. Each job is its own atomic step: a job that left ``states`` in
        the meantime is kept and not counted.
        """
        ...

    async def delete(self, job_id: str) -> bool:
        """Delete one job that is not active, freeing its key (an operator's "delete").

        False (and no write) for an active job (its worker holds it: cancel it first) or an
        unknown id. One atomic step, like ``purge`` of a single job.
        """
        ...

    async def stats(self) -> dict[str, JobTypeStats]:
        """Per job type present in the store: counts by state and the oldest due job's age."""
        ...


@runtime_checkable
class WorkerRegistry(Protocol):
    """Worker presence: runners register themselves each heartbeat sweep."""

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        """Record (or refresh) a live worker, stamped ``last_seen`` now by the store's clock.

        A worker not refreshed within ``ttl_ms`` is gone from ``list_workers`` (and its record
        expires). ``started_at`` is the time of the first registration of this live record.
        """
        ...

    async def deregister_worker(self, worker_id: str) -> None:
        """Remove a worker's record (a clean shutdown); a no-op for an unknown id."""
        ...

    async def list_workers(self) -> list[WorkerInfo]:
        """The live workers, by ``started_at``."""
        ...


@runtime_checkable
class AuditTrail(Protocol):
    """The operators' actions, kept in the store beside the jobs (``JobQueue`` records each
    retry, cancel, delete and purge it is asked for). Every built-in driver implements it
    (``jobs.testing`` checks it); a driver without it runs jobs, and its queue records nothing.
    """

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        """Append an action, stamped now by the store's clock with a fresh id; the store then
        keeps at most ``AUDIT_MAX_ENTRIES`` actions, none older than ``AUDIT_KEEP_MS``."""
        ...

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        """One page of actions, newest first (``at`` descending, then id descending);
        ``cursor`` a page's ``next_cursor`` (``encode_cursor(at_ms, id)``)."""
        ...


@runtime_checkable
class OutcomeCounters(Protocol):
    """Per-minute counts of executions by job type and outcome, with their runtimes, kept in the
    store apart from the jobs (so a purge or retention does not erase history). Runners add
    what they counted every heartbeat interval (``jobs.counters``); the dashboard's chart and
    ``neverlost stats --history`` read them. Optional like ``AuditTrail``; every built-in
    driver implements it (``jobs.testing`` checks it)."""

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        """Add each row to the stored one of its minute, type and outcome (every field summed,
        buckets one by one); rows older than ``COUNTERS_KEEP_MS`` are dropped, in passing."""
        ...

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        """The stored rows of minutes starting at or after ``since_ms`` (of ``job_type``), by
        minute, then type, then outcome."""
        ...


@runtime_checkable
class ClockedDriver(Protocol):
    """A driver that may be given a clock in place of its store's (a test's ``ManualClock``).

    ``clock`` is the clock it was given, or None when the store keeps the time. The runner
    counts outcomes (``OutcomeCounters``) by the minutes of that clock, else by this host's, so
    a test that moves the driver's clock moves the counters' minutes with it. Optional: a
    driver without it is counted by this host's clock.
    """

    @property
    def clock(self) -> Clock | None: ...


@runtime_checkable
class ProgressReports(Protocol):
    """Keeping what a handler reports of its progress (``ctx.progress``) with its held job.
    Optional like ``AuditTrail``; every built-in driver implements it (``jobs.testing`` checks
    it); on a driver without it ``ctx.progress`` checks its arguments and stores nothing."""

    async def set_progress(self, job_id: str, lease_token: str, progress: str) -> bool:
        """Keep ``progress`` (``JobProgress.text()``) with the job, fenced like a heartbeat:
        False (and no write) unless ``lease_token`` holds the job, active. The runner limits
        how often it calls (``jobs.progress``)."""
        ...


@runtime_checkable
class QueueOperations(Protocol):
    """Reporting per named queue (``JobRequest.queue``). Optional like ``AuditTrail``; every
    built-in driver implements it (``jobs.testing`` checks it)."""

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue holding a live job: counts by state and the oldest due job's age, as
        ``stats`` counts per type."""
        ...


@runtime_checkable
class QueuePauses(Protocol):
    """Pausing named queues, held in the store (issue 30): every runner reads the paused set
    once per poll interval and leaves a paused queue out of its claims (and its waits), so a
    pause holds within one poll interval on every worker; jobs running finish, enqueues go on.
    Optional; every built-in driver implements it (``jobs.testing`` checks it)."""

    async def pause_queue(self, queue: str) -> bool:
        """Mark ``queue`` paused; False when it was paused already (no change)."""
        ...

    async def resume_queue(self, queue: str) -> bool:
        """Unmark it; False when it was not paused."""
        ...

    async def paused_queues(self) -> set[str]:
        """The queues paused now (one cheap read: each runner asks once per poll interval)."""
        ...


@runtime_checkable
class WorkflowStore(Protocol):
    """Storing a workflow (a DAG of jobs, ``jobs.workflow``) in one atomic step, and releasing
    each job when its parents are done, in the same atomic step as the parent's settle.
    Optional; ``jobs.testing`` checks it on the drivers that implement it.

    A job with parents is pending but not due (no claim takes it) while any parent is
    unfinished. When a parent completes (or finishes in any way, on a ``continue_after`` edge)
    the job's count of parents to wait for goes down; at zero it becomes due (at its
    ``run_at``, or now if later). When a parent fails for good or is cancelled, each dependent
    not on a ``continue_after`` edge ends ``cancelled`` with the error
    ``workflow_cancelled_error(parent)``, and so on down the DAG, in that same step: a job that
    comes due after its last parent's settle is never early, never lost, never twice.
    """

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
        """Store every job of ``jobs`` (parents before children, no keys) in one transaction
        or script: all or nothing. DriverError for a repeated or existing id, or a parent that
        is not an earlier job of the call."""
        ...

    async def workflow_jobs(self, workflow_id: str) -> list[JobInfo]:
        """The workflow's jobs still stored, in the order ``enqueue_workflow`` stored them
        (parents before children); empty for an unknown workflow."""
        ...


@runtime_checkable
class JobDriver(JobStore, JobOperations, WorkerRegistry, Protocol):
    """A job store. Every implementation passes ``jobs.testing.DriverConformance``."""
