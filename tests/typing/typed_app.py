"""A small typed application: ``mypy --strict`` must accept it against the installed package.

Not collected by pytest; tests/typing/test_typing.py checks it from outside the checkout.
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from framework import ApplicationBuilder, ApplicationContext, Token, configuration, entry
from jobs import (
    JOB_QUEUE,
    JobContext,
    JobQueue,
    JobsAutoConfiguration,
    define_job,
    job_handler,
)
from orm_sqlalchemy import (
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
    create_sync_engine,
    transactional,
)


class Receipt(BaseModel):
    invoice_id: int
    email: str


SEND_RECEIPT = define_job("receipt.send", Receipt, max_attempts=5)


class Mailer:
    def __init__(self) -> None:
        self.sent: list[int] = []

    @job_handler(SEND_RECEIPT)
    async def send(self, receipt: Receipt, ctx: JobContext) -> None:
        self.sent.append(receipt.invoice_id + ctx.attempt)

    @job_handler(SEND_RECEIPT)
    def send_sync(self, receipt: BaseModel) -> None:  # a wider parameter takes the model too
        print(receipt)

    @job_handler("report.build", cron="0 3 * * *")
    async def report(self, payload: object) -> None:
        print(payload)


MAILER: Token[Mailer] = Token("mailer")


class Billing:
    def __init__(self, tm: SQLAlchemyTransactionManager, outbox: SQLAlchemyOutboxStore) -> None:
        self.transaction_manager = tm
        self.outbox = outbox

    @transactional()
    async def close_invoice(self, invoice_id: int) -> str | None:
        return await self.outbox.append(
            SEND_RECEIPT, {"invoice_id": invoice_id, "email": "a@b.c"}, key=f"r:{invoice_id}"
        )


@configuration
class AppConfiguration:
    @entry(MAILER)
    def mailer(self) -> Mailer:
        return Mailer()


@configuration(overrides=True)
class TestDoubles:
    @entry(MAILER)
    def mailer(self) -> Mailer:
        return Mailer()


async def main() -> None:
    builder = ApplicationBuilder([JobsAutoConfiguration, AppConfiguration]).override(TestDoubles)
    async with await builder.override(MAILER, Mailer()).run() as context:
        queue: JobQueue = context.get_value(JOB_QUEUE)
        mailer: Mailer = context.get_value(MAILER)
        first: str | None = await queue.enqueue(SEND_RECEIPT, Receipt(invoice_id=7, email="e"))
        await queue.enqueue(SEND_RECEIPT, {"invoice_id": 8, "email": "e"})
        await queue.enqueue("report.build", [1, 2, 3], delay_ms=1_000)
        print(first, mailer.sent, isinstance(context, ApplicationContext))
    engine = create_engine("postgres://user@db.example/app")
    tm = SQLAlchemyTransactionManager(engine)
    await Billing(tm, SQLAlchemyOutboxStore(transaction_manager=tm)).close_invoice(7)
    outbox = SQLAlchemyOutboxStore("sqlite:///app.db")
    with Session(create_sync_engine("sqlite:///app.db")) as session, session.begin():
        receipt = {"invoice_id": 9, "email": "e"}
        sync_id: str | None = outbox.append_in(session, SEND_RECEIPT, receipt)
        print(sync_id, outbox.append_in(session.connection(), "report.build", [1], key="k"))
    async with AsyncSession(engine) as async_session, async_session.begin():
        async_id: str | None = await outbox.append_in(async_session, "report.build", {"a": 1})
        print(async_id)
