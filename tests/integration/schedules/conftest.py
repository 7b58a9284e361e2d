"""The fleet of scheduler processes; the stores come from ``store_target`` (tests/stores.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .fleet import Fleet


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    servers = Fleet(tmp_path)
    yield servers
    servers.kill_all()
    await servers.reap()
