"""A PostgreSQL that goes away and comes back (a private server, never the shared one): every
failure meanwhile is a StoreUnavailableError, pooled connections the server killed are
discarded rather than reused, and no acknowledged enqueue is lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from jobs.errors import DriverError, StoreUnavailableError
from jobs.testing import new_request
from jobs.testing.postgres_server import PostgresServer
from orm_sqlalchemy.store import SQLAlchemyJobStore
from tests.pgbouncer import free_port

pytestmark = pytest.mark.postgres

LEASE_MS = 30_000


async def _enqueue_until_it_works(store: SQLAlchemyJobStore, seconds: float) -> list[str]:
    """Enqueue until one is acknowledged; the acknowledged ids. Every refusal meanwhile must
    be a StoreUnavailableError (a caller retrying on it rides through the outage)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            job_id = await store.enqueue(new_request())
        except StoreUnavailableError:
            assert time.monotonic() < deadline, "the store never came back"
            await asyncio.sleep(0.05)
            continue
        assert job_id is not None
        return [job_id]


async def test_a_restart_and_killed_connections_are_store_unavailable_and_lose_nothing(
    tmp_path: Path,
) -> None:
    server = PostgresServer(tmp_path / "pg")
    # A port below the ephemeral range: while the server is down, no client socket of this
    # busy machine can take it (an ephemeral one did, once in a few runs, and the restart
    # failed to bind).
    server.port = free_port(range(6500, 6600))
    await server.start()
    store = SQLAlchemyJobStore(server.url, table_prefix="restart_", pool_size=4)
    acknowledged: list[str] = []
    try:
        acknowledged += await asyncio.gather(*(store.enqueue(new_request()) for _ in range(8)))
        # Killed pooled connections: discarded, never handed out again.
        assert await server.terminate_backends() >= 1
        for _ in range(3):
            acknowledged += await _enqueue_until_it_works(store, 10)

        # Down: refused connections, the server shutting down.
        stopping = asyncio.create_task(server.stop())
        refusals: list[DriverError] = []
        while not stopping.done():
            try:
                acknowledged.append(await store.enqueue(new_request()) or "")
            except DriverError as exc:
                refusals.append(exc)
        await stopping
        for _ in range(3):
            with pytest.raises(StoreUnavailableError):
                await store.enqueue(new_request())
        assert all(isinstance(exc, StoreUnavailableError) for exc in refusals), refusals

        # Starting up ("the database system is starting up"), then back.
        starting = asyncio.create_task(server.start())
        acknowledged += await _enqueue_until_it_works(store, 60)
        await starting
        acknowledged += await _enqueue_until_it_works(store, 10)

        claimed = await store.claim(1_000, LEASE_MS, ["t"])
        assert sorted(job.id for job in claimed) == sorted(acknowledged)
    finally:
        await store.close()
        await server.stop()
