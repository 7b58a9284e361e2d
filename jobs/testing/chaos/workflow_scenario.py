"""The workflow scenario: ``plan.workflows`` workflows (``shapes``) run while workers are killed.

Producers enqueue the workflows with ``JobQueue.enqueue_workflow``; on a store with an outbox
(``ChaosStore.outbox_url``) every odd-numbered one is written through it instead
(``append_workflow``, in a transaction that also inserts the workflow's row in an orders
table), and those whose number is a multiple of ``plan.rollback_every`` roll back. The worker
processes run a runner and, with an outbox, a relay; a random one is SIGKILLed every
``plan.kill_every_s`` until every step of every committed workflow ended in the ledger. Then
``check_workflows`` holds the ledger and the store against the shapes as built.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy import Table, select

from jobs import JobInfo, JobQueue
from jobs.spi import SQLOutboxSite, outbox_workflow_id
from jobs.workflow import Workflow

from .checker import Verdict
from .fleet import Fleet
from .scenarios import ChaosPlan, ChaosTimeoutError, _check_exits, _idle, _run_until, open_fleet
from .shapes import build_workflow, shape_of
from .stores import ChaosStore
from .workflow_checker import CommittedWorkflow, check_workflows

__all__ = ["kill_workflows"]


@runtime_checkable
class WorkflowOutbox(Protocol):
    """An outbox store that writes a workflow into the open transaction (the SQL one does)."""

    async def append_workflow(
        self, workflow: Workflow, *, key: str | None = None
    ) -> str | None: ...


class _Rollback(Exception):
    pass


@dataclass
class _Producers:
    """What the producers committed: each workflow's number and id; the rolled-back ones."""

    plan: ChaosPlan
    queue: JobQueue
    site: SQLOutboxSite | None
    orders: Table | None
    committed: dict[int, str] = field(default_factory=dict)
    rolled_back: list[int] = field(default_factory=list)
    through_outbox: set[int] = field(default_factory=set)

    async def run(self) -> None:
        await asyncio.gather(*(self._produce(first) for first in range(self.plan.producers)))

    async def _produce(self, first: int) -> None:
        for n in range(first, self.plan.workflows, self.plan.producers):
            if self.site is not None and n % 2 == 1:
                await self._append(n, self.site)
            else:
                self.committed[n] = await self.queue.enqueue_workflow(build_workflow(n))

    async def _append(self, n: int, site: SQLOutboxSite) -> None:
        outbox, orders = site.outbox, self.orders
        if not isinstance(outbox, WorkflowOutbox) or orders is None:
            raise TypeError(f"chaos: {type(outbox).__name__} has no append_workflow")
        try:
            async with site.transaction() as session:
                await session.execute(orders.insert().values(id=n))
                entry_id = await outbox.append_workflow(build_workflow(n))
                if n % self.plan.rollback_every == 0:
                    raise _Rollback
        except _Rollback:
            self.rolled_back.append(n)
        else:
            assert entry_id is not None  # unkeyed: never a duplicate
            self.through_outbox.add(n)
            self.committed[n] = outbox_workflow_id(entry_id)

    def steps(self) -> set[tuple[int, int]]:
        """Every (workflow, step) that must end."""
        return {(n, step) for n in self.committed for step in range(len(shape_of(n)))}


async def kill_workflows(store: ChaosStore, plan: ChaosPlan, workdir: Path) -> Verdict:
    ledger, fleet = open_fleet(store, plan, workdir)
    site = store.open_outbox() if store.outbox_url is not None else None
    driver = store.open_driver(site)
    queue = JobQueue(driver)
    deadline = time.monotonic() + plan.deadline_s
    try:
        orders = None if site is None else await store.create_orders_table(site.engine)
        producers = _Producers(plan, queue, site, orders)
        await fleet.start(plan.workers)
        producing = asyncio.ensure_future(producers.run())

        async def done() -> bool:
            if not producing.done() or not await _idle(driver):
                return False
            ended = {(e["wf"], e["step"]) for e in ledger.read() if e["event"] == "end"}
            if ended >= producers.steps():
                return True
            # a job that will never run (cancelled, failed: a breach) must end the wait with
            # a verdict, not a timeout: done when every workflow is stored and none running
            return await _all_settled(queue, producers.committed)

        codes, timed_out = await _wait(done, producing, fleet, plan, deadline)
        committed = [
            CommittedWorkflow(n, shape_of(n).parents, await _stored(queue, workflow_id))
            for n, workflow_id in sorted(producers.committed.items())
        ]
        verdict = check_workflows(committed, producers.rolled_back, ledger.read(), fleet.killed)
        if site is not None and orders is not None:
            rows = await _rows(site, orders)
            if producers.through_outbox != rows:
                verdict.problems.append("the orders table differs from the commits acknowledged")
        if timed_out is not None:
            verdict.problems.append(f"{timed_out} (the verdict is of the store as it was left)")
        _check_exits(codes, verdict)
        return verdict
    finally:
        await fleet.abandon()
        await driver.close()
        if site is not None:
            await site.outbox.close()
            await site.close()


async def _wait(
    done: Callable[[], Awaitable[bool]],
    producing: asyncio.Future[None],
    fleet: Fleet,
    plan: ChaosPlan,
    deadline: float,
) -> tuple[list[int], str | None]:
    """Kill workers until ``done``; the workers' exit codes, and what timed out, if it did:
    a callback never released (the breach this scenario is for) still gets a verdict, whose
    lost jobs say where each was left."""
    try:
        codes = await _run_until(
            done, producing, fleet, plan, deadline, "every committed workflow's jobs"
        )
    except ChaosTimeoutError as timeout:
        with contextlib.suppress(asyncio.CancelledError):
            await producing
        return await fleet.stop(), str(timeout)
    return codes, None


async def _all_settled(queue: JobQueue, committed: dict[int, str]) -> bool:
    """Every committed workflow is stored (the relay handed it over) and none is running;
    the outbox's first (the last handed over), to stop at the first that is not."""
    order = sorted(committed, key=lambda n: (n % 2 == 0, -n))
    for n in order:
        info = await queue.get_workflow(committed[n])
        if info is None or info.state == "running":
            return False
    return True


async def _stored(queue: JobQueue, workflow_id: str) -> list[JobInfo] | None:
    info = await queue.get_workflow(workflow_id)
    return None if info is None else info.jobs


async def _rows(site: SQLOutboxSite, orders: Table) -> set[int]:
    async with site.transaction() as session:
        return set((await session.execute(select(orders.c.id))).scalars())
