"""Clocks: the system clock and a manual one that tests move by hand.

Drivers take an optional ``Clock``. Without one they use the store's own clock (PostgreSQL
``now()``, Redis ``TIME``) so that due-ness and lease expiry are judged by one clock; with one,
they pass its time to the store instead, so a test can move time and expire a lease at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Milliseconds since the Unix epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock epoch milliseconds that never jump: anchored once, then advanced monotonically.

    Moving the system time while a lease is held neither extends nor shortens the lease.
    """

    def __init__(self) -> None:
        self._epoch_ns = time.time_ns()
        self._mono_ns = time.monotonic_ns()

    def now_ms(self) -> int:
        return (self._epoch_ns + time.monotonic_ns() - self._mono_ns) // 1_000_000


class ManualClock:
    """A clock that only moves when told; listeners hear of every move (drivers wake waiters).

    It starts at ``start_ms`` (epoch milliseconds or a timezone-aware datetime), or now.
    """

    def __init__(self, start_ms: int | datetime | None = None) -> None:
        if isinstance(start_ms, datetime):
            start_ms = to_epoch_ms(start_ms, what="a ManualClock's start")
        self._now_ms = start_ms if start_ms is not None else time.time_ns() // 1_000_000
        self._listeners: list[Callable[[], None]] = []

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go backwards")
        self._now_ms += ms
        for listener in list(self._listeners):
            listener()

    def now(self) -> datetime:
        """The clock's time as an aware UTC datetime."""
        return to_datetime(self._now_ms)

    def set(self, when: datetime) -> None:
        """Move forward to ``when`` (timezone-aware; not before the clock's time)."""
        target = to_epoch_ms(when, what="ManualClock.set")
        if target < self._now_ms:
            raise ValueError(
                f"a clock does not go backwards: {when.isoformat()} is before "
                f"{self.now().isoformat()}"
            )
        self.advance(target - self._now_ms)

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each move; returns a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def to_datetime(epoch_ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime, exactly (``fromtimestamp(ms / 1000)``
    goes through a float, which rounds a millisecond away in some years)."""
    return _EPOCH + timedelta(milliseconds=epoch_ms)


def to_epoch_ms(when: datetime, *, what: str = "run_at") -> int:
    if when.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {when.isoformat()}")
    return epoch_ms_of(when)



def epoch_ms_of(when: datetime) -> int:
    """An aware datetime as epoch milliseconds, exactly (floored): no float in between, so
    the same instant always gives the same number (``timestamp() * 1000`` may round a
    millisecond away)."""
    return (when - _EPOCH) // _ONE_MS
