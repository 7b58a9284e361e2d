"""The shop's configuration: one database holds the orders, the outbox and the jobs.

``ShopConfiguration`` reads ``SHOP_DATABASE_URL`` (``sqlite+aiosqlite:///shop.db`` by default;
``postgres://...`` works as given); it is the APP of the worker::

    neverlost worker examples.fastapi.wiring:ShopConfiguration
"""

from __future__ import annotations

import os

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from framework import configuration, entry
from jobs import JOB_DRIVER, OUTBOX_STORE, JobDriver, JobsSettings
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
    create_sync_engine,
)

from .services import OrderService, ReceiptMailer, SchemaSetup


def shop_configuration(database_url: str) -> type:
    """The shop's @configuration on ``database_url``."""

    @configuration
    class ShopConfiguration:
        @entry()
        def engine(self) -> AsyncEngine:
            return create_engine(database_url)

        @entry()
        def sync_engine(self) -> Engine:
            """For the sync routes (``def``, run in threads): the same database."""
            return create_sync_engine(database_url)

        @entry()
        def schema_setup(self, engine: AsyncEngine) -> SchemaSetup:
            return SchemaSetup(engine)

        @entry()
        def transaction_manager(self, engine: AsyncEngine) -> SQLAlchemyTransactionManager:
            return SQLAlchemyTransactionManager(engine)

        @entry(OUTBOX_STORE)
        def outbox_store(
            self, transaction_manager: SQLAlchemyTransactionManager
        ) -> SQLAlchemyOutboxStore:
            return SQLAlchemyOutboxStore(transaction_manager=transaction_manager)

        @entry(JOB_DRIVER)
        def job_driver(self, engine: AsyncEngine, jobs_settings: JobsSettings) -> JobDriver:
            return SQLAlchemyJobStore(
                engine=engine,
                retain_completed_ms=jobs_settings.retain_completed_ms,
                retain_failed_ms=jobs_settings.retain_failed_ms,
            )

        @entry()
        def order_service(
            self,
            transaction_manager: SQLAlchemyTransactionManager,
            outbox_store: SQLAlchemyOutboxStore,
            sync_engine: Engine,
        ) -> OrderService:
            return OrderService(transaction_manager, outbox_store, sync_engine)

        @entry()
        def receipt_mailer(
            self, transaction_manager: SQLAlchemyTransactionManager
        ) -> ReceiptMailer:
            return ReceiptMailer(transaction_manager)

    return ShopConfiguration


ShopConfiguration = shop_configuration(
    os.environ.get("SHOP_DATABASE_URL", "sqlite+aiosqlite:///shop.db")
)
