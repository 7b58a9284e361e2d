"""examples/fastapi as deployed: the app on its own configuration, the worker the CLI's.

The API (lifespan running, called through httpx) and ``neverlost worker
examples.fastapi.wiring:ShopConfiguration`` (a real process) share one SQLite file: the order's
outbox entry is relayed and its receipt sent by the worker, which drains and exits 0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from examples.fastapi.app import create_app
from examples.fastapi.wiring import shop_configuration
from framework import ApplicationBuilder
from jobs import JobsAutoConfiguration
from tests.cli.conftest import NEVERLOST, REPO, CliProcess
from tests.support import wait_until

APP = "examples.fastapi.wiring:ShopConfiguration"


async def test_the_cli_worker_sends_the_receipt_of_an_order_placed_through_the_api(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shop.db'}"
    app = create_app(ApplicationBuilder([JobsAutoConfiguration, shop_configuration(url)]))
    env = {**os.environ, "SHOP_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "worker.log"
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
            body = {"email": "ada@example.com", "total_cents": 1}
            placed = await client.post("/orders", json=body)
            assert placed.status_code == 201
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

                await wait_until(receipt_sent, timeout=60, interval=0.1, message="receipt sent")
                worker.signal(signal.SIGTERM)
                assert await worker.exit_code() == 0, worker.log_text()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
