"""Wiring: one SQLite file holds the orders, the outbox and (by default) the jobs."""

from __future__ import annotations

import os

from sqlalchemy.ext.asyncio import AsyncEngine

from framework import configuration, entry
from jobs import (
    JOB_DRIVER,
    JOBS_SETTINGS,
    OUTBOX_STORE,
    JobDriver,
    JobsSettings,
    OutboxStore,
    Schedule,
)
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)

from .services import EmailWorker, OrderService, ReportWorker

# Every two seconds so the demo shows it; in production this would be "0 3 * * *".
NIGHTLY_REPORT = Schedule(cron="*/2 * * * * *", job="report.nightly")


def orders_configuration(
    database_url: str, redis_url: str | None = None, redis_namespace: str = "orders-example"
) -> type:
    """The example's configuration for a database (and, optionally, jobs on Redis)."""

    @configuration
    class OrdersConfiguration:
        @entry()
        def engine(self) -> AsyncEngine:
            return create_engine(database_url)

        @entry()
        def transaction_manager(self, engine: AsyncEngine) -> SQLAlchemyTransactionManager:
            return SQLAlchemyTransactionManager(engine)

        @entry(OUTBOX_STORE)
        def outbox_store(self, transaction_manager: SQLAlchemyTransactionManager) -> OutboxStore:
            return SQLAlchemyOutboxStore(transaction_manager=transaction_manager)

        @entry(JOB_DRIVER)
        def job_driver(self, engine: AsyncEngine, jobs_settings: JobsSettings) -> JobDriver:
            if redis_url is not None:
                from redis_jobs import RedisJobDriver

                return RedisJobDriver(
                    url=redis_url,
                    namespace=redis_namespace,
                    retain_completed_ms=jobs_settings.retain_completed_ms,
                    retain_failed_ms=jobs_settings.retain_failed_ms,
                )
            return SQLAlchemyJobStore(
                engine=engine,
                retain_completed_ms=jobs_settings.retain_completed_ms,
                retain_failed_ms=jobs_settings.retain_failed_ms,
            )

        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            # A demo keeps its history for minutes, not the default week (Redis expires it).
            return JobsSettings(
                concurrency=10,
                poll_interval_ms=500,
                schedule_interval_ms=1_000,
                retain_completed_ms=5 * 60_000,
                retain_failed_ms=60 * 60_000,
            )

        @entry()
        def order_service(
            self, transaction_manager: SQLAlchemyTransactionManager, outbox_store: OutboxStore
        ) -> OrderService:
            return OrderService(transaction_manager, outbox_store)

        @entry()
        def email_worker(self, transaction_manager: SQLAlchemyTransactionManager) -> EmailWorker:
            return EmailWorker(transaction_manager)

        @entry()
        def report_worker(self, order_service: OrderService) -> ReportWorker:
            return ReportWorker(order_service)

        @entry()
        def nightly_report(self) -> Schedule:
            return NIGHTLY_REPORT

    return OrdersConfiguration


OrdersApp = orders_configuration(
    os.environ.get("ORDERS_DATABASE_URL", "sqlite+aiosqlite:///orders.db"),
    os.environ.get("JOBS_REDIS_URL"),
)
"""The example as an APP for ``neverlost worker examples.orders.app:OrdersApp`` (the database
from ``ORDERS_DATABASE_URL``, jobs on Redis when ``JOBS_REDIS_URL`` is set)."""
