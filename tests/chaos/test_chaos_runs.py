"""The shipped chaos kit against the real stores: SIGKILLed workers lose nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jobs.testing.chaos import (
    ChaosPlan,
    ChaosStore,
    EffectsTarget,
    WorkerOptions,
    kill_outbox,
    kill_workers,
    kill_workflows,
)
from tests.stores import POSTGRES_URL, REDIS_URL

SHORT = ChaosPlan(
    workers=2, jobs=200, kill_every_s=1.0, deadline_s=120,
    options=WorkerOptions(lease_ms=2_000, concurrency=4, handler_ms=50),
)  # fmt: skip


def url_of(kind: str, tmp_path: Path) -> str:
    return {
        "sqlite": f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}",
        "postgres": POSTGRES_URL,
        "redis": REDIS_URL,
    }[kind]


KINDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]),
    pytest.param("redis", id="redis", marks=[pytest.mark.redis, pytest.mark.slow]),
]


@pytest.mark.chaos
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", KINDS)
async def test_killed_workers_lose_no_job_and_every_duplicate_is_explained(
    kind: str, tmp_path: Path
) -> None:
    store = ChaosStore.fresh(url_of(kind, tmp_path))
    try:
        verdict = await kill_workers(store, SHORT, tmp_path)
    finally:
        await store.drop()
    assert verdict.problems == []
    assert verdict.kills >= 1
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert verdict.executions >= SHORT.jobs


@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", KINDS)
async def test_without_kills_every_job_runs_exactly_once(kind: str, tmp_path: Path) -> None:
    store = ChaosStore.fresh(url_of(kind, tmp_path))
    try:
        verdict = await kill_workers(store, replace(SHORT, kill_every_s=0), tmp_path)
    finally:
        await store.drop()
    assert verdict.ok, verdict.problems
    assert (verdict.kills, verdict.duplicates, verdict.executions) == (0, 0, SHORT.jobs)


OUTBOX = [
    pytest.param("sqlite", "sqlite", id="sqlite"),
    pytest.param(
        "postgres", "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]
    ),
    pytest.param(
        "postgres", "redis", id="postgres+redis",
        marks=[pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow],
    ),
]  # fmt: skip


@pytest.mark.chaos
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("outbox", "jobs"), OUTBOX)
async def test_every_committed_order_gets_one_job_while_relays_are_killed(
    outbox: str, jobs: str, tmp_path: Path
) -> None:
    store = ChaosStore.fresh(url_of(jobs, tmp_path), url_of(outbox, tmp_path))
    try:
        verdict = await kill_outbox(store, SHORT, tmp_path)
    finally:
        await store.drop()
    assert verdict.problems == []
    assert verdict.kills >= 1
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert verdict.jobs == SHORT.jobs - SHORT.jobs // SHORT.rollback_every


EFFECTS = [
    pytest.param("sqlite", "sqlite", id="sqlite"),  # the jobs on the effects' database
    pytest.param(
        "postgres", "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]
    ),
    pytest.param(
        "redis", "postgres", id="redis+postgres",
        marks=[pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow],
    ),
]  # fmt: skip


@pytest.mark.chaos
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("jobs", "effects"), EFFECTS)
async def test_effects_through_the_inbox_commit_once_while_workers_are_killed(
    jobs: str, effects: str, tmp_path: Path
) -> None:
    """The SIGKILL soak with handlers committing an effect row each through the inbox: the
    executions may repeat (at least once), the effects do not."""
    store = ChaosStore.fresh(url_of(jobs, tmp_path))
    target = EffectsTarget.fresh(url_of(effects, tmp_path), inbox=True)
    try:
        verdict = await kill_workers(store, SHORT, tmp_path, target)
    finally:
        await store.drop()
        await target.drop()
    assert verdict.problems == []
    assert verdict.kills >= 1
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert (verdict.effects, verdict.effect_duplicates) == (SHORT.jobs, 0)


WORKFLOWS = [
    pytest.param("sqlite", "sqlite", id="sqlite"),
    pytest.param(
        "postgres", "postgres", id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]
    ),
    pytest.param(
        "redis", "postgres", id="redis+postgres",
        marks=[pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow],
    ),
]  # fmt: skip
"""The jobs' store, and the outbox's that half of the workflows are appended through."""

SHORT_WORKFLOWS = replace(SHORT, workflows=40)
"""40 workflows of 4 or 5 jobs: about as many jobs as the other short runs."""


@pytest.mark.chaos
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("jobs", "outbox"), WORKFLOWS)
async def test_workflows_run_in_order_and_lose_nothing_while_workers_are_killed(
    jobs: str, outbox: str, tmp_path: Path
) -> None:
    """Chains and groups with callbacks, enqueued or appended through the outbox (some
    transactions rolled back), while workers and relays are SIGKILLed: every job of every
    committed workflow completes, each after its parents, none of a rolled-back one runs."""
    store = ChaosStore.fresh(url_of(jobs, tmp_path), url_of(outbox, tmp_path))
    try:
        verdict = await kill_workflows(store, SHORT_WORKFLOWS, tmp_path)
    finally:
        await store.drop()
    assert verdict.problems == []
    assert verdict.kills >= 1
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    rolled_back = len(range(5, SHORT_WORKFLOWS.workflows, 10))  # odd multiples of 5
    assert verdict.workflows == SHORT_WORKFLOWS.workflows - rolled_back
    assert verdict.executions >= verdict.jobs


FULL_WORKFLOWS = ChaosPlan(workers=3, kill_every_s=0.5, workflows=200)
"""``make chaos``'s workflow run: 200 workflows, a worker killed every half second."""


@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("jobs", "outbox"), WORKFLOWS)
async def test_200_workflows_run_in_order_and_lose_nothing_while_workers_are_killed(
    jobs: str, outbox: str, tmp_path: Path
) -> None:
    store = ChaosStore.fresh(url_of(jobs, tmp_path), url_of(outbox, tmp_path))
    try:
        verdict = await kill_workflows(store, FULL_WORKFLOWS, tmp_path)
    finally:
        await store.drop()
    assert verdict.problems == []
    assert verdict.kills >= 1
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert verdict.workflows == 200 - len(range(5, 200, 10))


@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", KINDS)
async def test_workflows_enqueued_without_kills_run_each_job_exactly_once(
    kind: str, tmp_path: Path
) -> None:
    """The control: enqueue_workflow only, nobody killed: every job, callbacks included, ran
    once."""
    store = ChaosStore.fresh(url_of(kind, tmp_path))
    try:
        verdict = await kill_workflows(store, replace(SHORT_WORKFLOWS, kill_every_s=0), tmp_path)
    finally:
        await store.drop()
    assert verdict.ok, verdict.problems
    assert (verdict.kills, verdict.duplicates) == (0, 0)
    assert verdict.executions == verdict.jobs
