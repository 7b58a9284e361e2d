"""SQLite files the library creates are private (0600, and so their -wal and -shm files); a
store that may create nothing refuses a missing file, naming it, and leaves none behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from jobs import JobQueue
from jobs.errors import StoreSchemaError
from orm_sqlalchemy import SQLAlchemyJobStore, create_engine


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(folder: Path) -> dict[str, int]:
    """Every file and directory under ``folder``, by its path relative to it, and its mode."""
    return {str(path.relative_to(folder)): mode(path) for path in folder.rglob("*")}


async def test_a_store_creates_its_database_and_wal_files_0600(tmp_path: Path) -> None:
    database = tmp_path / "jobs.db"
    store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{database}")
    try:
        assert await JobQueue(store).enqueue("mail.send", {"to": "a@example.com"})
        files = modes(tmp_path)
    finally:
        await store.close()
    assert files["jobs.db"] == 0o600
    assert files["jobs.db-wal"] == 0o600
    assert files["jobs.db-shm"] == 0o600


async def test_an_engine_of_create_engine_creates_a_private_file_even_with_a_lax_umask(
    tmp_path: Path,
) -> None:
    database = tmp_path / "app.db"
    old = os.umask(0o000)
    try:
        engine = create_engine(f"sqlite:///{database}")
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (x INTEGER)"))
        await engine.dispose()
    finally:
        os.umask(old)
    assert mode(database) == 0o600


async def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    database = tmp_path / "shared.db"
    database.touch()
    database.chmod(0o640)
    store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{database}")
    try:
        await store.counts()
    finally:
        await store.close()
    assert mode(database) == 0o640


@pytest.mark.parametrize("where", ["missing.db", "no/such/dir/jobs.db"])
async def test_a_store_that_creates_nothing_refuses_a_missing_file_and_creates_none(
    tmp_path: Path, where: str
) -> None:
    database = tmp_path / where
    store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{database}", create_tables=False)
    try:
        with pytest.raises(StoreSchemaError, match="no SQLite database at") as raised:
            await store.counts()
        with pytest.raises(StoreSchemaError):
            await store.check_schema()
    finally:
        await store.close()
    assert str(database) in str(raised.value)
    assert modes(tmp_path) == {}  # no file, no lock file, no directory
