"""The Flask side: a sync SQLAlchemy session per request; POST /invoices commits the invoice and
its outbox entry together (``outbox.append_in``), or neither.

Serve it with ``flask --app examples.flask.app run``; the jobs run in a worker process
(``neverlost worker examples.flask.worker:build``).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, g, request
from sqlalchemy.orm import Session

from jobs import PayloadValidationError
from orm_sqlalchemy import SQLAlchemyOutboxStore, create_sync_engine

from .model import DATABASE_URL, SEND_INVOICE, Base, Invoice, SentInvoice


def create_app(database_url: str = DATABASE_URL) -> Flask:
    app = Flask(__name__)
    engine = create_sync_engine(database_url)
    Base.metadata.create_all(engine)
    outbox = SQLAlchemyOutboxStore(database_url)  # the outbox table of the same database
    app.extensions["invoices"] = {"engine": engine, "outbox": outbox}  # closed by the caller

    def session() -> Session:
        if "session" not in g:
            g.session = Session(engine)
        return g.session  # type: ignore[no-any-return]

    @app.teardown_appcontext
    def close_session(_error: BaseException | None) -> None:
        opened = g.pop("session", None)
        if opened is not None:
            opened.close()  # rolls back what was not committed

    @app.errorhandler(PayloadValidationError)
    def refused(error: PayloadValidationError) -> tuple[dict[str, str], int]:
        return {"detail": str(error)}, 422

    @app.post("/invoices")
    def create_invoice() -> tuple[dict[str, int], int]:
        body: dict[str, Any] = request.get_json()
        db = session()
        with db.begin():  # the invoice and its job: one transaction
            invoice = Invoice(email=body["email"], amount_cents=body["amount_cents"])
            db.add(invoice)
            db.flush()
            mail = {"invoice_id": invoice.id, "email": invoice.email,
                    "amount_cents": invoice.amount_cents}  # fmt: skip
            outbox.append_in(db, SEND_INVOICE, mail, key=f"invoice:{invoice.id}")
            invoice_id = invoice.id
        return {"id": invoice_id}, 201

    @app.get("/invoices/<int:invoice_id>")
    def get_invoice(invoice_id: int) -> dict[str, Any]:
        db = session()
        invoice = db.get(Invoice, invoice_id)
        if invoice is None:
            abort(404)
        sent = db.get(SentInvoice, invoice_id) is not None
        return {"id": invoice.id, "email": invoice.email, "sent": sent}

    return app
