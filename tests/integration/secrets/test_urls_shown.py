"""No password of a store URL in what the library shows: store names (the worker's ready line,
the dashboard, health reports), driver errors, the URL parsers' errors (real PostgreSQL)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from jobs import JobHandlerRegistry, JobRunner
from jobs.errors import StoreUnavailableError
from jobs.health import store_name
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
    normalize_url,
)
from redis_jobs import RedisJobDriver
from tests.stores import POSTGRES_URL
from tests.support import wait_until

SECRET = "hunter2"
QUERY_SECRET = "swordfish"
DEAD_PORT = 6613  # nothing listens there (this suite's private ports: 6600-6699)


def shown_chain(error: BaseException) -> Iterator[str]:
    """The texts of ``error`` and of every error kept behind it (cause and context)."""
    seen: BaseException | None = error
    while seen is not None:
        yield str(seen)
        yield repr(seen)
        seen = seen.__cause__ or seen.__context__


def assert_hidden(text: str) -> None:
    assert SECRET not in text
    assert QUERY_SECRET not in text


@pytest.mark.postgres
async def test_store_names_show_no_password_and_the_store_works() -> None:
    """The local server trusts any password: the query's password reaches asyncpg and works."""
    url = f"{POSTGRES_URL}?password={QUERY_SECRET}"
    prefix = f"s{uuid.uuid4().hex[:8]}_"
    store = SQLAlchemyJobStore(url, table_prefix=prefix)
    engine = create_engine(f"{POSTGRES_URL}?password={QUERY_SECRET}")
    outbox = SQLAlchemyOutboxStore(SQLAlchemyTransactionManager(engine))
    try:
        await store.counts()
        for shown in (repr(store), store_name(store), repr(outbox), store_name(outbox)):
            assert_hidden(shown)
            assert "password=***" in shown
    finally:
        await store.close()
        await drop_store(POSTGRES_URL, prefix)
        await engine.dispose()


def test_a_redis_driver_name_shows_no_password() -> None:
    driver = RedisJobDriver(url=f"redis://:{SECRET}@127.0.0.1:6379/0?password={QUERY_SECRET}")
    assert_hidden(repr(driver))
    assert_hidden(store_name(driver))


def test_a_third_party_store_whose_repr_has_a_url_is_named_without_its_password() -> None:
    class Store:
        def __repr__(self) -> str:
            return f"Store(mysql://app:{SECRET}@db/app?token={QUERY_SECRET})"

    assert store_name(Store()) == "Store(mysql://app:***@db/app?token=***)"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}@db:notaport/app",
        f"mysql://app:{SECRET}@db/app?password={QUERY_SECRET}",
        f"postgresql://app:{SECRET}@db:5432:5433/app",
    ],
)
def test_database_url_errors_show_no_password(url: str) -> None:
    with pytest.raises(ValueError) as raised:
        normalize_url(url)
    for text in shown_chain(raised.value):
        assert_hidden(text)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://app:{SECRET[:3]}/{SECRET[3:]}@127.0.0.1:6379/0",  # "/" read as the path
        f"redis://app:{SECRET}@127.0.0.1:port/0",
        f"redis+cluster://app:{SECRET[:3]}/{SECRET[3:]}@127.0.0.1:7000",
        f"redis+sentinel://app:{SECRET[:3]}/{SECRET[3:]}@127.0.0.1:26379/main",
        f"redis+sentinel://app:{SECRET}@127.0.0.1:26379/main/notadb",
        f"redis+sentinel://app:{SECRET}@127.0.0.1/main",
        f"redis+sentinel://app:{SECRET}@[::1/main",
    ],
)
def test_redis_url_errors_show_no_password_or_a_piece_of_it(url: str) -> None:
    with pytest.raises(ValueError, match="malformed") as raised:
        RedisJobDriver(url=url)
    for text in shown_chain(raised.value):
        assert_hidden(text)
        for piece in (SECRET[:3], SECRET[3:]):
            assert f"'{piece}'" not in text


@pytest.mark.postgres
async def test_health_of_a_runner_whose_store_is_down_shows_no_password() -> None:
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{DEAD_PORT}/test?password={QUERY_SECRET}"
    store = SQLAlchemyJobStore(url)
    registry = JobHandlerRegistry()

    async def handler(payload: object) -> None: ...

    registry.register("t.any", handler)
    runner = JobRunner(store, registry)
    runner.start()
    try:
        await wait_until(lambda: runner.health().store_error is not None, timeout=20)
        report = json.dumps(runner.health().as_dict())
        with pytest.raises(StoreUnavailableError) as raised:
            await store.counts()
    finally:
        await runner.close()
        await store.close()
    assert "SQLAlchemyJobStore(postgresql+asyncpg://postgres:***@127.0.0.1" in report
    assert_hidden(report)
    for text in shown_chain(raised.value):
        assert_hidden(text)
