"""Fixtures of the dashboard tests: a served app on a loopback port, a headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from jobs import InProcessJobDriver, JobQueue

PORTS = range(8800, 8900)  # this suite's share of the machine's loopback ports
CSRF_META = re.compile(r'<meta name="csrf-token" content="([0-9a-f]+)">')


def bound_socket() -> socket.socket:
    """A listening socket on the first free port of PORTS (bound here, so no race)."""
    for port in PORTS:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen(64)
        return sock
    raise RuntimeError(f"no free loopback port in {PORTS.start}-{PORTS.stop - 1}")


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn in this event loop; yields its base URL."""
    sock = bound_socket()
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(500):
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        if not server.started:
            task.result()  # raises what stopped it
            raise RuntimeError("uvicorn did not start within 5 s")
        host, port = sock.getsockname()[:2]
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        sock.close()


@pytest.fixture
def serve() -> Callable[[Any], AbstractAsyncContextManager[str]]:
    return served


@pytest.fixture
def driver() -> InProcessJobDriver:
    return InProcessJobDriver()


@pytest.fixture
def queue(driver: InProcessJobDriver) -> JobQueue:
    return JobQueue(driver)


def client_for(app: Any, base_url: str = "http://dashboard") -> httpx.AsyncClient:
    """An HTTP client calling the ASGI app in this event loop (cookies kept)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


async def csrf_token(client: httpx.AsyncClient, path: str = "/") -> str:
    """GET a page (which sets the CSRF cookie) and read the token its forms carry."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    match = CSRF_META.search(page.text)
    assert match is not None, f"no CSRF token on {path}"
    return match.group(1)


@asynccontextmanager
async def launched_chromium() -> AsyncIterator[Any]:
    """Headless Chromium from the system package (Debian's ``chromium``), no download."""
    from playwright.async_api import async_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: .ci/run installs it (apt-get install chromium)")
    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield instance
        finally:
            await instance.close()
