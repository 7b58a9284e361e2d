"""What a runner passes to its claims of fleet-wide limits, and how it waits when one held
jobs back (issue 30, item 4; the store enforces them: ``jobs.spi.limits``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .spi.limits import ClaimedJobs, ClaimLimits, FleetLimit
from .spi.records import ClaimedJob

__all__ = ["RunnerLimits", "LIMIT_RECHECK_MS", "held_of", "merged"]

LIMIT_RECHECK_MS = 50
"""How soon a runner claims again a type a full *concurrency* limit held back: the place frees
when a holder on any worker settles, which no wake-up announces. A full rate limit says when
its window turns (``ClaimedJobs.retry_ms``), and the runner waits exactly that."""


class RunnerLimits:
    """The limits of one runner's claims: its handlers' (by type) and its settings' (by
    queue), one ``ClaimLimits`` per queue, made once."""

    def __init__(self, types: Mapping[str, FleetLimit], queues: Mapping[str, FleetLimit]) -> None:
        self._types = dict(types)
        self._queues = dict(queues)
        self._by_queue: dict[str, ClaimLimits | None] = {}

    def __bool__(self) -> bool:
        return bool(self._types or self._queues)

    def of(self, queue: str, types: Collection[str]) -> ClaimLimits | None:
        """The limits a claim of ``types`` from ``queue`` honours (None: none applies, the
        plain claim)."""
        try:
            limits = self._by_queue[queue]
        except KeyError:
            limits = self._by_queue[queue] = (
                ClaimLimits(self._types, self._queues.get(queue))
                if self._types or queue in self._queues
                else None
            )
        if limits is None or not limits.applies(types):
            return None
        return limits


def held_of(jobs: list[ClaimedJob]) -> ClaimedJobs | None:
    """``jobs`` when a limit held some back (``ClaimedJobs`` with ``held``), else None."""
    if isinstance(jobs, ClaimedJobs) and jobs.held:
        return jobs
    return None


def merged(parts: list[list[ClaimedJob]]) -> list[ClaimedJob]:
    """The claims of several queues as one: ``ClaimedJobs`` holding every held type, and the
    soonest known turn (None when any held part knows none)."""
    jobs = [job for part in parts for job in part]
    held = [part for part in parts if isinstance(part, ClaimedJobs) and part.held]
    if not held:
        return jobs
    turns = [part.retry_ms for part in held]
    retry_ms = None if None in turns else min(t for t in turns if t is not None)
    return ClaimedJobs(jobs, frozenset().union(*(part.held for part in held)), retry_ms)
