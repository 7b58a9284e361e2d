"""Stores found by URL scheme through the ``neverlost.drivers`` entry points."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs import InProcessJobDriver
from jobs import drivers as registry
from jobs.drivers import UnknownSchemeError, factory_for, known_schemes, open_driver
from jobs.spi import JobDriver


def memory_factory(url: str, **options: object) -> JobDriver:
    """A third party's bare factory callable (no drop, no outbox)."""
    return InProcessJobDriver()


@pytest.fixture
def forget_entry_points() -> Iterator[None]:
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()


def test_both_drivers_register_their_schemes() -> None:
    schemes = set(known_schemes())
    assert {"sqlite+aiosqlite", "postgresql", "postgres", "redis", "rediss"} <= schemes
    assert factory_for("sqlite+aiosqlite:///x.db").open_outbox is not None
    assert factory_for("redis://127.0.0.1/0").open_outbox is None


def test_an_unknown_scheme_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(UnknownSchemeError) as caught:
        open_driver("mysql://root:hunter2@db/jobs")
    message = str(caught.value)
    assert "\n" not in message
    assert "'mysql'" in message
    assert "sqlite+aiosqlite://" in message
    assert "redis://" in message
    assert "hunter2" not in message
    assert isinstance(caught.value, ValueError)


def test_a_url_without_a_scheme_says_so() -> None:
    with pytest.raises(UnknownSchemeError, match="has no scheme"):
        factory_for("jobs.db")


def test_a_sql_url_opens_a_sql_store_without_a_driver_import_in_the_engine(
    tmp_path: Path,
) -> None:
    driver = open_driver(f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}", create=False)
    assert type(driver).__module__.startswith("orm_sqlalchemy")
    assert not (tmp_path / "jobs.db").exists()  # create=False: no file


def test_options_a_store_does_not_take_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="namespace is for redis://"):
        open_driver("sqlite+aiosqlite:///x.db", namespace="n")
    with pytest.raises(ValueError, match="table_prefix is for SQL"):
        open_driver("redis://127.0.0.1:1/0", table_prefix="t_")


async def test_a_third_party_driver_registers_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_entry_points: None
) -> None:
    dist = tmp_path / "memory_jobs-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: memory-jobs\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[neverlost.drivers]\nmemory = {__name__}:memory_factory\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "memory" in known_schemes()
    driver = open_driver("memory://anything")
    assert isinstance(driver, InProcessJobDriver)
    await driver.close()
    assert factory_for("memory://x").drop is None
