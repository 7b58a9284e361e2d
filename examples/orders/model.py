"""The application's own tables: orders, and the emails sent for them."""

from __future__ import annotations

from sqlalchemy import ForeignKey
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str]
    total_cents: Mapped[int]


class SentEmail(Base):
    """One row per order: the primary key makes sending idempotent."""

    __tablename__ = "sent_emails"

    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), primary_key=True)
    recipient: Mapped[str]
    attempt: Mapped[int]
