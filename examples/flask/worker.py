"""The worker, with no DI container: ``neverlost worker examples.flask.worker:build``.

It relays the outbox entries the app commits and runs ``send_invoice`` (a plain function, run
in a worker thread), which records the invoice as sent in its own sync session.
"""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from jobs import Worker, job_handler
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    create_sync_engine,
)

from .model import DATABASE_URL, SEND_INVOICE, InvoiceMail, SentInvoice


def build() -> Worker:
    engine = create_sync_engine(DATABASE_URL)
    insert = postgresql_insert if engine.dialect.name == "postgresql" else sqlite_insert

    @job_handler(SEND_INVOICE)
    def send_invoice(mail: InvoiceMail) -> None:
        with Session(engine) as session, session.begin():  # idempotent: one row per invoice
            row = {"invoice_id": mail.invoice_id, "email": mail.email}
            session.execute(insert(SentInvoice).values(row).on_conflict_do_nothing())
        print(f"invoice {mail.invoice_id} sent to {mail.email}", flush=True)

    jobs = SQLAlchemyJobStore(DATABASE_URL)
    return Worker(
        driver=jobs,
        outbox=SQLAlchemyOutboxStore(jobs.engine),
        handlers=[send_invoice],
    )
