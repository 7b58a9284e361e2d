"""The checker flags each breach it names, and passes a history that keeps the rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobs import JobInfo
from jobs.testing.chaos import check_jobs, check_orders


def info(job_id: str, attempts: int, state: str = "completed", stalls: int = 0) -> JobInfo:
    return JobInfo(
        id=job_id, type="chaos.work", state=state, payload=None,  # type: ignore[arg-type]
        attempts=attempts, max_attempts=3, run_at=datetime.now(UTC), stalls=stalls,
    )  # fmt: skip


def start(job: str, attempt: int, pid: int, stalls: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "event": "start", "job": job, "attempt": attempt, "stalls": stalls, "pid": pid, **extra
    }  # fmt: skip


def test_a_clean_history_passes() -> None:
    events = [start("a", 1, 10), start("b", 1, 11)]
    verdict = check_jobs(["a", "b"], {"a": info("a", 1), "b": info("b", 1)}, events, killed=[])
    assert verdict.ok
    assert verdict.as_row()["executions"] == 2


def test_a_job_that_did_not_complete_is_lost() -> None:
    infos = {"a": info("a", 1), "b": info("b", 1, state="pending"), "c": None}
    verdict = check_jobs(["a", "b", "c"], infos, [start("a", 1, 10)], killed=[])
    assert verdict.lost == 2
    assert not verdict.ok
    assert verdict.lost_jobs == [
        "job b: pending after 1/3 attempts and 0/10 stalls",
        "job c: not in the store",
    ]


def test_an_execution_of_a_job_nobody_enqueued_is_unexpected() -> None:
    events = [start("a", 1, 10), start("ghost", 1, 10)]
    verdict = check_jobs(["a"], {"a": info("a", 1)}, events, killed=[])
    assert verdict.unexpected == 1


def test_a_duplicate_after_a_kill_of_its_runner_is_explained() -> None:
    events = [start("a", 1, 10), start("a", 1, 11, stalls=1)]
    verdict = check_jobs(["a"], {"a": info("a", 1, stalls=1)}, events, killed=[10])
    assert verdict.ok
    assert (verdict.duplicates, verdict.stalls) == (1, 1)


def test_a_duplicate_whose_runner_was_not_killed_is_unexplained() -> None:
    events = [start("a", 1, 10), start("a", 1, 11, stalls=1)]
    verdict = check_jobs(["a"], {"a": info("a", 1, stalls=1)}, events, killed=[12])
    assert verdict.unexplained == 1
    assert "pid 10" in verdict.problems[0]


def test_one_delivery_run_twice_is_unexplained() -> None:
    events = [start("a", 1, 10), start("a", 1, 11)]
    verdict = check_jobs(["a"], {"a": info("a", 1, stalls=1)}, events, killed=[10])
    assert any("one delivery ran twice" in p for p in verdict.problems)


def test_a_kill_that_spent_an_attempt_is_unexplained() -> None:
    events = [start("a", 1, 10), start("a", 2, 11)]
    verdict = check_jobs(["a"], {"a": info("a", 2, stalls=1)}, events, killed=[10])
    assert any("spent 2 attempts" in p for p in verdict.problems)


def test_a_run_again_without_a_stall_is_unexplained() -> None:
    events = [start("a", 1, 10), start("a", 1, 11, stalls=1)]
    verdict = check_jobs(["a"], {"a": info("a", 1, stalls=0)}, events, killed=[10])
    assert any("ran 2 times with 0 stall(s)" in p for p in verdict.problems)


def test_store_attempts_must_match_the_last_execution() -> None:
    verdict = check_jobs(["a"], {"a": info("a", 3)}, [start("a", 1, 10)], killed=[9])
    assert any("counts 3 attempts" in p for p in verdict.problems)


def test_without_kills_every_claim_must_have_run() -> None:
    verdict = check_jobs(["a"], {"a": info("a", 2)}, [start("a", 2, 10)], killed=[])
    assert any("2 claims, 1 executions" in p for p in verdict.problems)


def test_orders_each_committed_one_gets_exactly_one_job() -> None:
    events = [start("j1", 1, 10, order=1), start("j2", 1, 10, order=2)]
    infos = {"j1": info("j1", 1), "j2": info("j2", 1)}
    assert check_orders([1, 2], [3], infos, events, killed=[]).ok

    two_jobs = [*events, start("j3", 1, 10, order=2)]
    verdict = check_orders([1, 2], [3], {**infos, "j3": info("j3", 1)}, two_jobs, killed=[])
    assert any("order 2 has 2 jobs" in p for p in verdict.problems)


def test_orders_a_rolled_back_order_must_not_run_and_a_committed_one_must() -> None:
    events = [start("j1", 1, 10, order=1), start("j3", 1, 10, order=3)]
    infos = {"j1": info("j1", 1), "j3": info("j3", 1)}
    verdict = check_orders([1, 2], [3], infos, events, killed=[])
    assert verdict.lost == 1  # order 2 never ran
    assert verdict.lost_jobs == ["order 2: no job ran"]
    assert verdict.unexpected == 1  # order 3 rolled back, yet ran
    assert any("order 3 rolled back" in p for p in verdict.problems)
