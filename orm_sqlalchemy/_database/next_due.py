"""The next due time a claim found, kept for the wait that follows it.

An idle runner claims, finds fewer jobs than it asked for, and waits until a wake-up or until
the next job of its types is due. On PostgreSQL the claim statement answers that "when" too
(the jobs it left: ``claim_next_due`` in ``sql/jobs_postgresql.sql``), so the wait needs no
``next_due`` statement of its own: one round trip fewer per job when jobs come one at a time.
While claims of the types take all they ask (a drain, where no wait follows), the plain
``claim`` runs instead: a full batch of 10 took 15-25% longer through the larger statement,
its look-up unrun (planning it).

The answer holds only while nothing changed since the claim's snapshot. Whatever can make a
job due sooner wakes the store's waiters: this store's enqueues, retries and requeues, another
store's by NOTIFY (sent after its commit, so heard after a claim that did not see it started),
a lost LISTEN connection, an injected ManualClock moving. So a watch, a waiter of the
claim's types, is registered before the claim is sent; the wait after it waits on that watch, and
returns at once if it was set meanwhile (the caller claims again). Completes, heartbeats and
cancels wake no one: they only make the next job due later, so the kept time may come early
(a lease that ended in a complete), which costs one empty claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

from .wakeup import Waiters

_Key = tuple[str, frozenset[str]]  # the claim's queue and types

__all__ = ["Kept", "NextDue"]


@dataclass(slots=True, frozen=True)
class Kept:
    """What a claim left for the wait after it."""

    watch: asyncio.Event  # a waiter of the claim's types, registered before it was sent
    due_at: float | None  # loop time the next job of those types is due; None: none is

    def due_in_s(self, timeout_s: float) -> float:
        """How long the wait may last: ``timeout_s`` capped by the next due time."""
        if self.due_at is None:
            return timeout_s
        return min(timeout_s, self.due_at - asyncio.get_running_loop().time())


class NextDue:
    """The latest claim's answer for each set of job types, until a wait takes it."""

    def __init__(self, waiters: Waiters) -> None:
        self._waiters = waiters
        self._kept: dict[_Key, Kept] = {}
        self._draining: set[_Key] = set()

    def watch(self, types: Collection[str], queue: str = "default") -> asyncio.Event | None:
        """Register, before a claim of ``types`` is sent, what wakes the wait after it; None
        (the plain claim, no answer wanted) when the last claim of them took all it asked."""
        if (queue, frozenset(types)) in self._draining:
            return None
        return self._waiters.register(types)

    def claimed(self, types: Collection[str], *, took_all: bool, queue: str = "default") -> None:
        """Whether a claim of ``types`` took all it asked (the next one is then plain)."""
        if took_all:
            self._draining.add((queue, frozenset(types)))
        else:
            self._draining.discard((queue, frozenset(types)))

    def keep(
        self,
        types: Collection[str],
        watch: asyncio.Event,
        due_in_ms: int | None,
        queue: str = "default",
    ) -> None:
        """Keep a claim's answer (``due_in_ms``: the next job due in; None: none is), in
        place of an earlier claim's."""
        due_at = None
        if due_in_ms is not None:
            due_at = asyncio.get_running_loop().time() + due_in_ms / 1000
        self._replace((queue, frozenset(types)), Kept(watch, due_at))

    def drop(self, watch: asyncio.Event) -> None:
        """The claim it was for gave no answer (it failed, or took as many jobs as asked)."""
        self._waiters.unregister(watch)

    def take(self, types: Collection[str], queue: str = "default") -> Kept | None:
        """The latest claim's answer for ``types`` in ``queue``, for one wait: it then owns the
        watch (and unregisters it); None when there is none."""
        return self._kept.pop((queue, frozenset(types)), None)

    def clear(self) -> None:
        for kept in self._kept.values():
            self._waiters.unregister(kept.watch)
        self._kept.clear()

    def _replace(self, key: _Key, kept: Kept) -> None:
        earlier = self._kept.pop(key, None)
        if earlier is not None:
            self._waiters.unregister(earlier.watch)
        self._kept[key] = kept
