"""The in-process store's record of claims made under fleet-wide limits (``jobs.spi.limits``):
per limit key, each claim's time and the lease it gave, counted as ``LimitUsage``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from .spi.limits import FleetLimit, LimitUsage

__all__ = ["LimitLedger"]

Holds = Callable[[str, str], bool]
"""Whether job ``id`` still holds lease ``token`` (active, the lease live)."""


class LimitLedger:
    """Claims by key, oldest first: (claimed at, job id, lease token)."""

    def __init__(self) -> None:
        self._claims: dict[str, deque[tuple[int, str, str]]] = {}

    def usage(self, key: str, limit: FleetLimit, now: int, holds: Holds) -> LimitUsage:
        """What ``key`` counts now; claims neither held nor in the window are dropped."""
        claims = self._claims.get(key)
        if not claims:
            return LimitUsage()
        since = now - limit.per_ms
        kept = deque(claim for claim in claims if claim[0] > since or holds(claim[1], claim[2]))
        self._claims[key] = kept
        held = sum(1 for _, job_id, token in kept if holds(job_id, token))
        window = [at for at, _, _ in kept if at > since] if limit.rate is not None else []
        return LimitUsage(held, len(window), min(window, default=None))

    def record(self, keys: Iterable[str], at: int, job_id: str, token: str) -> None:
        for key in keys:
            self._claims.setdefault(key, deque()).append((at, job_id, token))
