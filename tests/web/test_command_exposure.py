"""``neverlost dashboard`` (the console script): its store line shows no password; on loopback it
warns of nothing; beyond loopback it logs a warning and every page carries a banner (run in a
private network namespace, where 0.0.0.0 is only that namespace's loopback); ``--redact-keys``
hides payload fields."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from jobs import JobQueue
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import SQLAlchemyJobStore
from tests.stores import POSTGRES_URL

from .exposed import run_dashboard

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = {"user": "ann", "password": "hunter2", "nested": [{"Password": "swordfish"}]}


async def plant(url: str, table_prefix: str = "jobs_") -> str:
    store = SQLAlchemyJobStore(url, table_prefix=table_prefix)
    try:
        job_id = await JobQueue(store).enqueue("user.create", PAYLOAD)
    finally:
        await store.close()
    assert job_id is not None
    return job_id


def assert_redacted(page: str) -> None:
    assert "hunter2" not in page
    assert "swordfish" not in page
    assert "&#34;password&#34;: &#34;***&#34;" in page
    assert "&#34;Password&#34;: &#34;***&#34;" in page


@pytest.mark.postgres
async def test_on_loopback_no_warning_and_the_store_line_shows_no_password() -> None:
    prefix = f"d{uuid.uuid4().hex[:8]}_"
    url = f"{POSTGRES_URL}?password=sesame"
    job_id = await plant(url, prefix)
    try:
        result = await run_dashboard(
            ["--url", url, "--table-prefix", prefix, "--redact-keys", "password"],
            host="127.0.0.1",
            path=f"/job/{job_id}",
        )
    finally:
        await drop_store(POSTGRES_URL, prefix)
    assert result["status"] == 200, result
    assert "sesame" not in result["output"]
    assert "?password=***" in result["output"]
    assert "warning" not in result["output"].lower()
    assert 'data-testid="banner"' not in result["page"]
    assert_redacted(result["page"])


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "ip", "link", "set", "lo", "up"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs a private network namespace (unshare)")
async def test_beyond_loopback_a_logged_warning_and_a_banner_on_every_page(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"
    job_id = await plant(url)
    script = (
        "ip link set lo up && exec "
        f"{sys.executable} -m tests.web.exposed --host 0.0.0.0 --path /job/{job_id} -- "
        f"--url {url} --redact-keys password"
    )
    process = await asyncio.create_subprocess_exec(
        "unshare", "--net", "sh", "-c", script,
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["status"] == 200, result
    warnings = [line for line in result["output"].splitlines() if "WARNING" in line]
    assert len(warnings) == 1, result["output"]
    assert "listens on 0.0.0.0, beyond this machine, with no login" in warnings[0]
    assert 'data-testid="banner"' in result["page"]
    assert "listens on 0.0.0.0, beyond this machine, with no login" in result["page"]
    assert_redacted(result["page"])
