"""The overview's throughput chart reads the store's outcome counters: a purge of every
finished job leaves the last hour's bars as they were."""

from __future__ import annotations

import re
from typing import Any

from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner
from jobs.web import create_dashboard
from tests.support import wait_until

from .conftest import client_for


async def test_the_chart_survives_a_purge() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    registry = JobHandlerRegistry()

    async def works(payload: Any) -> None:
        return None

    async def breaks(payload: Any) -> None:
        raise RuntimeError("no")

    registry.register("c.ok", works)
    registry.register("c.bad", breaks, max_attempts=1)
    runner = JobRunner(driver, registry)
    for n in range(3):
        await queue.enqueue("c.ok", {"n": n})
    await queue.enqueue("c.bad", {})
    runner.start()

    async def settled() -> bool:
        stats = await queue.stats()
        return "c.ok" in stats and stats["c.ok"].completed == 3 and stats["c.bad"].failed == 1

    await wait_until(settled, message="the runner to settle the jobs")
    await runner.close()  # hands its counts to the store
    assert await queue.purge(("completed", "failed")) == 4
    await queue.enqueue("c.ok", {"n": 9}, delay_ms=60_000)  # the type listed again, by a job
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get("/")
    assert 'data-testid="throughput-completed">3<' in page.text
    assert 'data-testid="throughput-failed">1<' in page.text
    runtime = re.search(
        r'<tr data-type="c.ok">.*?data-column="runtime">([^<]*)<', page.text, re.S
    )
    assert runtime is not None
    assert runtime.group(1) == "≤ 10 ms / ≤ 10 ms"  # no-op runs: the first bucket
