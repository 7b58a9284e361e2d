"""examples/flask as deployed: the Flask app (test client, a sync session per request) and
``neverlost worker examples.flask.worker:build`` (a real process, no DI container) on one
database, SQLite and PostgreSQL. The invoice's outbox entry is relayed and the invoice sent by
the worker, which drains and exits 0 on SIGTERM; an invoice whose mail does not fit its model
is refused (422) and rolled back with its entry."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import select

from examples.flask.app import create_app
from examples.flask.model import Invoice
from orm_sqlalchemy import create_sync_engine
from tests.cli.conftest import NEVERLOST, REPO, CliProcess
from tests.examples.fresh_database import fresh_database
from tests.support import wait_until

WORKER = "examples.flask.worker:build"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_the_worker_sends_the_invoice_the_flask_app_committed(
    kind: str, tmp_path: Path
) -> None:
    with fresh_database(kind, tmp_path) as url:
        app = create_app(url)
        client = app.test_client()
        refused = await asyncio.to_thread(
            client.post, "/invoices", json={"email": "not an address", "amount_cents": 5}
        )
        assert refused.status_code == 422
        assert "invoice.send" in refused.get_json()["detail"]
        created = await asyncio.to_thread(
            client.post, "/invoices", json={"email": "ada@example.com", "amount_cents": 1250}
        )
        assert created.status_code == 201
        invoice = f"/invoices/{created.get_json()['id']}"
        assert _invoices(url) == ["ada@example.com"]  # the refused one left nothing behind

        log = tmp_path / "worker.log"
        env = {**os.environ, "INVOICES_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
        with log.open("wb") as output:
            process = await asyncio.create_subprocess_exec(
                NEVERLOST, "worker", WORKER, cwd=REPO, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=output, stderr=output,
            )  # fmt: skip
        worker = CliProcess(process, log)
        try:

            async def sent() -> bool:
                response = await asyncio.to_thread(client.get, invoice)
                return bool(response.get_json()["sent"])

            await wait_until(sent, timeout=60, interval=0.1, message="invoice sent")
            assert "sent to ada@example.com" in worker.log_text()
            worker.signal(signal.SIGTERM)
            assert await worker.exit_code() == 0, worker.log_text()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await app.extensions["invoices"]["outbox"].close()
            app.extensions["invoices"]["engine"].dispose()


def _invoices(url: str) -> list[str]:
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(Invoice.email)).scalars())
    finally:
        engine.dispose()
