"""examples/fastapi's sync route (``def``, run by FastAPI in a thread): the app's own sync session
and ``outbox.append_in``. The order's entry is relayed and its receipt sent by ``neverlost worker
examples.fastapi.wiring:ShopConfiguration`` (a real process), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest

from examples.fastapi.app import create_app
from examples.fastapi.wiring import shop_configuration
from framework import ApplicationBuilder
from jobs import JobsAutoConfiguration
from tests.cli.conftest import NEVERLOST, REPO, CliProcess
from tests.examples.fresh_database import fresh_database
from tests.support import wait_until

APP = "examples.fastapi.wiring:ShopConfiguration"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_the_worker_sends_the_receipt_of_an_order_placed_through_the_sync_route(
    kind: str, tmp_path: Path
) -> None:
    with fresh_database(kind, tmp_path) as url:
        app = create_app(ApplicationBuilder([JobsAutoConfiguration, shop_configuration(url)]))
        env = {**os.environ, "SHOP_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
        log = tmp_path / "worker.log"
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
                bad = {"email": "nobody", "total_cents": 1}
                assert (await client.post("/orders/sync", json=bad)).status_code == 422
                body = {"email": "ada@example.com", "total_cents": 1}
                placed = await client.post("/orders/sync", json=body)
                assert placed.status_code == 201, placed.text
                order = f"/orders/{placed.json()['id']}"
                with log.open("wb") as output:
                    process = await asyncio.create_subprocess_exec(
                        NEVERLOST, "worker", APP, cwd=REPO, env=env,
                        stdin=asyncio.subprocess.DEVNULL, stdout=output, stderr=output,
                    )  # fmt: skip
                worker = CliProcess(process, log)
                try:

                    async def receipt_sent() -> bool:
                        return bool((await client.get(order)).json()["receipt_sent"])

                    await wait_until(receipt_sent, timeout=60, interval=0.1, message="sent")
                    worker.signal(signal.SIGTERM)
                    assert await worker.exit_code() == 0, worker.log_text()
                finally:
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
