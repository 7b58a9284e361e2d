"""Workflows on every driver that stores them (``jobs.spi.WorkflowStore``, optional: a driver
without it skips these): a job comes due only in the atomic step that settles its last parent;
a parent that fails for good or is cancelled cancels its dependents (reason naming it) unless
the edge continues; a workflow is stored whole or not at all."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from jobs.context import JobContext
from jobs.errors import DriverError
from jobs.handlers import JobHandlerRegistry
from jobs.new_job import NewJob
from jobs.options import DEFAULT_QUEUE
from jobs.queue import JobQueue
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import WorkflowJob, WorkflowStore
from jobs.workflow import Workflow, chain, group

from .helpers import ALL, LEASE_MS, info_of, wait_until
from .requests import new_request

if TYPE_CHECKING:
    from .helpers import DriverHarness

_DEADLINE_S = 10.0


async def _workflow_driver(harness: DriverHarness) -> Any:
    driver = await harness.driver()
    if not isinstance(driver, WorkflowStore):
        pytest.skip("this driver stores no workflows (jobs.spi.WorkflowStore is optional)")
    return driver


def _job(name: str) -> NewJob:
    return NewJob(type=ALL[0], payload={"name": name})


async def _claimable(driver: Any) -> list[Any]:
    return list(await driver.claim(100, LEASE_MS, ALL))


async def _ids_by_name(driver: Any, workflow_ids: list[str]) -> dict[str, str]:
    names = {}
    for job_id in workflow_ids:
        info = await info_of(driver, job_id)
        names[info.payload["name"]] = job_id
    return names


async def _stored(driver: Any, queue: JobQueue, workflow: Workflow) -> dict[str, str]:
    """Enqueue ``workflow``; its jobs' ids by name (read back through list_jobs)."""
    workflow_id = await queue.enqueue_workflow(workflow)
    page = await driver.list_jobs(limit=200)
    ids = [job.id for job in page.jobs if job.workflow_id == workflow_id]
    assert len(ids) == len(workflow)
    return await _ids_by_name(driver, ids)


class WorkflowConformance:
    async def test_a_chain_runs_each_job_only_after_the_one_before_completed(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        ids = await _stored(driver, queue, chain(_job("a"), _job("b"), _job("c")))
        info_b = await info_of(driver, ids["b"])
        assert (info_b.state, info_b.depends_on) == ("pending", (ids["a"],))
        assert info_b.workflow_id is not None
        for name, parent in (("a", None), ("b", "a"), ("c", "b")):
            claimed = await _claimable(driver)
            assert [job.id for job in claimed] == [ids[name]], f"only {name} is due"
            assert claimed[0].depends_on == (() if parent is None else (ids[parent],))
            assert await driver.complete(ids[name], claimed[0].lease_token, f'"{name} done"')
        assert await _claimable(driver) == []

    async def test_a_groups_callback_comes_due_with_the_last_childs_settle(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        workflow = group(_job("p1"), _job("p2"), _job("p3")).then(_job("zip"))
        ids = await _stored(driver, queue, workflow)
        claimed = {job.id: job for job in await _claimable(driver)}
        assert set(claimed) == {ids["p1"], ids["p2"], ids["p3"]}
        assert await driver.complete(ids["p1"], claimed[ids["p1"]].lease_token)
        assert await _claimable(driver) == [], "two children still run"
        assert await driver.complete_many(
            [(ids[p], claimed[ids[p]].lease_token) for p in ("p2", "p3")]
        ) == [True, True]
        callback = await _claimable(driver)
        assert [job.id for job in callback] == [ids["zip"]], "due once, with the last settle"
        assert set(callback[0].depends_on) == {ids["p1"], ids["p2"], ids["p3"]}
        assert await _claimable(driver) == []

    async def test_a_job_waiting_for_its_parents_counts_as_neither_due_nor_scheduled(
        self, driver_harness: DriverHarness
    ) -> None:
        """Else a callback waiting on a long group would read as due and stuck (the loss
        auditor's ``due_stuck``) while nothing is wrong."""
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        ids = await _stored(driver, queue, chain(_job("a"), _job("b"), _job("c")))
        await queue.enqueue(ALL[0], {"name": "later"}, delay_ms=3_600_000)
        stats = (await driver.stats())[ALL[0]]
        assert (stats.due, stats.scheduled) == (1, 1), "a is due; b and c wait; one scheduled"
        in_queue = (await driver.queue_stats())[DEFAULT_QUEUE]
        assert (in_queue.due, in_queue.scheduled) == (1, 1), "per queue alike"
        claimed = await _claimable(driver)
        assert [job.id for job in claimed] == [ids["a"]]
        assert await driver.complete(ids["a"], claimed[0].lease_token)
        stats = (await driver.stats())[ALL[0]]
        assert (stats.due, stats.scheduled, stats.completed) == (1, 1, 1), "b came due"

    async def test_a_failed_parent_cancels_its_dependents_down_the_dag(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        workflow = Workflow()
        a = workflow.add(_job("a"))
        b = workflow.add(_job("b"), after=[a])
        workflow.add(_job("c"), after=[b])
        workflow.add(_job("d"), after=[a], on_failure="continue")
        ids = await _stored(driver, queue, workflow)
        (job_a,) = await _claimable(driver)
        assert await driver.fail(ids["a"], job_a.lease_token, error="RuntimeError: no")
        for name in ("b", "c"):
            info = await info_of(driver, ids[name])
            assert info.state == "cancelled", name
            assert info.last_error is not None
        b_error = (await info_of(driver, ids["b"])).last_error
        assert b_error is not None
        assert f"parent job {ids['a']} (t) ended failed" in b_error
        c_error = (await info_of(driver, ids["c"])).last_error
        assert c_error is not None
        assert f"parent job {ids['b']} (t) ended cancelled" in c_error
        assert [job.id for job in await _claimable(driver)] == [ids["d"]], "continue: runs"

    async def test_an_operators_cancel_of_a_parent_cancels_its_dependents(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        ids = await _stored(driver, queue, chain(_job("a"), _job("b")))
        assert await driver.cancel(ids["a"])
        info = await info_of(driver, ids["b"])
        assert info.state == "cancelled"
        assert await _claimable(driver) == []

    async def test_deleting_an_unfinished_parent_cancels_its_dependents(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        ids = await _stored(driver, queue, chain(_job("a"), _job("b"), _job("c")))
        assert await driver.delete(ids["b"])
        info = await info_of(driver, ids["c"])
        assert info.state == "cancelled"
        assert info.last_error is not None
        assert f"parent job {ids['b']} (t) ended deleted" in info.last_error
        (job_a,) = await _claimable(driver)
        assert await driver.complete(ids["a"], job_a.lease_token)
        assert await _claimable(driver) == []

    async def test_get_workflow_lists_its_jobs_in_order_and_cancel_workflow_ends_them(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        queue = JobQueue(driver)
        workflow_id = await queue.enqueue_workflow(chain(_job("a"), _job("b"), _job("c")))
        info = await queue.get_workflow(workflow_id)
        assert info is not None
        assert info.state == "running"
        assert [job.payload["name"] for job in info.jobs] == ["a", "b", "c"]
        (job_a,) = await _claimable(driver)
        assert await driver.complete(job_a.id, job_a.lease_token, '"A"')
        assert await queue.cancel_workflow(workflow_id) == 1, "b; c goes with it"
        info = await queue.get_workflow(workflow_id)
        assert info is not None
        assert [(job.state, job.result) for job in info.jobs] == [
            ("completed", "A"), ("cancelled", None), ("cancelled", None),
        ]  # fmt: skip
        assert info.state == "cancelled"
        assert await queue.get_workflow("no-such-workflow") is None

    async def test_a_refused_workflow_stores_nothing(self, driver_harness: DriverHarness) -> None:
        driver = await _workflow_driver(driver_harness)
        first = new_request(payload={"name": "first"})
        orphan = new_request(payload={"name": "orphan"})
        with pytest.raises(DriverError):
            await driver.enqueue_workflow(
                "wf-1",
                [WorkflowJob(request=first), WorkflowJob(request=orphan, depends_on=("nope",))],
            )
        assert await driver.get_job(first.id) is None
        assert sum((await driver.counts()).values()) == 0

    async def test_handlers_run_in_dependency_order_with_their_parents_results(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _workflow_driver(driver_harness)
        ran: list[tuple[str, dict[str, Any]]] = []

        async def handler(payload: dict[str, str], ctx: JobContext) -> str:
            await asyncio.sleep(0)
            ran.append((payload["name"], dict(ctx.parent_results)))
            return payload["name"].upper()

        registry = JobHandlerRegistry()
        registry.register(ALL[0], handler)
        runner = JobRunner(driver, registry, JobsSettings(concurrency=4, lease_ms=LEASE_MS))
        queue = JobQueue(driver)
        ids = await _stored(driver, queue, group(_job("x"), _job("y")).then(_job("sum")))
        runner.start()
        try:
            await wait_until(
                lambda: _completed(driver, ids["sum"]), timeout=_DEADLINE_S, message="callback"
            )
        finally:
            await runner.close()
        assert sorted(name for name, _ in ran[:2]) == ["x", "y"]
        assert ran[2] == ("sum", {ids["x"]: "X", ids["y"]: "Y"})
        assert len(ran) == 3, "the callback ran once"


async def _completed(driver: Any, job_id: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == "completed"
