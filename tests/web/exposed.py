"""Run ``neverlost dashboard ARGS --host H --port 0``, GET one page through 127.0.0.1, stop it
with SIGTERM; the result as JSON (``python -m tests.web.exposed``, inside a network namespace
for a host beyond loopback) or as a dict (``run_dashboard``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
NEVERLOST = str(Path(sys.executable).parent / "neverlost")
ANNOUNCED = re.compile(r" on http://\S+:(\d+)/ \(")


async def run_dashboard(args: list[str], *, host: str, path: str) -> dict[str, Any]:
    """The command's output (stdout and stderr), the page's status, headers and text."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.txt"
        with out.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                NEVERLOST, "dashboard", *args, "--host", host, "--port", "0",
                cwd=REPO, env=env, stdout=sink, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
        try:
            port = await _announced_port(process, out)
            response = await _get(f"http://127.0.0.1:{port}{path}")
            process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(process.wait(), 15)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        return {
            "output": _read(out),
            "exit_code": code,
            "status": response.status_code,
            "headers": dict(response.headers),
            "page": response.text,
        }


def _read(out: Path) -> str:
    return out.read_text(errors="replace")


async def _announced_port(process: asyncio.subprocess.Process, out: Path) -> int:
    for _ in range(600):
        match = ANNOUNCED.search(_read(out))
        if match is not None:
            return int(match.group(1))
        if process.returncode is not None:
            raise RuntimeError(f"neverlost dashboard exited: {_read(out)}")
        await asyncio.sleep(0.05)
    raise RuntimeError(f"neverlost dashboard did not announce its port: {_read(out)}")


async def _get(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            try:
                return await client.get(url)
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"no answer from {url}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = [arg for arg in options.args if arg != "--"]
    result = asyncio.run(run_dashboard(args, host=options.host, path=options.path))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
