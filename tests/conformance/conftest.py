"""Driver factories for the conformance suite: each driver package adds one harness here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobs import InProcessJobDriver, JobDriver, ManualClock


class InProcessHarness:
    """One in-memory store: every ``driver()`` call returns the same driver (shared memory)."""

    checks_requests = False

    def __init__(self) -> None:
        self.clock = ManualClock()
        self._driver: InProcessJobDriver | None = None

    async def driver(
        self, *, retain_completed_ms: int | None = None, retain_failed_ms: int | None = None
    ) -> JobDriver:
        if self._driver is None:
            self._driver = InProcessJobDriver(
                clock=self.clock,
                retain_completed_ms=retain_completed_ms,
                retain_failed_ms=retain_failed_ms,
            )
        return self._driver

    async def cleanup(self) -> None:
        if self._driver is not None:
            await self._driver.close()


@pytest.fixture
async def inprocess_harness() -> AsyncIterator[InProcessHarness]:
    harness = InProcessHarness()
    yield harness
    await harness.cleanup()
