"""A worker with no DI container: ``neverlost worker tests.cli.worker_factory:build``.

The store comes from ``CLI_TEST_TARGET`` (a StoreTarget as JSON), the ledger file from
``CLI_TEST_LEDGER`` (``tests.cli.app``'s). ``build`` has a plain ``@job_handler`` function, a
``(type, function)`` pair and, on a SQL store, the outbox of the same database;
``not_a_worker`` returns something else.
"""

from __future__ import annotations

import os
from typing import Any

from jobs import JobContext, Schedule, Worker, job_handler
from orm_sqlalchemy import SQLAlchemyJobStore, SQLAlchemyOutboxStore
from tests.cli.app import _ledger
from tests.stores import StoreTarget


@job_handler("factory.greet", max_attempts=2)
def greet(payload: dict[str, Any], ctx: JobContext) -> None:
    _ledger(f"greet {payload['name']}", ctx)


async def receipt(payload: dict[str, Any], ctx: JobContext) -> None:
    _ledger(f"receipt {payload['invoice']}", ctx)


def build() -> Worker:
    target = StoreTarget.from_json(os.environ["CLI_TEST_TARGET"])
    driver = target.open()
    outbox = None
    if isinstance(driver, SQLAlchemyJobStore):
        outbox = SQLAlchemyOutboxStore(driver.engine, table_prefix=f"{target.namespace}outbox_")
    return Worker(
        driver=driver,
        handlers=[greet, ("factory.receipt", receipt)],
        outbox=outbox,
        schedules=[Schedule(cron="0 3 * * *", job="factory.greet", payload={"name": "night"})],
    )


def not_a_worker() -> dict[str, str]:
    return {"driver": "no"}
