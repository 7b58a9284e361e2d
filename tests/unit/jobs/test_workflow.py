"""The workflow builders: what a DAG holds, and what is refused before any write."""

from __future__ import annotations

import pytest

from jobs import InProcessJobDriver, JobQueue, NewJob
from jobs.errors import DriverError
from jobs.workflow import Step, Workflow, WorkflowError, _check_acyclic, chain, group


def _job(name: str, **fields: object) -> NewJob:
    return NewJob(type="t", payload={"name": name}, **fields)  # type: ignore[arg-type]


def test_chain_links_each_job_to_the_one_before() -> None:
    steps = chain(_job("a"), _job("b"), _job("c")).steps()
    assert [step.after for step in steps] == [(), (0,), (1,)]


def test_a_groups_callback_runs_after_every_job_of_the_group() -> None:
    steps = group(_job("a"), _job("b"), _job("c")).then(_job("cb")).steps()
    assert [step.after for step in steps] == [(), (), (), (0, 1, 2)]


def test_then_on_a_chain_follows_its_last_job() -> None:
    steps = chain(_job("a"), _job("b")).then(_job("cb"), on_failure="continue").steps()
    assert steps[-1] == Step(steps[-1].job, (1,), "continue")


def test_a_parent_of_another_workflow_is_refused() -> None:
    other = _job("elsewhere")
    with pytest.raises(WorkflowError, match="not a job of this workflow"):
        Workflow().add(_job("b"), after=[other])


def test_a_job_added_twice_is_refused() -> None:
    workflow = Workflow()
    job = workflow.add(_job("a"))
    with pytest.raises(WorkflowError, match="already"):
        workflow.add(job)


def test_a_cycle_is_refused() -> None:
    a, b = _job("a"), _job("b")
    with pytest.raises(WorkflowError, match="cycle"):
        _check_acyclic([Step(a, (1,)), Step(b, (0,))])


def test_a_keyed_job_and_an_empty_workflow_are_refused() -> None:
    with pytest.raises(WorkflowError, match="has a key"):
        chain(_job("a", key="k")).steps()
    with pytest.raises(WorkflowError, match="at least one job"):
        Workflow().steps()
    with pytest.raises(WorkflowError, match="on_failure"):
        Workflow().add(_job("a"), on_failure="ignore")  # type: ignore[arg-type]


async def test_a_refused_workflow_writes_nothing() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    with pytest.raises(WorkflowError):
        await queue.enqueue_workflow(chain(_job("a"), _job("b", key="k")))
    assert sum((await driver.counts()).values()) == 0


async def test_a_driver_without_workflows_is_refused_before_any_write() -> None:
    class Plain(InProcessJobDriver):
        enqueue_workflow = None  # type: ignore[assignment]

    driver = Plain()
    with pytest.raises(DriverError, match="does not store workflows"):
        await JobQueue(driver).enqueue_workflow(chain(_job("a")))
    assert sum((await driver.counts()).values()) == 0


async def test_a_workflow_stored_under_a_given_id_is_stored_once() -> None:
    """The relay's hand-over of an outbox entry (``workflow_id``): the jobs' ids derive from
    it, so a second store of the same workflow is refused by the driver, not done twice."""
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    assert await queue.enqueue_workflow(chain(_job("a"), _job("b")), workflow_id="wf") == "wf"
    with pytest.raises(DriverError):
        await queue.enqueue_workflow(chain(_job("a"), _job("b")), workflow_id="wf")
    info = await queue.get_workflow("wf")
    assert info is not None
    assert [job.payload["name"] for job in info.jobs] == ["a", "b"]
    assert info.jobs[1].depends_on == (info.jobs[0].id,)
    assert sum((await driver.counts()).values()) == 2
