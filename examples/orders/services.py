"""OrderService writes an order and its outbox entry in one transaction; EmailWorker sends."""

from __future__ import annotations

from typing import Any

from loguru import logger
from sqlalchemy import func, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from jobs import JobContext, OutboxStore, job_handler
from orm_sqlalchemy import SQLAlchemyTransactionManager, transactional

from .model import Order, SentEmail


class OrderRejectedError(Exception):
    """Raised inside place_order: the transaction rolls back, the outbox entry with it."""


class OrderService:
    def __init__(self, transaction_manager: SQLAlchemyTransactionManager, outbox: OutboxStore):
        self.transaction_manager = transaction_manager
        self.outbox = outbox

    @transactional()
    async def place_order(self, customer: str, total_cents: int, *, reject: bool = False) -> int:
        session = self.transaction_manager.session
        order = Order(customer=customer, total_cents=total_cents)
        session.add(order)
        await session.flush()
        await self.outbox.append("order.placed", {"order_id": order.id, "email": customer})
        if reject:
            raise OrderRejectedError(f"order {order.id} for {customer} rejected")
        return order.id

    async def committed_orders(self) -> list[int]:
        async with self.transaction_manager.transaction() as session:
            return list((await session.scalars(select(Order.id).order_by(Order.id))).all())

    async def emails_per_order(self) -> dict[int, int]:
        async with self.transaction_manager.transaction() as session:
            rows = await session.execute(
                select(SentEmail.order_id, func.count()).group_by(SentEmail.order_id)
            )
            return {order_id: count for order_id, count in rows}


class EmailWorker:
    """Sends the order confirmation. A flaky provider fails every fifth order's first try."""

    def __init__(self, transaction_manager: SQLAlchemyTransactionManager) -> None:
        self.transaction_manager = transaction_manager
        self.deliveries = 0

    @job_handler("order.placed", max_attempts=5, backoff=lambda attempt: 100 * attempt)
    async def send_confirmation(self, payload: dict[str, Any], ctx: JobContext) -> None:
        order_id = payload["order_id"]
        if order_id % 5 == 0 and ctx.attempt == 1:
            raise ConnectionError(f"mail provider timed out for order {order_id}")
        async with self.transaction_manager.transaction() as session:
            # Idempotent: a repeat delivery of the same job finds the row and sends nothing.
            inserted = await session.execute(
                sqlite_insert(SentEmail)
                .values(order_id=order_id, recipient=payload["email"], attempt=ctx.attempt)
                .on_conflict_do_nothing()
            )
            if inserted.rowcount:  # type: ignore[attr-defined]
                self.deliveries += 1
                logger.info("emailed {} about order {}", payload["email"], order_id)


class ReportWorker:
    """The "nightly" report: runs on a schedule (every two seconds in the demo)."""

    def __init__(self, orders: OrderService) -> None:
        self.orders = orders
        self.runs: list[int] = []

    @job_handler("report.nightly")
    async def build(self, payload: dict[str, Any]) -> None:
        committed = await self.orders.committed_orders()
        self.runs.append(len(committed))
        logger.info("nightly report: {} orders so far", len(committed))
