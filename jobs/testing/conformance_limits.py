"""Conformance: a handler's ``concurrency`` (issue 30): never more attempts of its type at once
in one runner, the runner's other slots left to other types, and no attempt spent on a job a
claim brought beyond the type's room (it is handed back, due now, at no cost).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings

from .helpers import LEASE_MS, enqueue, info_of, wait_until

if TYPE_CHECKING:
    from .helpers import DriverHarness

_DEADLINE_S = 10.0


class _Slow:
    """A handler held by ``gate``, counting how many of its jobs run at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.running = 0
        self.most = 0
        self.done = 0

    async def run(self, payload: Any) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()
        finally:
            self.running -= 1
        self.done += 1


class LimitsConformance:
    """A type's ``concurrency`` bounds it in one runner; other types use the free slots."""

    async def test_a_type_runs_at_most_its_concurrency_and_others_use_the_free_slots(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        slow = _Slow()
        fast_done: list[int] = []

        async def fast(payload: Any) -> None:
            fast_done.append(payload["n"])

        registry = JobHandlerRegistry()
        registry.register("slow", slow.run, concurrency=2)
        registry.register("fast", fast)
        slow_ids = [await enqueue(driver, "slow", payload={"n": n}) for n in range(6)]
        for n in range(4):
            await enqueue(driver, "fast", payload={"n": n})
        settings = JobsSettings(concurrency=5, lease_ms=LEASE_MS, heartbeat_ms=40)
        runner = JobRunner(driver, registry, settings)
        runner.start()
        try:
            await wait_until(
                lambda: len(fast_done) == 4 and slow.running == 2,
                timeout=_DEADLINE_S,
                message="every fast job done beside two slow ones",
            )
            assert slow.most == 2
            slow.gate.set()
            await wait_until(
                lambda: slow.done == 6, timeout=_DEADLINE_S, message="every slow job done"
            )
        finally:
            slow.gate.set()
            await runner.close()
        assert slow.most == 2, f"{slow.most} slow jobs ran at once"
        for job_id in slow_ids:
            info = await info_of(driver, job_id)
            assert (info.state, info.attempts) == ("completed", 1), "a hand-back costs nothing"
