"""The in-process store's record of claims made under fleet-wide limits (``jobs.spi.limits``):
per limit key, the claims' times (for a rate) and the leases they gave (for a concurrency),
counted as ``LimitUsage``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from .spi.limits import FleetLimit, LimitUsage

__all__ = ["LimitLedger"]

Holds = Callable[[str, str], bool]
"""Whether job ``id`` still holds lease ``token`` (active, the lease live)."""


class LimitLedger:
    """Per key: claim times, oldest first, and the (job id, lease token) of each claim that may
    still hold its lease. Each count drops what it no longer counts, so a claim costs the
    claims in the window and the leases held, not every claim ever made."""

    def __init__(self) -> None:
        self._starts: dict[str, deque[int]] = {}
        self._holds: dict[str, set[tuple[str, str]]] = {}

    def usage(self, key: str, limit: FleetLimit, now: int, holds: Holds) -> LimitUsage:
        """What ``key`` counts now."""
        held = 0
        leases = self._holds.get(key)
        if leases:
            if limit.concurrency is None:
                leases.clear()
            else:
                leases.difference_update([lease for lease in leases if not holds(*lease)])
                held = len(leases)
        starts = self._starts.get(key)
        if not starts:
            return LimitUsage(held=held)
        if limit.rate is None:
            starts.clear()
            return LimitUsage(held=held)
        since = now - limit.per_ms
        while starts and starts[0] <= since:
            starts.popleft()
        return LimitUsage(held, len(starts), starts[0] if starts else None)

    def record(self, keys: Iterable[str], at: int, job_id: str, token: str) -> None:
        for key in keys:
            self._starts.setdefault(key, deque()).append(at)
            self._holds.setdefault(key, set()).add((job_id, token))
