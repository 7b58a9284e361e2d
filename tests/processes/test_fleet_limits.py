"""Fleet-wide limits across real worker processes (issue 30, item 4), on every durable store:
four workers, a type limited to 3 at once and 20 a second (``ledger.limited``), and an
unlimited type beside it (``ledger.free``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobs import JobDriver, JobQueue, NewJob
from tests.processes.conftest import SpawnWorker, read_ledger
from tests.stores import STORE_KINDS, StoreTarget
from tests.support import wait_until

WORKERS = 4
LIMITED = 60
FREE = 1_000
DELIVERY_SLACK_S = 0.05
"""A start is written by the handler, a few milliseconds after the claim the store counted
(the job crosses the worker's event loop first, and four workers share two cores), so starts
are counted in windows this much shorter than the limit's second."""


@pytest.fixture(
    params=[
        pytest.param(*kind.values, id=kind.id, marks=[*kind.marks, pytest.mark.slow])
        if kind.id != "postgres"
        else kind
        for kind in STORE_KINDS
    ]
)
async def store_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreTarget]:
    """As the suite's ``store_target``, with PostgreSQL alone in ``make test`` (the other
    stores in ``make test-all``: each run takes some 20 s of worker start-up and draining)."""
    url = request.getfixturevalue("pgbouncer").url if request.param == "pgbouncer" else None
    target = StoreTarget.fresh(request.param, tmp_path, url=url)
    yield target
    await target.drop()


async def _completed(driver: JobDriver, job_type: str) -> int:
    stats = await driver.stats()
    return stats[job_type].completed if job_type in stats else 0


def _most_at_once(entries: list[dict[str, Any]]) -> int:
    """The most limited jobs whose handler ran at once: a start is written after the claim
    and an end before the settle, so each interval lies inside the job's hold."""
    events = sorted((e["at"], 1 if e["event"] == "start" else -1) for e in entries)
    running = most = 0
    for _, step in sorted(events, key=lambda ev: (ev[0], ev[1])):
        running += step
        most = max(most, running)
    return most


def _most_in_a_window(starts: list[float], window_s: float) -> int:
    starts = sorted(starts)
    most = 0
    first = 0
    for last, at in enumerate(starts):
        while at - starts[first] >= window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


async def test_four_workers_keep_a_types_global_concurrency_and_rate_while_others_drain(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    queue = JobQueue(driver)
    try:
        await asyncio.gather(*(spawn_worker(store_target, ledger) for _ in range(WORKERS)))
        began = time.monotonic()
        await queue.enqueue_many(
            [NewJob(type="ledger.free", payload={"n": n}) for n in range(FREE)]
        )
        await wait_until(
            lambda: _done(driver, "ledger.free", FREE), timeout=60, message="free jobs alone"
        )
        alone_s = time.monotonic() - began

        await queue.enqueue_many(
            [NewJob(type="ledger.limited", payload={"ms": 40}) for _ in range(LIMITED)]
        )
        began = time.monotonic()
        await queue.enqueue_many(
            [NewJob(type="ledger.free", payload={"n": n}) for n in range(FREE)]
        )
        await wait_until(
            lambda: _done(driver, "ledger.free", 2 * FREE), timeout=60, message="free jobs"
        )
        beside_s = time.monotonic() - began
        limited_by_then = await _completed(driver, "ledger.limited")
        await wait_until(
            lambda: _done(driver, "ledger.limited", LIMITED), timeout=60, message="limited jobs"
        )
    finally:
        await driver.close()

    entries = read_ledger(ledger)
    starts = [e["at"] for e in entries if e["event"] == "start"]
    print(
        f"{store_target.kind}: at once {_most_at_once(entries)}, in a window "
        f"{_most_in_a_window(starts, 1.0 - DELIVERY_SLACK_S)} (in a full second "
        f"{_most_in_a_window(starts, 1.0)}), limited over "
        f"{max(starts) - min(starts):.2f} s; {FREE} free alone {alone_s:.2f} s, beside "
        f"{beside_s:.2f} s"
    )
    assert len(starts) == LIMITED, "each limited job ran once"
    assert _most_at_once(entries) <= 3
    assert _most_at_once(entries) == 3, "the limit is a limit, not a queue of one"
    assert _most_in_a_window(starts, 1.0 - DELIVERY_SLACK_S) <= 20
    span_s = max(starts) - min(starts)
    assert span_s >= (LIMITED - 20) / 20 - DELIVERY_SLACK_S, "20 a second at most, overall"
    # The unlimited type is not held behind the limited one: it drains at about the speed it
    # drains alone, long before the limited jobs (2 s at 20/s) are done.
    assert limited_by_then < LIMITED
    assert beside_s <= 2 * alone_s + 1.0, (beside_s, alone_s)


def _free() -> list[NewJob]:
    return [NewJob(type="ledger.free", payload={"n": n}) for n in range(FREE)]


async def _done(driver: JobDriver, job_type: str, count: int) -> bool:
    return await _completed(driver, job_type) >= count
