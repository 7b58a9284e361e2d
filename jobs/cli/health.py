"""``GET /healthz`` on the worker's ``--health-port``: the health of the services it runs.

The report joins ``health()`` of the runner and, when this process runs them, of the outbox
relay and the scheduler (so it covers the job driver, the outbox store and the scheduler's
store: ``stores`` in the report) (``jobs.Health``: the store answered within three of the service's
intervals, every supervised loop alive). 200 when every one is healthy, 503 otherwise; both
carry the JSON report, with ``reason`` joining what is wrong. The services judge their store by
the calls they make anyway, so serving the endpoint costs the store nothing.

Served by uvicorn on the worker's own event loop; uvicorn's signal handling is left to the
worker (it owns SIGTERM and SIGINT), and the socket is bound before serving so a port in use is
reported as bad input instead of uvicorn exiting the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import uvicorn
from loguru import logger
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..health import Health
from .errors import CliUsageError


class HasHealth(Protocol):
    def health(self) -> Health: ...


STORE_ROLES = {
    "job runner": "job driver",
    "outbox relay": "outbox store",
    "job scheduler": "scheduler's store",
}
"""The store each service judges: ``stores`` in the report has one entry per role."""


def health_report(services: Sequence[HasHealth]) -> dict[str, Any]:
    """One report for the worker: healthy when every service is, and why not; ``stores``
    says, per store the worker uses (job driver, outbox store, scheduler's store), whether it
    answered within its service's window."""
    parts = [service.health() for service in services]
    reasons = [f"{part.service}: {reason}" for part in parts for reason in part.reasons]
    stores = {}
    for part in parts:
        role = STORE_ROLES.get(part.service)
        if role is None:
            continue
        ago = part.store_answered_ms_ago
        stores[role] = {
            "answering": ago is not None and ago <= part.store_window_ms,
            "answered_ms_ago": ago,
            "window_ms": part.store_window_ms,
            "error": part.store_error,
        }
    return {
        "healthy": not reasons,
        "reason": "; ".join(reasons) or None,
        "services": {part.service: part.as_dict() for part in parts},
        "stores": stores,
    }


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the worker handles SIGTERM/SIGINT itself


class HealthServer:
    """``GET /healthz``: 200 and the report when healthy, 503 and the report when not."""

    def __init__(self, services: Sequence[HasHealth], port: int, host: str = "0.0.0.0") -> None:
        self.services = list(services)
        self.socket = _bind(host, port)
        app = Starlette(routes=[Route("/healthz", self._healthz, methods=["GET"])])
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        self.server = _QuietServer(config)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self.server.serve(sockets=[self.socket]), name="neverlost.health-server"
        )
        logger.info("health endpoint on http://{}:{}/healthz", *self.socket.getsockname()[:2])

    async def close(self) -> None:
        if self._task is not None:
            self.server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)
        self.socket.close()

    async def _healthz(self, request: Request) -> JSONResponse:
        report = health_report(self.services)
        return JSONResponse(report, status_code=200 if report["healthy"] else 503)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliUsageError(
            f"--health-port {port}: cannot listen on {host}:{port} ({exc})"
        ) from None
    sock.listen(64)
    sock.setblocking(False)
    return sock
