"""The shop's tables, and the receipt job: a type bound to a pydantic model."""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy import ForeignKey
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from jobs import define_job


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    total_cents: Mapped[int]


class SentReceipt(Base):
    """One row per order: the primary key makes sending idempotent (at-least-once delivery)."""

    __tablename__ = "shop_receipts"

    order_id: Mapped[int] = mapped_column(ForeignKey("shop_orders.id"), primary_key=True)
    email: Mapped[str]


class Receipt(BaseModel):
    order_id: int
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    total_cents: int = Field(ge=0)


SEND_RECEIPT = define_job("shop.receipt.send", Receipt, max_attempts=5)
