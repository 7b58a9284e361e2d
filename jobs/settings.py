"""JobsSettings: the knobs of the jobs plugin, one dataclass (override the bean to change them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .fleet_limits import parse_queue_limits
from .options import QueueWeights, check_max_stalls, parse_queues
from .results import DEFAULT_MAX_RESULT_BYTES
from .spi.records import DEFAULT_MAX_STALLS

DAY_MS = 86_400_000
DEFAULT_RETAIN_COMPLETED_MS = 7 * DAY_MS
DEFAULT_RETAIN_FAILED_MS = 30 * DAY_MS
DEFAULT_RETAIN_PUBLISHED_MS = 7 * DAY_MS
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_TIMEOUT_MS = 30 * 60_000
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Retention:
    """How long a driver keeps finished jobs (and so their keys), in milliseconds."""

    completed_ms: int = DEFAULT_RETAIN_COMPLETED_MS
    failed_ms: int = DEFAULT_RETAIN_FAILED_MS

    @classmethod
    def of(cls, completed_ms: int | None, failed_ms: int | None) -> Retention:
        """From a driver's ``retain_completed_ms``/``retain_failed_ms`` (None: the default)."""
        retention = cls(
            DEFAULT_RETAIN_COMPLETED_MS if completed_ms is None else completed_ms,
            DEFAULT_RETAIN_FAILED_MS if failed_ms is None else failed_ms,
        )
        for name, value in (
            ("retain_completed_ms", retention.completed_ms),
            ("retain_failed_ms", retention.failed_ms),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        return retention

    def of_state(self, state: str) -> int:
        """The retention of a job finished in ``state`` ("completed" or "failed")."""
        return self.completed_ms if state == "completed" else self.failed_ms


@dataclass(frozen=True, kw_only=True)
class JobsSettings:
    """Settings of the jobs plugin; durations in milliseconds. Frozen: make a changed copy with
    ``dataclasses.replace(settings, concurrency=4)``.

    ``heartbeat_ms`` defaults to a third of ``lease_ms``. ``drain_timeout_ms`` bounds how long
    ``JobRunner.close()`` waits for in-flight jobs (None: until they finish); jobs still running
    then are cancelled and handed back to the store (``release``: no attempt, no stall spent).
    ``timeout_grace_ms`` is how long a timed-out handler that ignores cancellation is given
    before the runner settles the job without it; the handler keeps its slot until it returns,
    and ``health()`` names it meanwhile.
    ``default_timeout_ms`` (30 minutes) is the timeout of a handler that has none of its own:
    the handler's ``timeout_ms`` wins (or its job definition's), then the request's, then this;
    None runs such handlers without a timeout. It is checked on the runner's heartbeat sweep,
    so it fires up to half a heartbeat interval late.
    ``retain_published_ms`` (7 days) is how long the outbox relay keeps published outbox entries
    before it deletes them (None: kept forever). ``allow_volatile_outbox`` lets an application
    declare an outbox while its ``JOB_DRIVER`` keeps jobs in memory (the in-process default),
    for tests: otherwise ``run()`` refuses it, since every job the relay published would be
    lost with the process.
    ``prefetch`` is how many leased jobs the runner keeps ready beside its ``concurrency``
    running ones (None: half the concurrency), so a slot that frees starts its next job at once
    instead of waiting for a claim; they are heartbeated like running jobs, and ``close()``
    runs them like jobs in flight. 0 claims only for free slots.
    ``max_stalls`` (10) is how many times a job's lease may expire without a settle (its
    worker crashed, was killed or lost it) before the job fails for good with
    ``StalledTooOftenError``; stored with each job the queue enqueues, unless the job's
    handler or definition says otherwise. Stalls are not attempts: a deploy that kills the
    workers costs no attempt.
    ``max_result_bytes`` (64 KiB) bounds the JSON text of a handler's return value, kept with
    its completed job (``JobInfo.result``); a larger or non-JSON one fails the job for good
    with ``ResultError`` (``jobs.results``).
    ``queues``: the named queues a runner claims from (``jobs.options.parse_queues``):
    ``"critical,default"`` in strict order (the first drained before the next is claimed
    from), ``"critical=3,default=1"`` by weight. None (the default): ``"default"``, then the
    queues its handlers name (``@job_handler(queue=...)`` or their definitions), in strict
    order, so a worker configured before named queues existed claims what it claimed then.
    Given, only those (a handler's queue left out is not served by this runner).
    ``queue_limits``: fleet-wide limits per queue, every type of the queue counted together,
    e.g. ``{"exports": {"global_concurrency": 2, "rate_limit": "10/s"}}``
    (``jobs.fleet_limits.parse_queue_limits``); the store enforces them in its claim, as a
    handler's ``global_concurrency`` and ``rate_limit``. Every worker serving the queue should
    say the same: each claim honours the limits of the runner making it.
    """

    concurrency: int = 10
    lease_ms: int = 30_000
    heartbeat_ms: int | None = None
    poll_interval_ms: int = 1_000
    auto_start: bool = False
    max_payload_bytes: int = MIB
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    retain_completed_ms: int = DEFAULT_RETAIN_COMPLETED_MS
    retain_failed_ms: int = DEFAULT_RETAIN_FAILED_MS
    drain_timeout_ms: int | None = None
    timeout_grace_ms: int = 1_000
    default_timeout_ms: int | None = DEFAULT_TIMEOUT_MS
    retain_published_ms: int | None = DEFAULT_RETAIN_PUBLISHED_MS
    allow_volatile_outbox: bool = False
    schedule_interval_ms: int = 60_000
    prefetch: int | None = None
    max_stalls: int = DEFAULT_MAX_STALLS
    queues: str | tuple[str, ...] | QueueWeights | None = None
    queue_limits: Mapping[str, Mapping[str, object]] | None = None

    def __post_init__(self) -> None:
        positive = {
            "concurrency": self.concurrency,
            "lease_ms": self.lease_ms,
            "poll_interval_ms": self.poll_interval_ms,
            "max_payload_bytes": self.max_payload_bytes,
            "max_result_bytes": self.max_result_bytes,
            "schedule_interval_ms": self.schedule_interval_ms,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"JobsSettings.{name} must be positive, got {value}")
        if self.heartbeat_ms is not None and not 0 < self.heartbeat_ms < self.lease_ms:
            raise ValueError(
                f"JobsSettings.heartbeat_ms must be between 0 and lease_ms ({self.lease_ms}), "
                f"got {self.heartbeat_ms}"
            )
        if self.default_timeout_ms is not None and self.default_timeout_ms <= 0:
            raise ValueError(
                "JobsSettings.default_timeout_ms must be positive (None: no default timeout), "
                f"got {self.default_timeout_ms}"
            )
        check_max_stalls(self.max_stalls, "JobsSettings")
        if self.queues is not None:
            parse_queues(self.queues, "JobsSettings")
        parse_queue_limits(self.queue_limits)
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError(f"JobsSettings.prefetch must not be negative, got {self.prefetch}")
        for name in ("retain_completed_ms", "retain_failed_ms", "timeout_grace_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"JobsSettings.{name} must not be negative")
        if self.retain_published_ms is not None and self.retain_published_ms < 0:
            raise ValueError(
                "JobsSettings.retain_published_ms must not be negative (None: keep published "
                f"outbox entries forever), got {self.retain_published_ms}"
            )

    @property
    def effective_prefetch(self) -> int:
        return self.prefetch if self.prefetch is not None else self.concurrency // 2

    @property
    def effective_heartbeat_ms(self) -> int:
        return self.heartbeat_ms if self.heartbeat_ms is not None else max(1, self.lease_ms // 3)
