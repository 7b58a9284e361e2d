"""Shared by the scheduler processes and the tests that start them: clocks, stores, the protocol.

Every process reads one simulated time, so that three (or five) schedulers on separate
processes ask for the same occurrence at the same moment without waiting for a real minute
boundary. The test picks the instant and sends it to all of them at once ("go START ANCHOR"):
from then on, simulated time is ``START + (real epoch ms - ANCHOR) * rate``. The drivers (the
store's clock in production) read that time; each scheduler may read it with a skew, as app
servers' clocks disagree in production.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.stores import StoreTarget

REPO_ROOT = Path(__file__).resolve().parents[3]
JOB_TYPE = "report.minutely"
# A fixed instant far from the real clock: keys are predictable and nothing else collides.
SIMULATED_START = int(datetime(2031, 1, 1, tzinfo=UTC).timestamp() * 1000)


def real_ms() -> int:
    return time.time_ns() // 1_000_000


class SimulatedClock:
    """Real time until ``begin()``; then ``start + (real - anchor) * rate``, plus ``skew_ms``."""

    def __init__(self, *, rate: float = 1.0, skew_ms: int = 0) -> None:
        self.rate = rate
        self.skew_ms = skew_ms
        self._start: int | None = None
        self._anchor = 0

    def begin(self, start_ms: int, anchor_ms: int) -> None:
        self._start, self._anchor = start_ms, anchor_ms

    def skewed(self, skew_ms: int) -> SimulatedClock:
        """Another view of the same time, ``skew_ms`` ahead (a server whose clock is off)."""
        other = SimulatedClock(rate=self.rate, skew_ms=skew_ms)
        other._start, other._anchor = self._start, self._anchor
        return other

    def now_ms(self) -> int:
        if self._start is None:
            return real_ms()
        return self._start + int((real_ms() - self._anchor) * self.rate) + self.skew_ms


@dataclass(frozen=True)
class ProcessOptions:
    """What a scheduler process is told on its command line (as JSON)."""

    store: StoreTarget
    cron: str = "* * * * *"
    rate: float = 1.0
    skew_ms: int = 0
    interval_ms: int = 300
    catch_up_ms: int = 60_000

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "store": asdict(self.store)})

    @classmethod
    def from_json(cls, text: str) -> ProcessOptions:
        data = json.loads(text)
        return cls(**{**data, "store": StoreTarget(**data["store"])})

