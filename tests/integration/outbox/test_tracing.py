"""One request, one trace, through the outbox: request span -> outbox.publish -> job span.

On both outbox databases and every job driver (in-process, the SQL job store on the outbox's
database, Redis), through the relay's one-entry path (``publish``: a ``jobs.enqueue`` PRODUCER
span under the publish span) and its batch path (``publish_many``: the job carries the publish
span's context).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from redis.asyncio import Redis

from jobs import (
    InProcessJobDriver,
    JobDriver,
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobsSettings,
    OutboxRelay,
)
from orm_sqlalchemy import SQLAlchemyJobStore, SQLAlchemyTransactionManager
from orm_sqlalchemy.factory import drop_prefixed_tables
from redis_jobs import RedisJobDriver, delete_namespace
from tests.integration.outbox.conftest import OutboxHarness
from tests.stores import REDIS_URL, StoreTarget
from tests.support import wait_until

REPO = Path(__file__).resolve().parents[3]
PROCESS_DEADLINE_S = 90.0
DRIVERS = ["inprocess", "sql", pytest.param("redis", marks=pytest.mark.redis)]


class Drivers:
    """The job driver of one test, removed afterwards."""

    def __init__(self, harness: OutboxHarness) -> None:
        self.harness = harness
        self.namespace = f"trace-{uuid.uuid4().hex[:8]}"
        self.driver: JobDriver | None = None

    async def open(self, kind: str, tm: SQLAlchemyTransactionManager) -> JobDriver:
        if kind == "inprocess":
            self.driver = InProcessJobDriver()
        elif kind == "sql":
            store = SQLAlchemyJobStore(engine=tm.engine, table_prefix=self.harness.prefix)
            await store.create_schema()
            self.driver = store
        else:
            self.driver = RedisJobDriver(url=REDIS_URL, namespace=self.namespace)
        return self.driver

    async def close(self, kind: str) -> None:
        if self.driver is not None:
            await self.driver.close()
        if kind == "redis":
            client = Redis.from_url(REDIS_URL)
            try:
                await delete_namespace(client, self.namespace)
            finally:
                await client.aclose()
        elif kind == "sql" and self.harness.postgres:
            async with self.harness.engine().begin() as conn:
                await drop_prefixed_tables(conn, self.harness.prefix)


@pytest.fixture(params=DRIVERS)
def driver_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def spans_named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_one_trace_from_the_request_through_the_relay_to_the_job(
    harness: OutboxHarness, driver_kind: str, span_exporter: InMemorySpanExporter
) -> None:
    tm = SQLAlchemyTransactionManager(harness.engine())
    outbox = harness.store(tm)
    await harness.setup(outbox)
    drivers = Drivers(harness)
    driver = await drivers.open(driver_kind, tm)
    ran: list[Any] = []

    async def send_email(payload: Any) -> None:
        ran.append(payload)

    registry = JobHandlerRegistry()
    registry.register("order.placed", send_email)
    queue = JobQueue(driver)
    relay = OutboxRelay(outbox, JobOutboxPublisher(queue))
    runner = JobRunner(driver, registry, JobsSettings(poll_interval_ms=100))
    tracer = trace.get_tracer("test")
    try:
        with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER) as one:
            async with tm.transaction():
                await outbox.append("order.placed", {"order": 1})
        assert await relay.relay_once() == 1  # one entry: JobOutboxPublisher.publish
        with tracer.start_as_current_span("POST /orders/bulk", kind=SpanKind.SERVER) as bulk:
            async with tm.transaction():
                for order in (2, 3, 4):
                    await outbox.append("order.placed", {"order": order})
        assert await relay.relay_once() == 3  # a batch: JobOutboxPublisher.publish_many
        runner.start()
        await wait_until(lambda: len(ran) == 4, message="four jobs ran")
        await runner.close()
    finally:
        await runner.close()
        await relay.close()
        await drivers.close(driver_kind)

    one_id, bulk_id = one.get_span_context(), bulk.get_span_context()
    publishes = spans_named(span_exporter, "outbox.publish order.placed")
    enqueues = spans_named(span_exporter, "jobs.enqueue order.placed")
    jobs = spans_named(span_exporter, "jobs.job.order.placed")
    assert len(publishes) == 4
    assert len(jobs) == 4

    # The single entry: request -> outbox.publish -> jobs.enqueue (PRODUCER) -> jobs.job.
    (single,) = [p for p in publishes if p.context.trace_id == one_id.trace_id]
    assert parent_id(single) == one_id.span_id
    (enqueue,) = [e for e in enqueues if e.context.trace_id == one_id.trace_id]
    assert enqueue.kind == SpanKind.PRODUCER
    assert parent_id(enqueue) == single.context.span_id
    (job,) = [j for j in jobs if j.context.trace_id == one_id.trace_id]
    assert job.kind == SpanKind.CONSUMER
    assert parent_id(job) == enqueue.context.span_id

    # The batch: each entry's publish span continues its request; its job is the child.
    batch = [p for p in publishes if p.context.trace_id == bulk_id.trace_id]
    assert [parent_id(p) for p in batch] == [bulk_id.span_id] * 3
    batch_jobs = [j for j in jobs if j.context.trace_id == bulk_id.trace_id]
    assert sorted(parent_id(j) or 0 for j in batch_jobs) == sorted(p.context.span_id for p in batch)
    assert {j.attributes["job.outcome"] for j in jobs} == {"completed"}


async def run_process(*args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.integration.outbox.traced_process", *args,
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), PROCESS_DEADLINE_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(
            f"{args[1]} process did not finish in {PROCESS_DEADLINE_S} s"
        ) from None
    assert process.returncode == 0, output.decode(errors="replace")[-3000:]


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_the_trace_survives_the_stores_when_the_relay_and_the_worker_are_other_processes(
    harness: OutboxHarness, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    tm = SQLAlchemyTransactionManager(harness.engine())
    outbox = harness.store(tm)
    await harness.setup(outbox)
    jobs = StoreTarget.fresh("redis" if harness.postgres else "sqlite", tmp_path)
    tracer = trace.get_tracer("test")
    requests = []
    try:
        for count in (1, 3):
            with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER) as request:
                async with tm.transaction():
                    for n in range(count):
                        await outbox.append("order.placed", {"n": n})
            requests.append(request.get_span_context())
        common = ["--outbox-url", harness.url, "--prefix", harness.prefix, "--jobs"]
        common += [jobs.to_json(), "--count", "4", "--spans"]
        await run_process("--role", "relay", *common, str(tmp_path / "relay.jsonl"))
        await run_process("--role", "worker", *common, str(tmp_path / "worker.jsonl"))
    finally:
        await jobs.drop()

    publishes = read_spans(tmp_path / "relay.jsonl")
    publishes = [s for s in publishes if s["name"] == "outbox.publish order.placed"]
    executions = read_spans(tmp_path / "worker.jsonl")
    executions = [s for s in executions if s["name"] == "jobs.job.order.placed"]
    assert len(publishes) == 4
    assert len(executions) == 4
    request_traces = {f"0x{r.trace_id:032x}": f"0x{r.span_id:016x}" for r in requests}
    for publish in publishes:  # a child of the request that appended the entry
        assert request_traces[publish["context"]["trace_id"]] == publish["parent_id"]
    for execution in executions:  # in the request's trace, from another process
        assert execution["kind"] == "SpanKind.CONSUMER"
        assert execution["context"]["trace_id"] in request_traces
    per_trace = sorted(
        sum(e["context"]["trace_id"] == t for e in executions) for t in request_traces
    )
    assert per_trace == [1, 3]
