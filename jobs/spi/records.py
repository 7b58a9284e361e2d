"""The records a driver and the engine exchange: requests, claimed jobs, job info, pages, stats,
worker records and outbox entries. Plain frozen dataclasses; this module imports nothing of the
engine, so a driver (or the engine) can name them without pulling anything else in.

Times: ``run_at_ms`` and ``keep_until_ms`` are epoch milliseconds; ``delay_ms`` counts from the
store's clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "JobState",
    "JOB_STATES",
    "FINISHED_STATES",
    "JobStateCounts",
    "DEFAULT_MAX_STALLS",
    "MAX_ERRORS_KEPT",
    "stalled_error",
    "workflow_cancelled_error",
    "JobRequest",
    "ClaimedJob",
    "FailedAttempt",
    "JobProgress",
    "JobInfo",
    "WorkflowJob",
    "WorkflowInfo",
    "JobPage",
    "JobTypeStats",
    "QueueStats",
    "WorkerRegistration",
    "WorkerInfo",
    "OutboxEntry",
]

JobState = Literal["pending", "active", "completed", "failed", "cancelled"]
JOB_STATES: tuple[JobState, ...] = ("pending", "active", "completed", "failed", "cancelled")
FINISHED_STATES: tuple[JobState, ...] = ("completed", "failed", "cancelled")
JobStateCounts = dict[JobState, int]

MAX_ERRORS_KEPT = 20
"""``JobInfo.errors`` keeps the errors of the last this-many failed attempts."""
DEFAULT_MAX_STALLS = 10
"""A job's ``max_stalls`` unless its handler, definition or ``JobsSettings`` say otherwise (and
what a stored job without one reads as)."""


def workflow_cancelled_error(parent_id: str, parent_type: str, parent_state: str) -> str:
    """The error a workflow's job is cancelled with when a parent it depends on failed for good
    or was cancelled (``WorkflowStore``)."""
    return (
        f"WorkflowCancelled: parent job {parent_id} ({parent_type}) ended {parent_state}, so "
        "this job, which runs only after it completes, will not run"
    )


def stalled_error(stalls: int, max_stalls: int) -> str:
    """The error a claim stores when it fails a job whose lease expired once too often: the
    ``stalls``-th time, past ``max_stalls``. Drivers write exactly this text (their statements
    and scripts build it from the two numbers)."""
    return (
        f"StalledTooOftenError: the lease expired without a settle {stalls} time(s), more "
        f"than max_stalls ({max_stalls}): each time the worker holding the job crashed, was "
        "killed or lost it"
    )


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class JobRequest:
    """A job to store, as the queue hands it to a driver (the payload is already JSON text).

    Its ``__init__`` is the one dataclass would generate, but sets the slots through their
    descriptors: the generated one's ``object.__setattr__`` per field (the frozen way, which
    checks the type's MRO each time) measured ~20,000 instructions a request (callgrind), a
    third of ``JobQueue.build_request``; this one ~13,700. Still frozen: assignment raises.
    """

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
    max_stalls: int = DEFAULT_MAX_STALLS
    priority: int = 0
    """Among due jobs a higher one is claimed first (``jobs.options.check_priority``)."""
    queue: str = "default"
    """The named queue it waits in: only runners serving it claim it (``check_queue``)."""

    def __init__(
        self,
        *,
        id: str,
        type: str,
        payload: str,
        max_attempts: int,
        timeout_ms: int | None = None,
        key: str | None = None,
        delay_ms: int = 0,
        run_at_ms: int | None = None,
        keep_until_ms: int | None = None,
        trace_context: str | None = None,
        max_stalls: int = DEFAULT_MAX_STALLS,
        priority: int = 0,
        queue: str = "default",
    ) -> None:
        s = _REQUEST_SLOTS
        s[0](self, id)
        s[1](self, type)
        s[2](self, payload)
        s[3](self, max_attempts)
        s[4](self, timeout_ms)
        s[5](self, key)
        s[6](self, delay_ms)
        s[7](self, run_at_ms)
        s[8](self, keep_until_ms)
        s[9](self, trace_context)
        s[10](self, max_stalls)
        s[11](self, priority)
        s[12](self, queue)


_REQUEST_SLOTS: tuple[Any, ...] = tuple(
    getattr(JobRequest, field.name).__set__ for field in fields(JobRequest)
)
"""``JobRequest``'s slot setters, in field order (``__init__``'s arguments)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    """A leased job: ``attempt`` is the attempt this delivery runs (a reclaim runs the attempt
    whose lease expired again: same number); ``stalls`` how many times the job's lease
    expired without a settle; ``lease_token`` fences its transitions."""

    id: str
    type: str
    payload: str
    attempt: int
    max_attempts: int
    lease_token: str
    timeout_ms: int | None = None
    key: str | None = None
    trace_context: str | None = None
    reclaimed: bool = False
    """This delivery follows an attempt whose lease expired (its worker died or stalled)."""
    run_at_ms: int | None = None
    """When the job was due (epoch ms), for ``JobContext.run_at``."""
    stalls: int = 0
    depends_on: tuple[str, ...] = ()
    """The ids of the job's parents in its workflow (``JobContext.parent_results``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedAttempt:
    """The error one attempt ended with, as ``retry`` or ``fail`` recorded it."""

    attempt: int
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class JobProgress:
    """What a handler last reported of its job's progress (``await ctx.progress(...)``):
    ``fraction`` from 0 to 1, and an optional ``message``. Stores keep it as the JSON text of
    ``[fraction, message]`` (``text``/``of_text``)."""

    fraction: float
    message: str | None = None

    def text(self) -> str:
        return json.dumps([self.fraction, self.message], ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def of_text(cls, text: str | None) -> JobProgress | None:
        """The progress a store kept (None: none reported)."""
        if not text:
            return None
        fraction, message = json.loads(text)
        return cls(float(fraction), message)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    """A job as ``get_job`` reports it (the payload decoded).

    ``errors`` holds one entry per failed attempt, newest last, the last ``MAX_ERRORS_KEPT``;
    ``last_error`` is the newest one's text. ``finished_at`` is set in a finished state
    (completed, failed, cancelled) and cleared when an operator requeues the job.
    """

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
    created_at: datetime | None = None
    finished_at: datetime | None = None
    trace_context: str | None = None
    """The W3C ``traceparent`` of the trace that enqueued the job, if one was active."""
    errors: tuple[FailedAttempt, ...] = ()
    stalls: int = 0
    """How many times the job's lease expired without a settle (a crashed, killed or lost
    worker): counted apart from ``attempts``, bounded by ``max_stalls``."""
    max_stalls: int = DEFAULT_MAX_STALLS
    priority: int = 0
    """Among due jobs a higher priority is claimed first (FIFO by due time within one)."""
    queue: str = "default"
    """The named queue the job waits in (only runners serving it claim it)."""
    result: Any = None
    """What the handler returned (decoded JSON), kept with the completed job for as long as the
    job is retained; None when it returned None, or the job did not complete."""
    progress: JobProgress | None = None
    """What the handler last reported (``ctx.progress``); kept after the job finishes."""
    workflow_id: str | None = None
    """The workflow the job was enqueued in (``JobQueue.enqueue_workflow``), if any."""
    depends_on: tuple[str, ...] = ()
    """The ids of the jobs it runs after (its parents in the workflow)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInfo:
    """A workflow as ``JobQueue.get_workflow`` reports it: its jobs in dependency order (as
    enqueued), and a state read off theirs: ``running`` while any is pending or active, else
    ``completed`` when all completed, ``failed`` when any failed, else ``cancelled``."""

    id: str
    state: Literal["running", "completed", "failed", "cancelled"]
    jobs: list[JobInfo]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowJob:
    """One job of a workflow as ``WorkflowStore.enqueue_workflow`` stores it: its request, the
    ids of its parents (jobs of the same call, listed before it), and those of them whose
    failure or cancel does not cancel it (``on_failure="continue"`` edges)."""

    request: JobRequest
    depends_on: tuple[str, ...] = ()
    continue_after: tuple[str, ...] = ()


# -- operations ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPage:
    """One page of ``list_jobs``: pass ``next_cursor`` as ``cursor`` for the next (None: last)."""

    jobs: list[JobInfo]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobTypeStats:
    """One job type's numbers: due (pending, run_at reached), scheduled (pending, run_at ahead).
    A workflow's job still waiting for a parent is pending but neither (it comes due with its
    last parent's settle), so a callback waiting on a long group does not read as stuck.

    ``oldest_due_age_ms`` is how long the longest-waiting due job has been due (None: none due).
    """

    type: str
    due: int = 0
    scheduled: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    oldest_due_age_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    """One named queue's numbers, as ``JobTypeStats`` gives a type's (``queue_stats``), its
    finished jobs included: every built-in driver counts ``completed``, ``failed`` and
    ``cancelled`` per queue (``jobs.testing`` checks it). None is left to a third-party driver
    that cannot count them (readers show it as unknown)."""

    queue: str
    due: int = 0
    scheduled: int = 0
    active: int = 0
    completed: int | None = 0
    failed: int | None = 0
    cancelled: int | None = 0
    oldest_due_age_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerRegistration:
    """What a runner says about itself each heartbeat sweep."""

    id: str
    host: str
    pid: int
    types: tuple[str, ...]
    concurrency: int
    in_flight: int
    queues: tuple[str, ...] = ()
    """The named queues it claims from (empty: a runner of before queues, "default")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerInfo:
    """A live worker as ``workers()`` reports it; times by the store's clock."""

    id: str
    host: str
    pid: int
    types: tuple[str, ...]
    concurrency: int
    in_flight: int
    started_at: datetime
    last_seen: datetime
    queues: tuple[str, ...] = ()
    """The named queues it claims from, as it registered them (empty: not said)."""


# -- the audit trail -------------------------------------------------------------------------

AUDIT_KEEP_MS = 90 * 86_400_000
"""How long a store keeps an operator's action in its audit trail (90 days)."""
AUDIT_MAX_ENTRIES = 10_000
"""The most actions a store keeps; the oldest go first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One operator action, as the store recorded it (``at`` by the store's clock).

    ``action``: retry, retry_failed, cancel, delete, purge (pause_queue, resume_queue ...);
    ``target``: the job id, or what a bulk action chose ("failed jobs of type email.send");
    ``actor``: who (``user@host`` on the command line, the client's address on the dashboard);
    ``source``: cli, dashboard or api; ``count``: how many jobs it changed (0: refused).
    """

    id: str
    at: datetime
    action: str
    target: str
    actor: str
    source: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditPage:
    """One page of ``list_actions``, newest first; ``next_cursor`` as for ``JobPage``."""

    entries: list[AuditEntry]
    next_cursor: str | None = None


# -- outcome counters ------------------------------------------------------------------------

COUNTERS_KEEP_MS = 7 * 86_400_000
"""How long a store keeps the per-minute outcome counters (7 days)."""
DURATION_BOUNDS_MS: tuple[int, ...] = (10, 50, 100, 250, 500, 1_000, 2_500, 10_000, 60_000)
"""Upper bounds of the runtime buckets; a last bucket holds everything longer."""
COUNTED_OUTCOMES = ("completed", "failed", "retried")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeCount:
    """How many executions of ``type`` ended with ``outcome`` (completed, failed, retried) in
    the minute starting at ``minute_ms`` (epoch ms, a multiple of 60,000), and their runtimes:
    ``duration_ms`` summed, and ``buckets`` counted per ``DURATION_BOUNDS_MS`` bucket (one
    more, for longer ones). Stores add rows of the same minute, type and outcome together."""

    minute_ms: int
    type: str
    outcome: str
    count: int
    duration_ms: int
    buckets: tuple[int, ...]


# -- the outbox ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    """A claimed outbox entry; ``lease_token`` fences ``mark_published`` and ``release``.

    ``trace_context`` is the W3C traceparent of the span that appended it (None outside one).
    ``run_at_ms`` is when the job is due (epoch ms): ``delay_ms`` after the append by the
    store's clock, or the ``run_at`` given; None: due when published (neither was given, or
    an entry of an earlier version, whose ``delay_ms`` then counts from the publish).
    ``max_attempts`` is carried to the job (None: the queue's default).
    """

    id: str
    type: str
    payload: Any
    key: str | None
    delay_ms: int | None
    created_at: datetime
    attempts: int
    lease_token: str
    trace_context: str | None = None
    run_at_ms: int | None = None
    max_attempts: int | None = None
    priority: int | None = None
    """Carried to the job (None: the handler's default, else 0)."""
    queue: str | None = None
    """Carried to the job (None: the handler's default, else ``"default"``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxStats:
    """The outbox at one moment, for operators (``OutboxOperations.outbox_stats``).

    ``unpublished``: entries not yet handed over; ``oldest_age_ms``: how long the oldest of them
    has waited (by the store's clock; None when none waits); ``with_errors``: unpublished
    entries whose last hand-over failed (``last_error`` set); ``published_last_hour``: entries
    marked published in the last hour (those retention has not pruned yet).
    """

    unpublished: int
    oldest_age_ms: int | None
    with_errors: int
    published_last_hour: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayRegistration:
    """What a relay says about itself each presence interval."""

    id: str
    host: str
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayInfo:
    """A live relay as ``list_relays()`` reports it; times by the store's clock."""

    id: str
    host: str
    pid: int
    started_at: datetime
    last_seen: datetime


OUTBOX_ENTRY_STATES = ("unpublished", "failing", "published")
"""What ``list_entries(state=...)`` takes: waiting, waiting after a failed hand-over (a subset of
unpublished), handed over."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntryInfo:
    """An outbox entry as an operator sees it (``list_entries``, ``get_entry``); times by the
    store's clock. ``available_at``: when a relay may claim it next (its lease or retry delay
    ends then); ``leased``: a relay holds it now."""

    id: str
    type: str
    payload: Any
    key: str | None
    created_at: datetime
    available_at: datetime
    published_at: datetime | None
    attempts: int
    last_error: str | None
    leased: bool
    run_at_ms: int | None = None
    max_attempts: int | None = None

    @property
    def state(self) -> str:
        if self.published_at is not None:
            return "published"
        return "failing" if self.last_error is not None else "unpublished"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntryPage:
    """One page of ``list_entries``, oldest first; ``next_cursor`` for the next."""

    entries: list[OutboxEntryInfo]
    next_cursor: str | None = None
