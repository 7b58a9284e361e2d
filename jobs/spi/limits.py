"""Fleet-wide limits a store enforces inside its claim (issue 30): at most N jobs of a type (or
of a queue) held at once across every runner, at most N claims of them in any window.

A runner passes ``ClaimLimits`` to ``JobStore.claim`` only when a limit applies to that claim
(``@job_handler(global_concurrency=, rate_limit=)``, ``JobsSettings.queue_limits``), so a claim
without limits is the plain one. A store given limits counts, per limit *key* (``type_key``,
``queue_key``), the claims it made under that key: as *held* while the job still holds the lease
that claim gave it (active, the lease not expired), and as *started* while the claim is younger
than the limit's ``per_ms``. Counting, choosing and recording are one atomic step with the claim
(one script; one transaction under a lock per key, taken in ``ClaimLimits.keys`` order), so two
runners never both take the last place. A job a limit holds back is not claimed: no attempt, no
stall, its order kept.

Semantics, the same on every driver (``jobs.testing`` checks them):

- a type's room is the least of its limits' rooms (``room``); a type with no room is left out
  of the claim, the others are claimed as usual;
- a claim takes at most ``room`` jobs of a limited type, and at most the queue's room in all;
- what a full limit held back is reported on the result (``ClaimedJobs.held``), with when it
  may admit again (``retry_ms``: exact for a rate limit; None while a concurrency limit is full,
  as that frees when a holder settles), so an idle runner neither spins on held-back jobs nor
  sleeps past a rate window's turn.

The SQL and in-process stores share ``plan_claim``/``LimitedClaim.pick``; the Redis claim script
is the same arithmetic in Lua.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from ..options import RateLimit
from .records import ClaimedJob

__all__ = [
    "FleetLimit",
    "ClaimLimits",
    "ClaimedJobs",
    "LimitUsage",
    "LimitedClaim",
    "plan_claim",
    "type_key",
    "queue_key",
]


def type_key(job_type: str) -> str:
    """The key a type's limit counts under (a type's limit spans every queue)."""
    return f"type:{job_type}"


def queue_key(queue: str) -> str:
    """The key a queue's limit counts under."""
    return f"queue:{queue}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetLimit:
    """At most ``concurrency`` jobs held at once, and at most ``rate`` claims in any ``per_ms``
    window (by the store's clock), counted across every runner of the store. None: no such
    limit. ``jobs.options.fleet_limit`` builds one from a handler's or queue's options."""

    concurrency: int | None = None
    rate: int | None = None
    per_ms: int = 1_000

    def __post_init__(self) -> None:
        if self.concurrency is None and self.rate is None:
            raise ValueError("a FleetLimit limits concurrency, rate or both")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"FleetLimit.concurrency must be 1 or more, got {self.concurrency}")
        if self.rate is not None and (self.rate < 1 or self.per_ms < 1):
            raise ValueError(f"FleetLimit rate must be 1 or more per 1 ms or more, got {self}")

    def describe(self) -> str:
        """``"2 at once, 10/s"`` (what the Queues page and ``neverlost queues list`` show)."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"{self.concurrency} at once")
        if self.rate is not None:
            parts.append(str(RateLimit(self.rate, self.per_ms)))
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class ClaimLimits:
    """The limits of one claim: by job type (``types``), and the claimed queue's (``queue``)."""

    types: Mapping[str, FleetLimit] = field(default_factory=dict)
    queue: FleetLimit | None = None

    def keys(self, types: Collection[str], queue: str) -> list[tuple[str, FleetLimit]]:
        """The limits that apply to a claim of ``types`` from ``queue``, by key, in key order
        (the order a store takes its locks in, so that two claims never wait on each other)."""
        keyed = [(type_key(t), limit) for t, limit in self.types.items() if t in types]
        if self.queue is not None:
            keyed.append((queue_key(queue), self.queue))
        keyed.sort(key=lambda pair: pair[0])
        return keyed

    def applies(self, types: Collection[str]) -> bool:
        """Whether a claim of ``types`` has a limit to honour."""
        return self.queue is not None or any(t in self.types for t in types)


class ClaimedJobs(list[ClaimedJob]):
    """What a claim given limits returns: its jobs (a list), and ``held``, the claim's types a
    full limit left out (every type when the queue's limit was full), with ``retry_ms``, in how
    long the soonest of those limits admits again (None: a concurrency limit is full, and frees
    when a holder settles). A claim without limits may return a plain list."""

    __slots__ = ("held", "retry_ms")

    def __init__(
        self,
        jobs: Iterable[ClaimedJob] = (),
        held: frozenset[str] = frozenset(),
        retry_ms: int | None = None,
    ) -> None:
        super().__init__(jobs)
        self.held = held
        self.retry_ms = retry_ms


@dataclass(frozen=True, slots=True)
class LimitUsage:
    """What a store counted under one key: ``held`` claims whose job still holds their lease,
    ``started`` claims made in the last ``per_ms``, the oldest of which at ``oldest_start_ms``
    (the store's clock; None when none)."""

    held: int = 0
    started: int = 0
    oldest_start_ms: int | None = None


def room(limit: FleetLimit, usage: LimitUsage) -> int:
    """How many more claims ``limit`` admits now (0 or more)."""
    left = []
    if limit.concurrency is not None:
        left.append(limit.concurrency - usage.held)
    if limit.rate is not None:
        left.append(limit.rate - usage.started)
    return max(0, min(left))


def _retry_in(limit: FleetLimit, usage: LimitUsage, now_ms: int) -> int | None:
    """When a full ``limit`` admits again: a full rate window turns when its oldest claim
    leaves it; a full concurrency frees at a settle (None: not known)."""
    if limit.concurrency is not None and usage.held >= limit.concurrency:
        return None
    oldest = usage.oldest_start_ms if usage.oldest_start_ms is not None else now_ms
    return max(1, oldest + limit.per_ms - now_ms)


@dataclass(frozen=True, slots=True)
class LimitedClaim:
    """A claim's plan under its limits (``plan_claim``): claim up to ``limit`` jobs of
    ``types`` (those a full limit held back left out), at most ``caps[type]`` of a limited type.
    ``held``/``retry_ms`` are what the claim reports (``ClaimedJobs``)."""

    types: list[str]
    limit: int
    caps: dict[str, int]
    held: frozenset[str]
    retry_ms: int | None
    keys: dict[str, list[str]]
    """Per type claimed: the keys a claim of it records itself under."""

    def pick(self, candidates: Iterable[tuple[int, str]]) -> list[int]:
        """Of ``candidates`` (position, type) in claim order, the positions to take: each
        type within its cap, ``limit`` in all."""
        caps = dict(self.caps)
        taken: list[int] = []
        for position, job_type in candidates:
            if len(taken) >= self.limit:
                break
            cap = caps.get(job_type)
            if cap is None:
                taken.append(position)
            elif cap > 0:
                caps[job_type] = cap - 1
                taken.append(position)
        return taken

    def result(self, jobs: Iterable[ClaimedJob]) -> ClaimedJobs:
        return ClaimedJobs(jobs, self.held, self.retry_ms)


def plan_claim(
    limit: int,
    types: Collection[str],
    queue: str,
    limits: ClaimLimits,
    usage: Mapping[str, LimitUsage],
    now_ms: int,
) -> LimitedClaim:
    """The plan of a claim of up to ``limit`` jobs of ``types`` from ``queue`` under
    ``limits``, given what the store counted under each key (``usage``; a key it has no
    count for counts as unused)."""
    empty = LimitUsage()
    full: list[int | None] = []
    queue_room: int | None = None
    if limits.queue is not None:
        counted = usage.get(queue_key(queue), empty)
        queue_room = room(limits.queue, counted)
        if queue_room == 0:
            full.append(_retry_in(limits.queue, counted, now_ms))
    caps: dict[str, int] = {}
    keys: dict[str, list[str]] = {}
    claimed: list[str] = []
    held: set[str] = set()
    for job_type in types:
        own = [] if queue_room is None else [queue_key(queue)]
        type_limit = limits.types.get(job_type)
        if type_limit is not None:
            counted = usage.get(type_key(job_type), empty)
            left = room(type_limit, counted)
            if left == 0:
                held.add(job_type)
                full.append(_retry_in(type_limit, counted, now_ms))
                continue
            caps[job_type] = left
            own.append(type_key(job_type))
        claimed.append(job_type)
        if own:
            keys[job_type] = own
    if queue_room == 0:
        held.update(types)
        claimed = []
    retry_ms: int | None = None
    if full and None not in full:
        retry_ms = min(ms for ms in full if ms is not None)
    return LimitedClaim(
        types=claimed,
        limit=limit if queue_room is None else min(limit, queue_room),
        caps=caps,
        held=frozenset(held),
        retry_ms=retry_ms,
        keys=keys,
    )
