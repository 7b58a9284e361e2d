"""``neverlost dashboard``: the console script serving the dashboard of an APP."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx

from tests.support import wait_until

REPO = Path(__file__).resolve().parents[2]
NEVERLOST = str(Path(sys.executable).parent / "neverlost")


async def test_neverlost_dashboard_serves_an_app_read_only_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "out.txt"
    with out.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            NEVERLOST,
            "dashboard",
            "tests.web.scenario:DashboardScenario",
            "--port",
            "0",
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        line = re.compile(r"on http://127\.0\.0\.1:(\d+)/ \(read-only\)")

        def announced() -> bool:
            if process.returncode is not None:
                raise AssertionError(f"neverlost dashboard exited: {out.read_text()}")
            return line.search(out.read_text()) is not None

        await wait_until(announced, timeout=30, interval=0.05, message="the dashboard's address")
        match = line.search(out.read_text())
        assert match is not None
        url = f"http://127.0.0.1:{match.group(1)}"

        async def serving() -> bool:
            if process.returncode is not None:
                raise AssertionError(f"neverlost dashboard exited: {out.read_text()}")
            try:
                async with httpx.AsyncClient() as client:
                    return (await client.get(f"{url}/")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(serving, timeout=30, interval=0.1, message="the dashboard to serve")
        async with httpx.AsyncClient(base_url=url) as client:
            schedules = await client.get("/schedules")
            refused = await client.post("/actions/retry", data={"job_id": "x"})
        assert 'data-schedule="report.nightly"' in schedules.text
        assert refused.status_code == 403
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 15) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
