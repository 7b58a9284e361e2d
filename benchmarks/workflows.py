"""Workflow rows of ``make bench`` (issue 31), each beside what a user does without workflows.

- Enqueue of a 100-job group with its callback (101 jobs, one ``enqueue_workflow``) beside
  ``enqueue_many`` of 101 plain jobs: what the dependency bookkeeping costs at write time.
- Enqueue of a 10-step chain beside ``enqueue_many`` of 10 plain jobs.
- End-to-end latency of a 3-step chain (``enqueue_workflow`` to the third handler's start) beside
  the same three steps chained by hand, each handler enqueueing the next (what users do today,
  not atomic with the handler's completion).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from jobs import JobDriver, JobHandlerRegistry, JobQueue, JobRunner, JobsSettings, NewJob
from jobs.workflow import chain, group

STEP = "bench.step"
PAYLOAD = {"order_id": 12345, "email": "customer@example.com"}
GROUP_SIZE = 100
CHAIN_LENGTH = 10
LATENCY_STEPS = 3


def _job(n: int) -> NewJob:
    return NewJob(type=STEP, payload={**PAYLOAD, "n": n})


async def _median_ms(call: Callable[[], Awaitable[Any]], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def enqueue_costs(driver: JobDriver, repeats: int = 20) -> tuple[float, float, float, float]:
    """Median ms of: a 100-job group with its callback, 101 plain jobs in one batch, a 10-step
    chain, 10 plain jobs in one batch."""
    queue = JobQueue(driver)

    def grouped() -> Awaitable[str]:
        workflow = group(*(_job(n) for n in range(GROUP_SIZE))).then(_job(GROUP_SIZE))
        return queue.enqueue_workflow(workflow)

    def chained() -> Awaitable[str]:
        return queue.enqueue_workflow(chain(*(_job(n) for n in range(CHAIN_LENGTH))))

    def plain(count: int) -> Callable[[], Awaitable[list[str | None]]]:
        return lambda: queue.enqueue_many(_job(n) for n in range(count))

    return (
        await _median_ms(grouped, repeats),
        await _median_ms(plain(GROUP_SIZE + 1), repeats),
        await _median_ms(chained, repeats),
        await _median_ms(plain(CHAIN_LENGTH), repeats),
    )


async def chain_latency(driver: JobDriver, samples: int) -> tuple[float, float]:
    """Median ms from enqueue to the last step's start: a 3-step chain as a workflow, and the
    same steps chained by hand (each handler enqueues the next)."""
    queue = JobQueue(driver)
    last_started = asyncio.Event()
    by_hand = False

    async def step(payload: dict[str, Any]) -> None:
        n = payload["n"]
        if n == LATENCY_STEPS - 1:
            last_started.set()
        elif by_hand:
            await queue.enqueue(STEP, {**PAYLOAD, "n": n + 1})

    registry = JobHandlerRegistry()
    registry.register(STEP, step)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=10, poll_interval_ms=10_000))
    runner.start()
    try:
        workflow: list[float] = []
        hand_made: list[float] = []
        for _ in range(samples):
            for hand in (False, True):
                by_hand = hand
                last_started.clear()
                started = time.perf_counter()
                if hand:
                    await queue.enqueue(STEP, {**PAYLOAD, "n": 0})
                else:
                    await queue.enqueue_workflow(chain(*(_job(n) for n in range(LATENCY_STEPS))))
                await asyncio.wait_for(last_started.wait(), timeout=30)
                (hand_made if hand else workflow).append((time.perf_counter() - started) * 1000)
        return statistics.median(workflow), statistics.median(hand_made)
    finally:
        await runner.close()
