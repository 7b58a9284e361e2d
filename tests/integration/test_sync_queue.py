"""SyncJobQueue: the producer for code with no event loop, on every durable driver.

Threads enqueue at once as a threaded server's would; each job is stored once; the queue
closes cleanly and leaves no thread behind.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import (
    InProcessJobDriver,
    JobQueue,
    NewJob,
    PayloadError,
    SyncJobQueue,
)
from jobs.telemetry import parse_traceparent
from tests.stores import StoreTarget

DURABLE = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]
THREADS = 16
PER_THREAD = 25


@pytest.fixture(params=DURABLE)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreTarget]:
    store = StoreTarget.fresh(request.param, tmp_path)
    yield store
    asyncio.run(store.drop())


def sync_queue(target: StoreTarget) -> SyncJobQueue:
    """From the URL, as a Flask app would make it."""
    if target.kind == "redis":
        return SyncJobQueue(target.url, namespace=target.namespace)
    return SyncJobQueue(target.url, table_prefix=target.namespace)


def test_threads_enqueue_at_once_and_every_job_is_stored_once(target: StoreTarget) -> None:
    with sync_queue(target) as queue:

        def produce(worker: int) -> list[str | None]:
            ids = []
            for n in range(PER_THREAD):
                ids.append(queue.enqueue("sync.job", {"worker": worker, "n": n}))
                # Every thread also asks for the same few keys: one job each.
                ids.append(queue.enqueue("sync.keyed", {"worker": worker}, key=f"k{n % 5}"))
            return ids

        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(produce, range(THREADS)))
        plain = [job_id for ids in results for job_id in ids[0::2]]
        keyed = [job_id for ids in results for job_id in ids[1::2] if job_id is not None]
        assert None not in plain
        assert len(set(plain)) == THREADS * PER_THREAD
        assert len(set(keyed)) == len(keyed) == 5
        stats = queue.stats()
        assert stats["sync.job"].due == THREADS * PER_THREAD
        assert stats["sync.keyed"].due == 5
        for job_id in plain[:: PER_THREAD]:
            info = queue.get_job(job_id)
            assert info is not None
            assert info.type == "sync.job"
            assert info.state == "pending"


def test_the_operations_read_through_it(target: StoreTarget) -> None:
    with sync_queue(target) as queue:
        ids = queue.enqueue_many([NewJob(type="ops.a", payload={"n": n}) for n in range(3)])
        keyed = queue.enqueue("ops.b", {"n": 9}, key="the-key", delay_ms=60_000)
        assert keyed is not None
        page = queue.list_jobs(type="ops.a", limit=2)
        assert len(page.jobs) == 2
        assert page.next_cursor is not None
        rest = queue.list_jobs(type="ops.a", limit=2, cursor=page.next_cursor)
        assert {job.id for job in [*page.jobs, *rest.jobs]} == set(ids)
        found = queue.find_job(key="the-key")
        assert found is not None
        assert found.id == keyed
        assert queue.stats()["ops.b"].scheduled == 1
        assert queue.workers() == []
        assert queue.cancel(keyed)
        assert queue.get_job(keyed).state == "cancelled"  # type: ignore[union-attr]
        assert queue.delete(keyed)
        assert queue.get_job(keyed) is None


def test_bad_input_raises_as_the_async_queue_does_and_stores_nothing(tmp_path: Path) -> None:
    with SyncJobQueue(InProcessJobDriver()) as queue:
        with pytest.raises(PayloadError, match=r"payload\[\"at\"\]"):
            queue.enqueue("t", {"at": {1, 2}})
        with pytest.raises(ValueError, match="delay_ms"):
            queue.enqueue("t", {}, delay_ms=-5)
        assert queue.stats() == {}


def test_close_is_idempotent_leaves_no_thread_and_refuses_later_calls(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    queue = SyncJobQueue(f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}")
    queue.enqueue("t", {})
    queue.close()
    queue.close()
    assert set(threading.enumerate()) <= before
    with pytest.raises(RuntimeError, match="is closed"):
        queue.enqueue("t", {})


def test_an_unknown_url_is_a_value_error_naming_the_accepted_schemes() -> None:
    with pytest.raises(ValueError, match=r"SyncJobQueue: .*'mysql'.*redis://"):
        SyncJobQueue("mysql://db/app")


def test_the_job_carries_the_calling_threads_trace_context(
    span_exporter: InMemorySpanExporter,
) -> None:
    driver = InProcessJobDriver()
    with SyncJobQueue(driver) as queue:
        with trace.get_tracer("test").start_as_current_span("GET /invoice") as span:
            job_id = queue.enqueue("traced", {})
        assert job_id is not None
        info = queue.get_job(job_id)
    assert info is not None
    carried = parse_traceparent(info.trace_context)
    assert carried is not None
    assert carried.trace_id == span.get_span_context().trace_id
    (enqueue,) = [s for s in span_exporter.get_finished_spans() if s.name == "jobs.enqueue traced"]
    assert enqueue.parent is not None
    assert enqueue.parent.span_id == span.get_span_context().span_id


async def test_queue_sync_on_a_running_loop_runs_the_calls_of_threads_on_that_loop() -> None:
    """A FastAPI app: the queue lives on the app's loop; sync routes run in threads."""
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    loops: list[asyncio.AbstractEventLoop] = []
    real_enqueue = driver.enqueue

    async def enqueue_seen(request):  # type: ignore[no-untyped-def]
        loops.append(asyncio.get_running_loop())
        return await real_enqueue(request)

    driver.enqueue = enqueue_seen  # type: ignore[method-assign]
    sync = queue.sync()
    job_id = await asyncio.to_thread(sync.enqueue, "from.thread", {"n": 1})
    assert loops == [asyncio.get_running_loop()]
    assert (await queue.get_job(job_id or "")) is not None
    with pytest.raises(RuntimeError, match="its own event loop"):
        sync.enqueue("on.the.loop", {})
    await asyncio.to_thread(sync.close)  # borrowed: the driver stays open
    assert await queue.enqueue("still.open", {}) is not None
    await driver.close()


OPERATIONS = [
    "enqueue", "enqueue_many", "get_job", "find_job", "list_jobs", "stats", "workers", "retry",
    "retry_failed", "cancel", "delete", "purge",
]  # fmt: skip


@pytest.mark.parametrize("name", OPERATIONS)
def test_the_methods_take_the_async_queues_parameters(name: str) -> None:
    """A parameter added to JobQueue fails here until SyncJobQueue takes it too."""
    ours = inspect.signature(getattr(SyncJobQueue, name)).parameters
    theirs = inspect.signature(getattr(JobQueue, name)).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]
