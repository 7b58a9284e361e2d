"""The tables, and the invoice job: a type bound to a pydantic model."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field
from sqlalchemy import ForeignKey
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from jobs import define_job

DATABASE_URL = os.environ.get("INVOICES_DATABASE_URL", "sqlite:///invoices.db")
"""One database for the invoices, the outbox and the jobs (``postgresql://...`` works too)."""


class Base(DeclarativeBase):
    pass


class Invoice(Base):
    __tablename__ = "invoices"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    amount_cents: Mapped[int]


class SentInvoice(Base):
    """One row per invoice: the primary key makes sending idempotent (at-least-once delivery)."""

    __tablename__ = "sent_invoices"

    invoice_id: Mapped[int] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    email: Mapped[str]


class InvoiceMail(BaseModel):
    invoice_id: int
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    amount_cents: int = Field(ge=0)


SEND_INVOICE = define_job("invoice.send", InvoiceMail, max_attempts=5)
