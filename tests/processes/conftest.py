from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.stores import StoreTarget

REPO = Path(__file__).resolve().parents[2]


class Worker:
    """A worker process; ``kill()`` is SIGKILL, ``stop()`` SIGTERM and a clean exit."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    async def stop(self, timeout: float = 15) -> int:  # noqa: ASYNC109 - a deadline to exit
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), timeout)


SpawnWorker = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def spawn_worker(tmp_path: Path) -> AsyncIterator[SpawnWorker]:
    workers: list[Worker] = []

    async def spawn(target: StoreTarget, ledger: Path, **options: Any) -> Worker:
        args = ["--target", target.to_json(), "--ledger", str(ledger)]
        for name, value in options.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        log = tmp_path / f"worker-{len(workers)}.log"
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.processes.worker", *args,
                cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        worker = Worker(process, log)
        workers.append(worker)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 30)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            raise AssertionError(f"worker did not start: {log.read_text()[-3000:]}")
        return worker

    yield spawn
    for worker in workers:
        if worker.process.returncode is None:
            worker.kill()
            await worker.process.wait()


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
