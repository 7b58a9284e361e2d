"""Misuses ``mypy --strict`` must refuse: each line marked ``# rejected`` is one error.

Not collected by pytest; tests/typing/test_typing.py checks it from outside the checkout.
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from jobs import JobContext, JobQueue, define_job, job_handler
from orm_sqlalchemy import SQLAlchemyOutboxStore


class Receipt(BaseModel):
    invoice_id: int


class Refund(BaseModel):
    amount: int


SEND_RECEIPT = define_job("receipt.send", Receipt)


class Mailer:
    @job_handler(SEND_RECEIPT)  # rejected
    async def send(self, receipt: dict[str, int], ctx: JobContext) -> None: ...

    @job_handler(SEND_RECEIPT)  # rejected
    def refund(self, refund: Refund) -> None: ...


async def produce(queue: JobQueue, outbox: SQLAlchemyOutboxStore) -> None:
    await queue.enqueue(SEND_RECEIPT, 42)  # rejected
    await queue.enqueue(SEND_RECEIPT, Refund(amount=1))  # rejected
    await queue.enqueue(SEND_RECEIPT, [7])  # rejected
    await outbox.append(SEND_RECEIPT, "seven")  # rejected
    await outbox.append(SEND_RECEIPT, Refund(amount=1), key="k")  # rejected


def produce_sync(outbox: SQLAlchemyOutboxStore, session: Session, aio: AsyncSession) -> None:
    outbox.append_in(session, SEND_RECEIPT, Refund(amount=1))  # rejected
    entry_id: str | None = outbox.append_in(aio, "t", {})  # rejected
    print(entry_id)
