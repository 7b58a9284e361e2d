"""Backoff: how long a failed attempt waits before the next one."""

from __future__ import annotations

import random
from collections.abc import Callable

Backoff = Callable[[int], int]
"""Attempt number that failed (1 for the first delivery) -> delay in milliseconds."""

DEFAULT_JITTER = 0.15
"""Retries jitter by default: each delay is drawn from ±15 % of the nominal one."""


def exponential_backoff(
    base_ms: int = 1_000,
    cap_ms: int = 30_000,
    jitter: float = DEFAULT_JITTER,
    *,
    rng: Callable[[], float] = random.random,
) -> Backoff:
    """``base_ms`` after the first failure, doubling each time, never above ``cap_ms``.

    With ``jitter`` j (0 <= j <= 1; 0.15 by default) each delay is drawn uniformly from
    [d(1-j), d(1+j)], still capped, so retries of many jobs that failed together spread out
    instead of hitting a recovering service at once. ``jitter=0`` gives the nominal delays;
    ``rng`` (a function returning a float in [0, 1), ``random.random`` by default) is the
    random source, for tests that need known delays (``rng=lambda: 0.5`` is the nominal one).
    """
    if base_ms < 0 or cap_ms < base_ms:
        raise ValueError(f"need 0 <= base_ms <= cap_ms, got base_ms={base_ms} cap_ms={cap_ms}")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter is a fraction between 0 and 1, got {jitter}")

    def delay(attempt: int) -> int:
        exponent = min(max(attempt, 1) - 1, 62)
        nominal = min(cap_ms, base_ms * (1 << exponent))
        if jitter:
            nominal = min(cap_ms, round(nominal * (1 - jitter + 2 * jitter * rng())))
        return int(nominal)

    return delay


DEFAULT_BACKOFF: Backoff = exponential_backoff(1_000, 30_000)
"""The retry delay of a handler without ``backoff=``: 1 s doubling up to 30 s, ±15 %."""
