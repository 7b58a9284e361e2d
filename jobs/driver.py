"""The driver SPI: what every job store implements, and the records it exchanges.

Delivery is at least once, with leases. ``claim`` leases up to ``limit`` due jobs for
``lease_ms`` and counts the attempt; a job whose lease expired is claimed again by the next
``claim`` (no sweeper, no leader), and one with no attempts left is failed with "lease expired"
instead. Every claim hands out a fresh lease token: ``heartbeat``, ``complete``, ``retry`` and
``fail`` apply only while that token holds the job, and otherwise change nothing and return
False. Check and change are one atomic unit in every driver.

Times: ``run_at_ms`` and ``keep_until_ms`` are epoch milliseconds; ``delay_ms`` counts from the
store's clock. A driver given a ``Clock`` uses it in place of the store's clock (tests).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

JobState = Literal["pending", "active", "completed", "failed"]
JOB_STATES: tuple[JobState, ...] = ("pending", "active", "completed", "failed")
JobStateCounts = dict[JobState, int]

LEASE_EXPIRED_ERROR = "LeaseExpiredError: lease expired with no attempts left"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """A job to store, as the queue hands it to a driver (the payload is already JSON text)."""

    id: str
    type: str
    payload: str
    max_attempts: int
    timeout_ms: int | None = None
    key: str | None = None
    delay_ms: int = 0
    run_at_ms: int | None = None
    keep_until_ms: int | None = None
    trace_context: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    """A leased job: ``attempt`` counts this delivery; ``lease_token`` fences its transitions."""

    id: str
    type: str
    payload: str
    attempt: int
    max_attempts: int
    lease_token: str
    timeout_ms: int | None = None
    key: str | None = None
    trace_context: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    """A job as ``get_job`` reports it (the payload decoded)."""

    id: str
    type: str
    state: JobState
    payload: Any
    attempts: int
    max_attempts: int
    run_at: datetime
    last_error: str | None = None
    key: str | None = None
    timeout_ms: int | None = None


@runtime_checkable
class JobDriver(Protocol):
    """A job store. Every implementation passes ``jobs.testing.DriverConformance``."""

    async def enqueue(self, job: JobRequest) -> str | None:
        """Store a pending job; its id, or None when a live job already holds ``job.key``."""
        ...

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        """Store a batch in one statement or script; one result per job, in order.

        Each result is the job's id, or None when its key is taken: by a live job, or by an
        earlier job of the same batch (the first wins). An empty batch makes no call.
        """
        ...

    async def claim(self, limit: int, lease_ms: int, types: Collection[str]) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs of ``types``, oldest ``run_at`` first.

        Due means pending with ``run_at`` reached, or active with its lease expired. Each
        claimed job's attempts go up by one; an expired one with none left is failed instead.
        """
        ...

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        """Extend the lease to now + ``lease_ms``; False (and no write) if the token is stale."""
        ...

    async def complete(self, job_id: str, lease_token: str) -> bool:
        """Mark the job completed; False (and no write) if the token is stale."""
        ...

    async def retry(self, job_id: str, lease_token: str, *, delay_ms: int, error: str) -> bool:
        """Put the job back to pending at now + ``delay_ms`` keeping ``error``; False if stale."""
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

    async def wait_for_work(self, types: Collection[str], timeout_ms: int) -> None:
        """Return when a job of ``types`` may be claimable, or after ``timeout_ms``.

        Wakes at once when a job is enqueued through this driver (and, where the store can
        tell, through any other client). May return early; callers claim and wait again.
        """
        ...

    async def close(self) -> None:
        """Release what the driver owns; clients it borrowed stay open. Idempotent."""
        ...
