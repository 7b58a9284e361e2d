"""The shop's beans: the order service (one transaction: order + outbox entry), the receipt
handler, and the schema set-up run when the context starts."""

from __future__ import annotations

from loguru import logger
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from jobs import JobContext, job_handler
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, transactional

from .model import SEND_RECEIPT, Base, Order, Receipt, SentReceipt


class OrderService:
    def __init__(
        self,
        transaction_manager: SQLAlchemyTransactionManager,
        outbox: SQLAlchemyOutboxStore,
        sync_engine: Engine,
    ) -> None:
        self.transaction_manager = transaction_manager
        self.outbox = outbox
        self.sync_engine = sync_engine

    @transactional()
    async def place_order(self, email: str, total_cents: int) -> int:
        """The order and its receipt job commit together, or neither does: a receipt that does
        not fit its model raises PayloadValidationError here and the order is rolled back."""
        session = self.transaction_manager.session
        order = Order(email=email, total_cents=total_cents)
        session.add(order)
        await session.flush()
        receipt = {"order_id": order.id, "email": email, "total_cents": total_cents}
        await self.outbox.append(SEND_RECEIPT, receipt, key=f"receipt:{order.id}")
        return order.id

    def place_order_sync(self, email: str, total_cents: int) -> int:
        """``place_order`` for sync code (a ``def`` route, run in a thread): the app's own sync
        session, and the outbox entry written in it with ``append_in``."""
        with Session(self.sync_engine) as session, session.begin():
            order = Order(email=email, total_cents=total_cents)
            session.add(order)
            session.flush()
            receipt = {"order_id": order.id, "email": email, "total_cents": total_cents}
            self.outbox.append_in(session, SEND_RECEIPT, receipt, key=f"receipt:{order.id}")
            return order.id

    async def get_order(self, order_id: int) -> tuple[Order, bool] | None:
        """The order and whether its receipt was sent."""
        async with self.transaction_manager.transaction() as session:
            order = await session.get(Order, order_id)
            if order is None:
                return None
            return order, await session.get(SentReceipt, order_id) is not None


class ReceiptMailer:
    """Sends the receipt (here: records it); idempotent, as every handler must be."""

    def __init__(self, transaction_manager: SQLAlchemyTransactionManager) -> None:
        self.transaction_manager = transaction_manager
        postgres = transaction_manager.engine.dialect.name == "postgresql"
        self._insert = postgresql_insert if postgres else sqlite_insert

    @job_handler(SEND_RECEIPT)
    async def send(self, receipt: Receipt, ctx: JobContext) -> None:
        async with self.transaction_manager.transaction() as session:
            await session.execute(
                self._insert(SentReceipt)
                .values(order_id=receipt.order_id, email=receipt.email)
                .on_conflict_do_nothing()
            )
        logger.info("receipt for order {} sent to {}", receipt.order_id, receipt.email)


class SchemaSetup:
    """Creates the shop's tables when the context starts (phase -10, before anything else)."""

    phase = -10
    auto_startup = True

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._running = False

    @property
    def is_running(self) -> bool:
        return self._running

    async def start(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        self._running = True

    def stop(self) -> None:
        self._running = False
