"""The HTTP side: FastAPI's lifespan boots the context; POST /orders places an order.

Serve it with ``uvicorn examples.fastapi.app:app``; the jobs run in a worker process
(``neverlost worker examples.fastapi.wiring:ShopConfiguration``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from framework import ApplicationBuilder, ApplicationContext
from jobs import JobsAutoConfiguration, PayloadValidationError

from .services import OrderService
from .wiring import ShopConfiguration


class OrderIn(BaseModel):
    email: str
    total_cents: int


class OrderOut(BaseModel):
    id: int
    email: str
    total_cents: int
    receipt_sent: bool


def create_app(builder: ApplicationBuilder | None = None) -> FastAPI:
    """The shop's app on ``builder`` (the shop's own configuration by default)."""
    builder = builder or ApplicationBuilder([JobsAutoConfiguration, ShopConfiguration])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with await builder.run() as context:  # closed in the documented order
            app.state.context = context
            yield

    app = FastAPI(title="neverlost shop", lifespan=lifespan)

    def orders(request: Request) -> OrderService:
        context: ApplicationContext = request.app.state.context
        service: OrderService = context.get_value("order_service")
        return service

    @app.exception_handler(PayloadValidationError)
    async def refused(request: Request, exc: PayloadValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.post("/orders", status_code=201)
    async def place_order(order: OrderIn, request: Request) -> dict[str, int]:
        return {"id": await orders(request).place_order(order.email, order.total_cents)}

    @app.post("/orders/sync", status_code=201)
    def place_order_sync(order: OrderIn, request: Request) -> dict[str, int]:
        """A sync route (FastAPI runs it in a thread): the app's own sync session and
        ``outbox.append_in``, as in a Flask view."""
        return {"id": orders(request).place_order_sync(order.email, order.total_cents)}

    @app.get("/orders/{order_id}")
    async def get_order(order_id: int, request: Request) -> OrderOut:
        found = await orders(request).get_order(order_id)
        if found is None:
            raise HTTPException(status_code=404, detail=f"no order {order_id}")
        order, sent = found
        return OrderOut(
            id=order.id, email=order.email, total_cents=order.total_cents, receipt_sent=sent
        )

    return app


app = create_app()
