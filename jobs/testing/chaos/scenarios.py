"""Chaos scenarios: a fixed set of work, worker processes killed at random, then the checker.

``kill_workers`` enqueues ``plan.jobs`` jobs and SIGKILLs a random worker every
``plan.kill_every_s`` seconds (0 is the control run: no kills, every job exactly once) until all
are done. ``kill_outbox`` has producers commit orders with outbox entries (every
``plan.rollback_every``-th one rolled back) while processes running a relay and a runner are
killed: every committed order must get exactly one completed job, no rolled-back one any.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loguru import logger
from sqlalchemy import Table, select

from jobs import JobDriver, JobInfo, JobQueue
from jobs.spi.factories import SQLOutboxSite

from .checker import Verdict, check_effects, check_jobs, check_orders
from .effects import EFFECT, EffectsTarget
from .fleet import Fleet, WorkerOptions
from .ledger import Ledger
from .stores import ChaosStore
from .worker import ORDER, WORK


class ChaosTimeoutError(AssertionError):
    """The run did not finish within its deadline (the verdict so far is in the message)."""


@dataclass(frozen=True)
class ChaosPlan:
    workers: int = 3
    jobs: int = 2_000
    kill_every_s: float = 2.0
    options: WorkerOptions = field(default_factory=WorkerOptions)
    producers: int = 4
    rollback_every: int = 5
    deadline_s: float = 240
    seed: int | None = None
    workflows: int = 200
    """The workflow scenario's workflows (``kill_workflows``; ``jobs`` is the others' size)."""


async def _until(
    condition: Callable[[], Awaitable[bool]],
    *,
    deadline: float,
    fleet: Fleet,
    kill_every_s: float,
    what: str,
) -> None:
    """Kill a worker every ``kill_every_s`` until ``condition`` holds (or the deadline)."""
    # the first kill comes early, so a short run still sees one mid-flight
    next_kill = time.monotonic() + kill_every_s / 2 if kill_every_s > 0 else float("inf")
    while not await condition():
        now = time.monotonic()
        if now > deadline:
            raise ChaosTimeoutError(f"chaos: timed out waiting for {what}")
        if now >= next_kill:
            pid = await fleet.kill_one()
            logger.debug("chaos: killed worker {}", pid)
            next_kill = time.monotonic() + kill_every_s
        await asyncio.sleep(0.05)


def open_fleet(store: ChaosStore, plan: ChaosPlan, workdir: Path) -> tuple[Ledger, Fleet]:
    """The run's ledger and its (not yet started) worker fleet, seeded when the plan says."""
    ledger = Ledger(workdir / "ledger.jsonl")
    fleet = Fleet(store, ledger.path, workdir, plan.options)
    if plan.seed is not None:
        fleet.rng.seed(plan.seed)
    return ledger, fleet


async def _run_until(
    done: Callable[[], Awaitable[bool]],
    producing: asyncio.Future[Any],
    fleet: Fleet,
    plan: ChaosPlan,
    deadline: float,
    what: str,
) -> list[int]:
    """Kill workers until ``done``; the producer is cancelled if still going; exit codes."""
    try:
        await _until(done, deadline=deadline, fleet=fleet, kill_every_s=plan.kill_every_s,
                     what=what)  # fmt: skip
    finally:
        if not producing.done():
            producing.cancel()
    await producing
    return await fleet.stop()


async def _idle(driver: JobDriver) -> bool:
    counts = await driver.counts()
    return counts["pending"] == 0 and counts["active"] == 0


async def _infos(driver: JobDriver, ids: set[str]) -> dict[str, JobInfo | None]:
    return {job_id: await driver.get_job(job_id) for job_id in ids}


async def kill_workers(
    store: ChaosStore, plan: ChaosPlan, workdir: Path, effects: EffectsTarget | None = None
) -> Verdict:
    """The SIGKILL soak; with ``effects``, each job's handler commits an effect row there
    (through an inbox, or not: ``EffectsTarget.inbox``), and the verdict counts them."""
    if effects is not None:
        plan = replace(plan, options=replace(plan.options, effects=effects.to_json()))
        await effects.create_table()
    job_type = WORK if effects is None else EFFECT
    ledger, fleet = open_fleet(store, plan, workdir)
    driver = store.open_driver()
    deadline = time.monotonic() + plan.deadline_s
    try:
        await fleet.start(plan.workers)
        queue = JobQueue(driver)
        acknowledged: list[str] = []

        async def produce() -> None:
            # kills start while the jobs are still being enqueued, not after
            for start in range(0, plan.jobs, 100):
                batch = range(start, min(start + 100, plan.jobs))
                enqueues = (queue.enqueue(job_type, {"n": n}) for n in batch)
                ids = await asyncio.gather(*enqueues)
                acknowledged.extend(job_id for job_id in ids if job_id is not None)

        producing = asyncio.create_task(produce())

        async def done() -> bool:
            return producing.done() and await _idle(driver)

        codes = await _run_until(done, producing, fleet, plan, deadline, "every job to finish")
        events = ledger.read()
        starts = {e["job"] for e in events if e["event"] == "start"}
        verdict = check_jobs(
            acknowledged, await _infos(driver, set(acknowledged) | starts), events, fleet.killed
        )
        if effects is not None:
            check_effects(verdict, acknowledged, await effects.effect_counts(), effects.inbox)
        _check_exits(codes, verdict)
        return verdict
    finally:
        await fleet.abandon()
        await driver.close()
        if effects is not None:
            await effects.drop()


async def kill_outbox(store: ChaosStore, plan: ChaosPlan, workdir: Path) -> Verdict:
    ledger, fleet = open_fleet(store, plan, workdir)
    site = store.open_outbox()
    outbox = site.outbox
    driver = store.open_driver(site)
    deadline = time.monotonic() + plan.deadline_s
    committed: list[int] = []
    rolled_back: list[int] = []
    try:
        orders = await store.create_orders_table(site.engine)
        await fleet.start(plan.workers)

        class Rollback(Exception):
            pass

        async def produce(first: int) -> None:
            for order in range(first, plan.jobs, plan.producers):
                try:
                    async with site.transaction() as session:
                        await session.execute(orders.insert().values(id=order))
                        await outbox.append(ORDER, {"order": order})
                        if order % plan.rollback_every == 0:
                            raise Rollback
                except Rollback:
                    rolled_back.append(order)
                else:
                    committed.append(order)

        producing = asyncio.gather(*(produce(first) for first in range(plan.producers)))

        async def done() -> bool:
            if not producing.done():
                return False
            ended = {e["order"] for e in ledger.read() if e["event"] == "end"}
            return ended >= set(committed) and await _idle(driver)

        codes = await _run_until(
            done, producing, fleet, plan, deadline, "every committed order's job"
        )
        events = ledger.read()
        starts = {e["job"] for e in events if e["event"] == "start"}
        verdict = check_orders(
            await _committed_orders(site, orders), rolled_back, await _infos(driver, starts),
            events, fleet.killed,
        )  # fmt: skip
        if set(committed) != await _committed_orders(site, orders):
            verdict.problems.append("the orders table differs from the commits acknowledged")
        _check_exits(codes, verdict)
        return verdict
    finally:
        await fleet.abandon()
        await driver.close()
        await outbox.close()
        await site.close()


async def _committed_orders(site: SQLOutboxSite, orders: Table) -> set[int]:
    async with site.transaction() as session:
        return set((await session.execute(select(orders.c.id))).scalars())


def _check_exits(codes: list[int], verdict: Verdict) -> None:
    for code in codes:
        if code != 0:
            verdict.problems.append(f"a worker asked to stop exited {code}, not 0")
