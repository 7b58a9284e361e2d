"""A relay or a worker in a process of its own, exporting its spans to a file (JSON lines).

``python -m tests.integration.outbox.traced_process --role relay|worker --outbox-url URL
--prefix P --jobs TARGET_JSON --spans FILE --count N``: the relay publishes the outbox's
entries to the job store until ``N`` are published; the worker runs ``order.placed`` jobs until
``N`` have completed. Either exits 0 then, having flushed its spans.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from jobs import (
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobsSettings,
    OutboxRelay,
)
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from tests.stores import StoreTarget

DEADLINE_S = 60.0


async def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def relay(args: argparse.Namespace, target: StoreTarget) -> None:
    engine = create_engine(args.outbox_url)
    outbox = SQLAlchemyOutboxStore(
        transaction_manager=SQLAlchemyTransactionManager(engine), table_prefix=args.prefix
    )
    driver = target.open()
    relaying = OutboxRelay(outbox, JobOutboxPublisher(JobQueue(driver)), poll_interval_ms=50)
    relaying.start()
    try:
        await wait_for(lambda: relaying.stats["published"] >= args.count, "the entries")
    finally:
        await relaying.close()
        await outbox.close()
        await driver.close()
        await engine.dispose()


async def work(args: argparse.Namespace, target: StoreTarget) -> None:
    driver = target.open()
    registry = JobHandlerRegistry()

    async def send_email(payload: Any) -> None: ...

    registry.register("order.placed", send_email)
    runner = JobRunner(driver, registry, JobsSettings(poll_interval_ms=50))
    runner.start()
    try:
        await wait_for(lambda: runner.stats["completed"] >= args.count, "the jobs")
    finally:
        await runner.close()
        await driver.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("relay", "worker"), required=True)
    parser.add_argument("--outbox-url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--jobs", required=True, help="the job store, a StoreTarget as JSON")
    parser.add_argument("--spans", required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args(argv)
    provider = TracerProvider()
    with open(args.spans, "w", encoding="utf-8") as spans:
        provider.add_span_processor(
            SimpleSpanProcessor(
                ConsoleSpanExporter(out=spans, formatter=lambda span: span.to_json(None) + "\n")
            )
        )
        trace.set_tracer_provider(provider)
        target = StoreTarget.from_json(args.jobs)
        asyncio.run(relay(args, target) if args.role == "relay" else work(args, target))
        provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
