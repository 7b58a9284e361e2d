"""Sync enqueue (``SyncJobQueue``, called from threads) beside the async enqueue, per driver.

One producer: a thread calling ``enqueue`` one job at a time against a task awaiting
``JobQueue.enqueue`` one at a time. Eight producers: eight threads against eight tasks (a
threaded web server against an async one). Each sync run starts a fresh store, made and warmed
(its table created) before the clock starts, as the async run's is. Target: ratio >= 0.8.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable

from jobs import JobDriver, JobQueue, SyncJobQueue

from .drivers import FACTORIES
from .scenarios import JOB_TYPE, PAYLOAD

PRODUCERS = 8


async def async_rate(driver: JobDriver, n: int, producers: int) -> float:
    """Jobs/s for ``producers`` tasks enqueueing ``n`` jobs between them, one at a time."""
    queue = JobQueue(driver)
    await queue.enqueue("bench.warm", PAYLOAD)
    share = n // producers

    async def produce() -> None:
        for _ in range(share):
            await queue.enqueue(JOB_TYPE, PAYLOAD)

    started = time.perf_counter()
    await asyncio.gather(*(produce() for _ in range(producers)))
    return share * producers / (time.perf_counter() - started)


def sync_rate(driver: JobDriver, n: int, producers: int) -> float:
    """Jobs/s for ``producers`` threads enqueueing ``n`` jobs between them through one
    SyncJobQueue (which owns and closes ``driver``)."""
    with SyncJobQueue(driver) as queue:
        queue.enqueue("bench.warm", PAYLOAD)
        share = n // producers
        gate = threading.Barrier(producers + 1)

        def produce() -> None:
            gate.wait()
            for _ in range(share):
                queue.enqueue(JOB_TYPE, PAYLOAD)

        threads = [threading.Thread(target=produce) for _ in range(producers)]
        for thread in threads:
            thread.start()
        gate.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        return share * producers / (time.perf_counter() - started)


async def sync_enqueue_rows(runs: int, n: int = 2_000) -> None:
    print(f"\nSync enqueue: {n:,} jobs through SyncJobQueue from threads vs JobQueue from tasks "
          f"in the same run, 1 and {PRODUCERS} producers (target: ratio >= 0.80)\n")
    header = ["driver", "async 1", "sync 1", "ratio", f"async {PRODUCERS}", f"sync {PRODUCERS}",
              "ratio"]  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in ("sqlite", "postgres", "redis"):
        try:
            cells: list[str] = []
            for producers in (1, PRODUCERS):
                cells += await _pair(name, n, producers, runs)
        except Exception as exc:  # a missing server must not hide the other rows
            print(f"| {name} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        print("| " + " | ".join([name, *cells]) + " |", flush=True)


async def _pair(name: str, n: int, producers: int, runs: int) -> list[str]:
    asyncs, syncs, ratios = [], [], []
    for _ in range(runs):
        async with FACTORIES[name]() as driver:
            a = await async_rate(driver, n, producers)
        s = await _in_thread(name, lambda driver: sync_rate(driver, n, producers))
        asyncs.append(a)
        syncs.append(s)
        ratios.append(s / a)
    median = statistics.median
    return [f"{median(asyncs):,.0f}", f"{median(syncs):,.0f}", f"{median(ratios):.2f}"]


async def _in_thread(name: str, work: Callable[[JobDriver], float]) -> float:
    """A fresh store of ``name``, used only from the SyncJobQueue's own loop."""
    async with FACTORIES[name]() as driver:
        return await asyncio.to_thread(work, driver)


