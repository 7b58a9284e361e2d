"""The workflow checker flags a callback released early or run twice, a chain step run before
its predecessor completed, a lost or rolled-back workflow, and passes a history in order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jobs import JobInfo
from jobs.testing.chaos import CommittedWorkflow, check_workflows

GROUP = ((), (), (0, 1))
"""Two children and their callback (``group(a, b).then(cb)``)."""
CHAIN = ((), (0,))


def job(n: int, step: int, parents: tuple[int, ...] = (), stalls: int = 0) -> JobInfo:
    return JobInfo(
        id=f"w{n}s{step}", type="chaos.step", state="completed",
        payload={"wf": n, "step": step}, attempts=1, max_attempts=3,
        run_at=datetime.now(UTC), stalls=stalls, workflow_id=f"wf{n}",
        depends_on=tuple(f"w{n}s{parent}" for parent in parents),
    )  # fmt: skip


def stored(n: int, shape: tuple[tuple[int, ...], ...]) -> list[JobInfo]:
    return [job(n, step, parents) for step, parents in enumerate(shape)]


def run(event: str, n: int, step: int, pid: int, stalls: int = 0) -> dict[str, Any]:
    return {
        "event": event, "job": f"w{n}s{step}", "attempt": 1, "stalls": stalls, "pid": pid,
        "wf": n, "step": step,
    }  # fmt: skip


def executed(n: int, step: int, pid: int, stalls: int = 0) -> list[dict[str, Any]]:
    return [run("start", n, step, pid, stalls), run("end", n, step, pid, stalls)]


def group_in_order() -> list[dict[str, Any]]:
    return [*executed(1, 0, 10), *executed(1, 1, 11), *executed(1, 2, 10)]


def test_a_group_and_a_chain_in_order_pass() -> None:
    events = [*group_in_order(), *executed(2, 0, 11), *executed(2, 1, 10)]
    committed = [
        CommittedWorkflow(1, GROUP, stored(1, GROUP)),
        CommittedWorkflow(2, CHAIN, stored(2, CHAIN)),
    ]
    verdict = check_workflows(committed, [], events, killed=[])
    assert verdict.ok, verdict.problems
    assert (verdict.workflows, verdict.jobs, verdict.executions) == (2, 5, 5)


def test_a_callback_that_started_before_a_child_completed_is_reported() -> None:
    # child 1 is still running (no end yet) when the callback starts
    events = [
        *executed(1, 0, 10), run("start", 1, 1, 11), *executed(1, 2, 10), run("end", 1, 1, 11)
    ]  # fmt: skip
    verdict = check_workflows([CommittedWorkflow(1, GROUP, stored(1, GROUP))], [], events, [])
    assert not verdict.ok
    assert verdict.problems == [
        "workflow 1's callback (step 2, job w1s2) started (ledger line 4) before its parent "
        "step 1 (job w1s1) finished (line 6)"
    ]


def test_a_callback_started_before_a_killed_childs_rerun_is_reported() -> None:
    # child 1's first run was killed, the callback started, then child 1 ran again
    events = [
        *executed(1, 0, 10), run("start", 1, 1, 11), *executed(1, 2, 10),
        *executed(1, 1, 12, stalls=1),
    ]  # fmt: skip
    infos = stored(1, GROUP)
    infos[1] = job(1, 1, stalls=1)
    verdict = check_workflows([CommittedWorkflow(1, GROUP, infos)], [], events, killed=[11])
    assert any("callback (step 2, job w1s2) started" in p for p in verdict.problems)


def test_a_callback_that_ran_twice_without_a_kill_is_reported() -> None:
    events = [*group_in_order(), *executed(1, 2, 11, stalls=1)]
    infos = stored(1, GROUP)
    infos[2] = job(1, 2, (0, 1), stalls=1)
    verdict = check_workflows([CommittedWorkflow(1, GROUP, infos)], [], events, killed=[])
    assert not verdict.ok
    assert (verdict.duplicates, verdict.callback_duplicates) == (1, 1)
    assert any(
        p.startswith("workflow 1's callback (step 2, job w1s2): attempt 1 ran in pid 10, which "
                     "was not killed")
        for p in verdict.problems
    )  # fmt: skip


def test_a_callback_run_again_after_its_runner_was_killed_is_explained() -> None:
    events = [*executed(1, 0, 10), *executed(1, 1, 11), run("start", 1, 2, 10),
              *executed(1, 2, 11, stalls=1)]  # fmt: skip
    infos = stored(1, GROUP)
    infos[2] = job(1, 2, (0, 1), stalls=1)
    verdict = check_workflows([CommittedWorkflow(1, GROUP, infos)], [], events, killed=[10])
    assert verdict.ok, verdict.problems
    assert (verdict.duplicates, verdict.callback_duplicates, verdict.executions) == (1, 1, 4)


def test_a_chain_step_before_its_predecessor_finished_is_reported() -> None:
    events = [run("start", 2, 0, 10), *executed(2, 1, 11), run("end", 2, 0, 10)]
    verdict = check_workflows([CommittedWorkflow(2, CHAIN, stored(2, CHAIN))], [], events, [])
    assert any("step (step 1, job w2s1) started" in p for p in verdict.problems)


def test_a_job_of_a_rolled_back_workflow_that_ran_is_reported_and_unexpected() -> None:
    events = [*executed(1, 0, 10)]
    verdict = check_workflows([], [1], events, killed=[])
    assert verdict.unexpected == 1
    assert verdict.problems == ["workflow 1 rolled back, yet a job of it ran"]


def test_an_unfinished_or_missing_job_of_a_committed_workflow_is_lost() -> None:
    infos = stored(1, GROUP)
    infos[2] = replace(infos[2], state="cancelled")
    committed = [CommittedWorkflow(1, GROUP, infos), CommittedWorkflow(2, CHAIN, None)]
    events = [*executed(1, 0, 10), *executed(1, 1, 10)]
    verdict = check_workflows(committed, [], events, killed=[])
    assert verdict.lost == 3
    assert verdict.lost_jobs == [
        "workflow 1's callback (step 2, job w1s2): cancelled after 1/3 attempts and 0/10 stalls",
        "workflow 2: not in the store (2 jobs)",
    ]


def test_a_stored_edge_that_differs_from_the_shape_is_reported() -> None:
    infos = stored(1, GROUP)
    infos[2] = job(1, 2, (0,))  # the store forgot the edge from child 1
    verdict = check_workflows([CommittedWorkflow(1, GROUP, infos)], [], group_in_order(), [])
    assert verdict.problems == [
        "workflow 1's callback (step 2, job w1s2): the store runs it after steps [0], built "
        "after [0, 1]"
    ]
