"""Workflows on the SQL job store, where the conformance suite (``WorkflowConformance``) cannot
reach: parents settling at once from two stores, a lease that expired too often, the inbox's
completion in the app's transaction, the prune's sweep, the edges left behind, the upgrade of
a table made before workflows, and the plain job's hot path."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from jobs import InProcessJobDriver
from jobs.errors import DriverError, StoreSchemaError
from jobs.spi import JobRequest, WorkflowJob, stalled_error, workflow_cancelled_error
from jobs.testing.helpers import ALL, LEASE_MS, info_of
from jobs.testing.requests import new_request
from orm_sqlalchemy.engine import create_engine, create_sync_engine
from orm_sqlalchemy.store import SQLAlchemyJobStore

from .support import StoreHarness

ROUNDS = 12


def _named(name: str, **fields: object) -> JobRequest:
    return new_request(payload={"name": name}, **fields)


async def _group_with_callback(
    store: SQLAlchemyJobStore, workflow_id: str, parents: int
) -> tuple[list[str], str]:
    """``parents`` jobs, then one that runs after all of them; (the parents' ids, its id)."""
    requests = [_named(f"p{index}") for index in range(parents)]
    callback = _named("callback")
    await store.enqueue_workflow(
        workflow_id,
        [
            *(WorkflowJob(request=request) for request in requests),
            WorkflowJob(request=callback, depends_on=tuple(request.id for request in requests)),
        ],
    )
    return [request.id for request in requests], callback.id


async def _edges(harness: StoreHarness) -> int:
    rows = await harness.sql(f'SELECT count(*) FROM "{harness.prefix}edges"')
    return int(rows[0][0])


async def test_two_parents_settling_at_once_from_two_stores_release_the_child_once(
    pg_harness: StoreHarness,
) -> None:
    """Each parent's settle is its own transaction on its own connection: they meet on the
    child's row, and the second counts down from what the first left (never both at 1)."""
    first, second = pg_harness.store(), pg_harness.store()
    await first.create_schema()
    for round_ in range(ROUNDS):
        parents, callback = await _group_with_callback(first, f"wf-{round_}", 2)
        claimed = {job.id: job for job in await first.claim(10, LEASE_MS, ALL)}
        assert set(claimed) == set(parents)
        settled = await asyncio.gather(
            first.complete(parents[0], claimed[parents[0]].lease_token),
            second.complete(parents[1], claimed[parents[1]].lease_token),
        )
        assert settled == [True, True]
        (job,) = await first.claim(10, LEASE_MS, ALL)
        assert job.id == callback
        assert set(job.depends_on) == set(parents)
        assert await first.claim(10, LEASE_MS, ALL) == []
        assert await first.complete(job.id, job.lease_token)
    assert await _edges(pg_harness) == 0


async def test_many_parents_settling_at_once_count_their_child_down_to_zero_once(
    pg_harness: StoreHarness,
) -> None:
    """30 parents of one job completed at once from three stores (each its own connection
    and transaction): every decrement lands on the row the one before left."""
    stores = [pg_harness.store() for _ in range(3)]
    await stores[0].create_schema()
    for round_ in range(3):
        parents, callback = await _group_with_callback(stores[0], f"wf-{round_}", 30)
        claimed = {job.id: job for job in await stores[0].claim(100, LEASE_MS, ALL)}
        assert set(claimed) == set(parents)
        settled = await asyncio.gather(
            *(
                stores[index % 3].complete(job_id, claimed[job_id].lease_token)
                for index, job_id in enumerate(parents)
            )
        )
        assert settled == [True] * 30
        (job,) = await stores[1].claim(100, LEASE_MS, ALL)
        assert job.id == callback
        assert await stores[1].complete(job.id, job.lease_token)
    assert await _edges(pg_harness) == 0


async def test_a_parent_failing_while_another_completes_cancels_the_child_once(
    pg_harness: StoreHarness,
) -> None:
    first, second = pg_harness.store(), pg_harness.store()
    await first.create_schema()
    for round_ in range(ROUNDS):
        parents, callback = await _group_with_callback(first, f"wf-{round_}", 2)
        claimed = {job.id: job for job in await first.claim(10, LEASE_MS, ALL)}
        await asyncio.gather(
            first.fail(parents[0], claimed[parents[0]].lease_token, error="E: no"),
            second.complete(parents[1], claimed[parents[1]].lease_token),
        )
        info = await info_of(first, callback)
        assert info.state == "cancelled"
        assert info.last_error == workflow_cancelled_error(parents[0], "t", "failed")
        assert len(info.errors) == 1
        assert await first.claim(10, LEASE_MS, ALL) == []
    assert await _edges(pg_harness) == 0


async def test_parents_sharing_dependents_settle_at_once_without_a_deadlock(
    pg_harness: StoreHarness,
) -> None:
    """Three parents, each two of them parents of one of three jobs: settles meeting on the
    shared dependents lock them in one order (a circular wait would fail one after
    deadlock_timeout); every dependent comes due once."""
    stores = [pg_harness.store() for _ in range(3)]
    await stores[0].create_schema()
    for round_ in range(ROUNDS):
        parents = [_named(f"p{index}") for index in range(3)]
        ids = [parent.id for parent in parents]
        children = [_named(f"c{index}") for index in range(3)]
        pairs = [(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[0])]
        await stores[0].enqueue_workflow(
            f"wf-{round_}",
            [
                *(WorkflowJob(request=parent) for parent in parents),
                *(
                    WorkflowJob(request=child, depends_on=pair)
                    for child, pair in zip(children, pairs, strict=True)
                ),
            ],
        )
        claimed = {job.id: job for job in await stores[0].claim(10, LEASE_MS, ALL)}
        assert set(claimed) == set(ids)
        async with asyncio.timeout(5):
            settled = await asyncio.gather(
                *(
                    store.complete(job_id, claimed[job_id].lease_token)
                    for store, job_id in zip(stores, ids, strict=True)
                )
            )
        assert settled == [True, True, True]
        due = await stores[0].claim(10, LEASE_MS, ALL)
        assert sorted(job.id for job in due) == sorted(child.id for child in children)
        for job in due:
            assert await stores[0].complete(job.id, job.lease_token)
    assert await _edges(pg_harness) == 0


async def test_a_plain_jobs_lease_token_is_unmarked_and_a_workflow_jobs_marked(
    harness: StoreHarness,
) -> None:
    """The mark picks the settle statement: a plain job's complete stays the one statement it
    was (``finish``); only a workflow job's settles dependents."""
    store = harness.store()
    plain = await store.enqueue(new_request())
    parents, _ = await _group_with_callback(store, "wf", 1)
    tokens = {job.id: job.lease_token for job in await store.claim(10, LEASE_MS, ALL)}
    assert "w" not in tokens[plain]
    assert "w" in tokens[parents[0]]


async def test_a_batch_of_plain_and_workflow_completions_settles_each(
    harness: StoreHarness,
) -> None:
    """complete_many with plain jobs and both parents of one job (the runner's coalesced
    completes): the plain ones in their statement, the parents with their dependent."""
    store = harness.store()
    plain = [await store.enqueue(new_request()) for _ in range(2)]
    parents, callback = await _group_with_callback(store, "wf", 2)
    tokens = {job.id: job.lease_token for job in await store.claim(10, LEASE_MS, ALL)}
    batch = [(job_id, tokens[job_id]) for job_id in (plain[0], parents[0], plain[1], parents[1])]
    assert await store.complete_many(batch, ['"p0"', '"a"', '"p1"', '"b"']) == [True] * 4
    (job,) = await store.claim(10, LEASE_MS, ALL)
    assert job.id == callback
    assert (await info_of(store, parents[1])).result == "b"
    assert await _edges(harness) == 0


async def test_a_workflow_job_failed_by_the_claim_for_stalling_cancels_its_dependents(
    harness: StoreHarness,
) -> None:
    store = harness.store()
    parent = _named("parent", max_stalls=0)
    child, after = _named("child"), _named("after")
    await store.enqueue_workflow(
        "wf",
        [
            WorkflowJob(request=parent),
            WorkflowJob(request=child, depends_on=(parent.id,)),
            WorkflowJob(request=after, depends_on=(parent.id,), continue_after=(parent.id,)),
        ],
    )
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [parent.id]
    harness.clock.advance(LEASE_MS + 1)  # the lease expires: its one stall too many
    assert await store.claim(10, LEASE_MS, ALL) == []  # fails it, then settles its dependents
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [after.id]
    failed = await info_of(store, parent.id)
    assert (failed.state, failed.last_error) == ("failed", stalled_error(1, 0))
    assert [(e.attempt, e.error) for e in failed.errors] == [(1, stalled_error(1, 0))]
    info = await info_of(store, child.id)
    assert info.state == "cancelled"
    assert info.last_error == workflow_cancelled_error(parent.id, "t", "failed")
    assert await _edges(harness) == 0


async def test_a_crash_between_the_claim_and_the_stall_failure_fails_it_at_the_next_claim(
    harness: StoreHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim leases a workflow job past its max_stalls, and the failure is written with its
    dependents' settle, in one step: a process that dies between the two leaves the parent
    leased (not failed with its dependents still waiting), and a claim after the lease fails
    it and cancels them together."""
    store = harness.store()
    parent = _named("parent", max_stalls=0)
    child = _named("child")
    await store.enqueue_workflow(
        "wf", [WorkflowJob(request=parent), WorkflowJob(request=child, depends_on=(parent.id,))]
    )
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [parent.id]
    harness.clock.advance(LEASE_MS + 1)

    async def crashed(row: object) -> None:
        return None

    with monkeypatch.context() as patch:
        patch.setattr(store, "_fail_stalled_workflow_job", crashed)
        assert await store.claim(10, LEASE_MS, ALL) == []
    assert (await info_of(store, parent.id)).state == "active"
    assert (await info_of(store, child.id)).state == "pending"
    harness.clock.advance(LEASE_MS + 1)
    assert await store.claim(10, LEASE_MS, ALL) == []
    assert (await info_of(store, parent.id)).state == "failed"
    assert (await info_of(store, child.id)).state == "cancelled"
    assert await _edges(harness) == 0


async def test_the_prune_sweep_settles_a_parent_a_crash_left_unsettled(
    harness: StoreHarness,
) -> None:
    """A parent finished behind the store's back (by hand, or by a version that settled a
    stall failure's dependents after its claim): the prune's sweep settles its dependents."""
    store = harness.store()
    parents, callback = await _group_with_callback(store, "wf", 1)
    await harness.sql("UPDATE {table} SET state = 'completed', due_at = NULL WHERE id = :id",
                      id=parents[0])  # fmt: skip
    assert await store.claim(10, LEASE_MS, ALL) == []
    await store.prune()
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [callback]
    assert await _edges(harness) == 0


async def test_purging_pending_parents_cancels_their_dependents(harness: StoreHarness) -> None:
    store = harness.store()
    parents = [_named("p1"), _named("p2")]
    callback = new_request("other", payload={"name": "callback"})
    await store.enqueue_workflow(
        "wf",
        [
            *(WorkflowJob(request=parent) for parent in parents),
            WorkflowJob(request=callback, depends_on=tuple(parent.id for parent in parents)),
        ],
    )
    assert await store.purge(["pending"], job_type="t") == 2
    info = await info_of(store, callback.id)
    assert info.state == "cancelled"
    assert info.last_error is not None
    assert "ended deleted" in info.last_error
    assert await _edges(harness) == 0


async def test_completing_in_the_apps_transaction_releases_the_child_with_it(
    harness: StoreHarness,
) -> None:
    """The inbox's ``complete_in``: the child comes due when the app's transaction commits,
    and not when it rolls back."""
    store = harness.store()
    parents, callback = await _group_with_callback(store, "wf", 1)
    (job,) = await store.claim(10, LEASE_MS, ALL)
    engine = create_engine(harness.url)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            assert await store.complete_in(connection, job.id, job.lease_token, '"r"')
            await transaction.rollback()
        assert await store.claim(10, LEASE_MS, ALL) == []
        async with engine.begin() as connection:
            assert await store.complete_in(connection, job.id, job.lease_token, '"r"')
    finally:
        await engine.dispose()
    (child,) = await store.claim(10, LEASE_MS, ALL)
    assert child.id == callback
    assert (await info_of(store, parents[0])).result == "r"


async def test_completing_in_the_apps_sync_transaction_releases_the_child_with_it(
    harness: StoreHarness,
) -> None:
    """``complete_in_sync`` (a ``def`` handler's thread, with an inbox): the same, through a
    sync connection of the app's (sqlite3, psycopg)."""
    store = harness.store()
    parents, callback = await _group_with_callback(store, "wf", 1)
    (job,) = await store.claim(10, LEASE_MS, ALL)
    engine = create_sync_engine(harness.url)

    def complete(commit: bool) -> bool:
        with engine.connect() as connection, connection.begin() as transaction:
            completed = store.complete_in_sync(connection, job.id, job.lease_token)
            if not commit:
                transaction.rollback()
            return completed

    try:
        assert await asyncio.to_thread(complete, False)
        assert await store.claim(10, LEASE_MS, ALL) == []
        assert await asyncio.to_thread(complete, True)
    finally:
        engine.dispose()
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [callback]
    assert (await info_of(store, parents[0])).state == "completed"


async def test_a_table_made_before_workflows_is_upgraded_by_create_schema(
    harness: StoreHarness,
) -> None:
    old = harness.store()
    before = await old.enqueue(new_request())
    await old.close()
    await harness.sql(f'DROP TABLE "{harness.prefix}edges"')
    await harness.sql(f'DROP INDEX "ix_{harness.table}_workflow"')
    for column in ("workflow_id", "workflow_seq", "depends_on", "waiting"):
        await harness.sql(f"ALTER TABLE {{table}} DROP COLUMN {column}")
    unmigrated = harness.store(create_tables=False)
    with pytest.raises(StoreSchemaError, match=r"has no column 'workflow_id'.*ALTER TABLE"):
        await unmigrated.get_job(before)
    store = harness.store()
    await store.create_schema()
    info = await info_of(store, before)
    assert (info.workflow_id, info.depends_on) == (None, ())
    parents, callback = await _group_with_callback(store, "wf", 1)
    (job,) = [job for job in await store.claim(10, LEASE_MS, ALL) if job.id != before]
    assert job.id == parents[0]
    assert await store.complete(job.id, job.lease_token)
    assert [job.id for job in await store.claim(10, LEASE_MS, ALL)] == [callback]


async def test_a_store_that_creates_no_tables_requires_the_edges_table(
    harness: StoreHarness,
) -> None:
    """Cancel, delete and purge settle dependents through it: a schema under migrations that
    lacks it is refused up front, naming it, not at an operator's first cancel."""
    await harness.store().create_schema()
    await harness.sql(f'DROP TABLE "{harness.prefix}edges"')
    with pytest.raises(StoreSchemaError, match=f"{harness.prefix}edges' does not exist"):
        await harness.store(create_tables=False).check_schema()


async def test_a_workflow_refused_by_the_database_stores_nothing(harness: StoreHarness) -> None:
    """A job id that exists already fails the whole workflow (one transaction)."""
    store = harness.store()
    taken = await store.enqueue(new_request())
    assert taken is not None
    first = _named("first")
    clash = JobRequest(id=taken, type="t", payload=json.dumps({"name": "clash"}), max_attempts=3)
    with pytest.raises(DriverError):
        await store.enqueue_workflow(
            "wf", [WorkflowJob(request=first), WorkflowJob(request=clash, depends_on=(first.id,))]
        )
    assert await store.get_job(first.id) is None
    assert await store.workflow_jobs("wf") == []
    assert await _edges(harness) == 0


@pytest.mark.parametrize("seed", range(16))
async def test_random_dags_settle_as_on_the_in_process_driver(
    harness: StoreHarness, seed: int
) -> None:
    """The in-process driver as the model: the same DAG (random edges and on_failure), the
    same random completes, fails, abandoned leases (a stall, or a stall failure past
    max_stalls), cancels, deletes and purges, and after each step the same jobs are claimable
    and every job is in the same state (a cancelled one by a WorkflowCancelled error,
    whichever of its parents it names). A claim that fails a workflow job for stalling settles
    its dependents in the statement after it on SQL, in the same step in process: the two
    claims of a round are compared together."""
    rng = random.Random(seed)
    store = harness.store()
    model = InProcessJobDriver(clock=harness.clock)
    requests = [_named(f"j{index}", max_stalls=rng.randint(0, 1)) for index in range(8)]
    jobs = []
    for index, request in enumerate(requests):
        parents = tuple(p.id for p in rng.sample(requests[:index], k=min(index, rng.randint(0, 3))))
        proceed = tuple(parent for parent in parents if rng.random() < 0.3)
        jobs.append(WorkflowJob(request=request, depends_on=parents, continue_after=proceed))
    drivers = (store, model)
    for driver in drivers:
        await driver.enqueue_workflow(f"wf-{seed}", jobs)
    for _ in range(14):
        held = [await _claim_twice(driver) for driver in drivers]
        assert set(held[0]) == set(held[1])
        if held[0] and rng.random() < 0.2:
            harness.clock.advance(LEASE_MS + 1)  # the leases expire: stalls
        else:
            for job_id in sorted(held[0]):
                complete = rng.random() < 0.7
                for driver, leased in zip(drivers, held, strict=True):
                    await _settle(driver, job_id, leased[job_id].lease_token, complete=complete)
        await _operate(rng, drivers, seed)
        assert await _states(store, seed) == await _states(model, seed)
    await model.close()


async def _claim_twice(driver: Any) -> dict[str, Any]:
    held = {job.id: job for job in await driver.claim(100, LEASE_MS, ALL)}
    held.update({job.id: job for job in await driver.claim(100, LEASE_MS, ALL)})
    return held


async def _settle(driver: Any, job_id: str, token: str, *, complete: bool) -> None:
    if complete:
        assert await driver.complete(job_id, token)
    else:
        assert await driver.fail(job_id, token, error="E: no")


async def _operate(rng: random.Random, drivers: tuple[Any, Any], seed: int) -> None:
    """Now and then an operator's cancel or delete of a pending job, or a purge of them all."""
    states = await _states(drivers[1], seed)
    pending = sorted(job_id for job_id, state, _ in states if state == "pending")
    if pending and rng.random() < 0.3:
        target = rng.choice(pending)
        operation = rng.choice(("cancel", "delete"))
        for driver in drivers:
            assert await getattr(driver, operation)(target)
    elif pending and rng.random() < 0.05:
        counts = [await driver.purge(["pending"]) for driver in drivers]
        assert counts[0] == counts[1]


async def _states(driver: Any, seed: int) -> list[tuple[str, str, bool]]:
    return [
        (job.id, job.state, (job.last_error or "").startswith("WorkflowCancelled"))
        for job in await driver.workflow_jobs(f"wf-{seed}")
    ]
