"""Place orders (some rolled back on purpose), relay their outbox entries to jobs, send emails,
shut down in the documented order, and print a summary that checks the guarantee."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from loguru import logger
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from framework import ApplicationBuilder, ApplicationContext
from jobs import JOB_DRIVER, JOB_RUNNER, OUTBOX_RELAY, JobsAutoConfiguration
from jobs.logs import enable_logging
from redis_jobs import delete_namespace

from .app import orders_configuration
from .model import Base
from .services import OrderRejectedError, OrderService


async def run(
    database_url: str, redis_url: str | None, orders: int, redis_namespace: str | None = None
) -> dict[str, object]:
    namespace = redis_namespace or f"orders-example-{uuid.uuid4().hex[:8]}"
    config = orders_configuration(database_url, redis_url, namespace)
    context = await ApplicationBuilder([JobsAutoConfiguration, config]).run()
    try:
        return {**await _place_and_deliver(context, orders), "redis_namespace": namespace}
    finally:
        await context.close()  # closes the stores and the engine, after the steps below
        if redis_url is not None and redis_namespace is None:
            await _delete_demo_namespace(redis_url, namespace)


async def _delete_demo_namespace(redis_url: str, namespace: str) -> None:
    """The demo made its namespace for this run (as it made its SQLite file): leave no key."""
    client = Redis.from_url(redis_url)
    try:
        await delete_namespace(client, namespace)
    finally:
        await client.aclose()


async def _place_and_deliver(context: ApplicationContext, orders: int) -> dict[str, object]:
    engine: AsyncEngine = context.get_value("engine")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    service: OrderService = context.get_value("order_service")
    runner = context.get_value(JOB_RUNNER)
    relay = context.get_value(OUTBOX_RELAY)
    runner.start()
    relay.start()

    started = time.perf_counter()
    rejected = 0
    for n in range(1, orders + 1):
        try:
            await service.place_order(f"customer{n}@example.com", 1_000 + n, reject=n % 4 == 0)
        except OrderRejectedError:
            rejected += 1
    committed = await service.committed_orders()
    deadline = time.monotonic() + 30
    while len(await service.emails_per_order()) < len(committed):
        if time.monotonic() > deadline:
            raise TimeoutError("not every committed order got its email within 30 s")
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    reports = context.get_value("report_worker")
    while not reports.runs:  # the schedule fires every two seconds
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduled report did not run within 30 s")
        await asyncio.sleep(0.05)

    # The documented shutdown order: stop taking requests (we are done placing orders),
    # close the runner (drains), close the relay, then the context closes stores and drivers.
    await runner.close()
    await relay.close()

    emails = await service.emails_per_order()
    counts = await context.get_value(JOB_DRIVER).counts()
    return {
        "placed": orders,
        "committed": len(committed),
        "rolled_back": rejected,
        "emails": sum(emails.values()),
        "exactly_one_each": sorted(emails) == committed and set(emails.values()) == {1},
        "none_for_rolled_back": set(emails) <= set(committed),
        "jobs": counts,
        "retried_deliveries": runner.stats["retry"],
        "report_runs": len(reports.runs),
        "seconds": round(elapsed, 2),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.orders", description=__doc__)
    parser.add_argument("--orders", type=int, default=40)
    parser.add_argument("--database", help="SQLite file (default: a new temporary one)")
    parser.add_argument("--redis", default=os.environ.get("JOBS_REDIS_URL"), help="jobs on Redis")
    args = parser.parse_args(argv)
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    enable_logging()  # the library's lines are off until an app enables them
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(args.database) if args.database else Path(scratch) / "orders.db"
        summary = asyncio.run(run(f"sqlite+aiosqlite:///{path}", args.redis, args.orders))
    print(f"orders placed:          {summary['placed']}")
    print(f"  committed:            {summary['committed']}")
    print(f"  rolled back:          {summary['rolled_back']}")
    print(f"emails sent:            {summary['emails']}")
    print(f"  retried deliveries:   {summary['retried_deliveries']}")
    print(f"nightly report runs:    {summary['report_runs']} (every 2 s here, once per occurrence)")
    print(f"jobs ({'redis' if args.redis else 'sqlite'}):  {summary['jobs']}")
    print(f"every committed order got exactly one email: {summary['exactly_one_each']}")
    print(f"no rolled-back order got one:                {summary['none_for_rolled_back']}")
    print(f"took {summary['seconds']} s")
    ok = summary["exactly_one_each"] and summary["none_for_rolled_back"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
