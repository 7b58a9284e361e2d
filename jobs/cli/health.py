"""The worker's health: a store probe, the runner's state, and ``GET /healthz`` serving them.

Healthy means the store answered within the last three heartbeat intervals and the runner is
claiming. The probe asks the store for its counts once per heartbeat interval (bounded by that
interval), so a worker whose store refuses every call turns unhealthy within three intervals
and healthy again at the first answer after it recovers.

The endpoint is a Starlette app served by uvicorn on the worker's own event loop; uvicorn's
signal handling is left to the worker (it owns SIGTERM and SIGINT), and the socket is bound
before serving so a port in use is reported as bad input instead of uvicorn exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from loguru import logger
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..driver import JobDriver
from ..runner import JobRunner
from .errors import CliUsageError
from .running import STORE_FAILURES, describe_failure
from .target import describe_store


class HealthProbe:
    """Asks the store every heartbeat interval; ``report()`` says healthy or why not."""

    def __init__(self, driver: JobDriver, runner: JobRunner) -> None:
        self.driver = driver
        self.runner = runner
        self.interval_s = runner.heartbeat_ms / 1000
        self.last_ok: float | None = None
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="neverlost.health")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                async with asyncio.timeout(self.interval_s):
                    await self.driver.counts()
                self.last_ok = time.monotonic()
                self.last_error = None
            except TimeoutError:
                self.last_error = f"no answer within {self.interval_s:g} s"
            except STORE_FAILURES as exc:
                self.last_error = describe_failure(exc)
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def report(self) -> dict[str, Any]:
        now = time.monotonic()
        store_ok = self.last_ok is not None and now - self.last_ok <= 3 * self.interval_s
        reasons = []
        if not store_ok:
            cause = self.last_error or "not probed yet"
            reasons.append(f"store {describe_store(self.driver)} unreachable: {cause}")
        if not self.runner.is_running:
            reasons.append("the runner is not claiming (stopped or draining)")
        return {
            "healthy": not reasons,
            "reason": "; ".join(reasons) or None,
            "store": {
                "name": describe_store(self.driver),
                "reachable": store_ok,
                "last_answer_s_ago": None if self.last_ok is None else round(now - self.last_ok, 3),
                "last_error": self.last_error,
            },
            "runner": {"claiming": self.runner.is_running, "in_flight": self.runner.in_flight},
        }


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the worker handles SIGTERM/SIGINT itself


class HealthServer:
    """``GET /healthz``: 200 and the report when healthy, 503 and the report (with its reason)
    when not."""

    def __init__(self, probe: HealthProbe, port: int, host: str = "0.0.0.0") -> None:
        self.probe = probe
        self.socket = _bind(host, port)
        app = Starlette(routes=[Route("/healthz", self._healthz, methods=["GET"])])
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        self.server = _QuietServer(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

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
        report = self.probe.report()
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
