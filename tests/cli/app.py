"""The application the CLI tests point ``neverlost`` at: ``tests.cli.app:CliTestApp``.

Its store comes from ``CLI_TEST_TARGET`` (a StoreTarget as JSON); its handlers append one JSON
line per event to the file named by ``CLI_TEST_LEDGER`` (fsynced, so a killed process cannot
take back a line).

- ``cli.sleep`` sleeps ``payload["ms"]``; ``cli.fail`` always raises; ``cli.block`` waits
  until it is cancelled; ``cli.nightly`` is a cron schedule (03:00 Europe/Berlin).
- ``CliHazardApp`` adds handlers that try to end the worker: ``cli.exit`` calls
  ``sys.exit(3)`` (async), ``cli.interrupt`` raises KeyboardInterrupt (sync, in a thread);
  ``cli.stuck`` (sync) sleeps ``payload["s"]`` seconds, ignoring its 200 ms timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from framework import configuration, entry
from jobs import (
    JOB_DRIVER,
    JOBS_SETTINGS,
    OUTBOX_STORE,
    InProcessJobDriver,
    JobContext,
    JobDriver,
    JobsSettings,
    OutboxStore,
    job_handler,
)
from jobs.loss_audit import AuditSLOs
from jobs.loss_audit_service import LossAuditService
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from tests.stores import StoreTarget


def _ledger(event: str, ctx: JobContext) -> None:
    path = os.environ.get("CLI_TEST_LEDGER")
    if path is None:
        return
    line = json.dumps({"event": event, "job": ctx.id, "type": ctx.type, "pid": os.getpid()})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class CliHandlers:
    @job_handler("cli.sleep", max_attempts=3)
    async def sleep(self, payload: dict[str, Any], ctx: JobContext) -> None:
        _ledger("start", ctx)
        await asyncio.sleep(payload.get("ms", 0) / 1000)
        _ledger("end", ctx)

    @job_handler("cli.fail", max_attempts=1)
    async def fail(self, payload: Any, ctx: JobContext) -> None:
        _ledger("start", ctx)
        raise RuntimeError(f"cli.fail failed on purpose ({payload})")

    @job_handler("cli.block", max_attempts=3)
    async def block(self, payload: Any, ctx: JobContext) -> None:
        _ledger("start", ctx)
        await asyncio.Event().wait()

    @job_handler("cli.nightly", cron="0 3 * * *", timezone="Europe/Berlin")
    async def nightly(self, payload: Any) -> None:
        pass


@configuration
class CliTestApp:
    @entry(JOB_DRIVER)
    def job_driver(self) -> JobDriver:
        return StoreTarget.from_json(os.environ["CLI_TEST_TARGET"]).open()

    @entry(JOBS_SETTINGS)
    def jobs_settings(self) -> JobsSettings:
        return JobsSettings(lease_ms=3_000, poll_interval_ms=500)

    @entry()
    def cli_handlers(self) -> CliHandlers:
        return CliHandlers()


class CliHazards:
    @job_handler("cli.exit", max_attempts=3)
    async def exit(self, payload: Any, ctx: JobContext) -> None:
        _ledger("start", ctx)
        sys.exit(3)

    @job_handler("cli.interrupt", max_attempts=3)
    def interrupt(self, payload: Any, ctx: JobContext) -> None:
        _ledger("start", ctx)
        raise KeyboardInterrupt

    @job_handler("cli.stuck", max_attempts=1, timeout_ms=200)
    def stuck(self, payload: Any, ctx: JobContext) -> None:
        _ledger("start", ctx)
        time.sleep(payload["s"])  # ignores ctx.signal: a thread cannot be cancelled


@configuration
class CliHazardApp(CliTestApp):
    @entry()
    def cli_hazards(self) -> CliHazards:
        return CliHazards()


NOT_A_CONFIGURATION = 42


@configuration
class CliOutboxApp(CliTestApp):
    """CliTestApp with an outbox on the same database (so the worker runs the relay); its
    table prefix is ``CLI_TEST_OUTBOX_PREFIX`` (default ``outbox_``), its database
    ``CLI_TEST_OUTBOX_URL`` when set."""

    @entry()
    def engine(self) -> AsyncEngine:
        url = os.environ.get("CLI_TEST_OUTBOX_URL")  # another database for the outbox
        return create_engine(url or StoreTarget.from_json(os.environ["CLI_TEST_TARGET"]).url)

    @entry()
    def transaction_manager(self, engine: AsyncEngine) -> SQLAlchemyTransactionManager:
        return SQLAlchemyTransactionManager(engine)

    @entry(OUTBOX_STORE)
    def outbox_store(self, transaction_manager: SQLAlchemyTransactionManager) -> OutboxStore:
        prefix = os.environ.get("CLI_TEST_OUTBOX_PREFIX", "outbox_")
        return SQLAlchemyOutboxStore(transaction_manager=transaction_manager, table_prefix=prefix)


class SharedInProcessDriver(InProcessJobDriver):
    """The reference driver, kept open across contexts: one store that outlives each command,
    as a database outlives each ``neverlost`` process (commands close their context's beans)."""

    async def close(self) -> None:
        pass


SHARED_STORE: dict[str, InProcessJobDriver] = {"driver": SharedInProcessDriver()}
"""The store of CliInProcessApp; a test puts a fresh driver here before using it."""


@configuration
class CliInProcessApp(CliTestApp):
    @entry(JOB_DRIVER)
    def job_driver(self) -> JobDriver:
        return SHARED_STORE["driver"]


@configuration
class CliAuditApp(CliOutboxApp):
    """CliOutboxApp with the live loss auditor in the worker (a pass every 200 ms; a due job
    is stuck at once)."""

    @entry()
    def loss_audit(self, job_driver: JobDriver, outbox_store: OutboxStore) -> LossAuditService:
        return LossAuditService(
            job_driver, outbox_store, slos=AuditSLOs(due_slo_ms=0), interval_ms=200
        )
