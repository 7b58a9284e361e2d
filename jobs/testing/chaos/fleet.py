"""Worker processes of a chaos run: started, SIGKILLed at random and replaced, stopped."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .stores import ChaosStore


@dataclass(frozen=True)
class WorkerOptions:
    lease_ms: int = 3_000
    concurrency: int = 8
    handler_ms: int = 50
    effects: str | None = None
    """An ``EffectsTarget`` as JSON: the workers' handlers commit effects there."""


@dataclass
class Fleet:
    """The worker processes on one store, all writing to one ledger; logs go to ``log_dir``."""

    store: ChaosStore
    ledger: Path
    log_dir: Path
    options: WorkerOptions = WorkerOptions()
    rng: random.Random = field(default_factory=random.Random)
    killed: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    _live: list[asyncio.subprocess.Process] = field(default_factory=list)
    _started: int = 0

    async def start(self, count: int) -> None:
        await asyncio.gather(*(self.spawn() for _ in range(count)))

    async def spawn(self) -> int:
        self._started += 1
        log = self.log_dir / f"worker-{self._started}.log"
        args = [
            "--store", self.store.to_json(), "--ledger", str(self.ledger),
            "--lease-ms", str(self.options.lease_ms),
            "--concurrency", str(self.options.concurrency),
            "--handler-ms", str(self.options.handler_ms),
        ]  # fmt: skip
        if self.options.effects is not None:
            args += ["--effects", self.options.effects]
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "jobs.testing.chaos.worker", *args,
                stdout=asyncio.subprocess.PIPE, stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        self._live.append(process)
        self.pids.append(process.pid)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 60)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            process.kill()
            await process.wait()
            raise RuntimeError(f"chaos worker did not start; its log ({log}):\n{log.read_text()}")
        return process.pid

    async def kill_one(self) -> int:
        """SIGKILL a random live worker and start another in its place; the killed pid."""
        process = self.rng.choice(self._live)
        process.send_signal(signal.SIGKILL)
        self.killed.append(process.pid)
        await process.wait()
        self._live.remove(process)
        await self.spawn()
        return process.pid

    def exited(self) -> list[int]:
        """Exit codes of workers that ended on their own (none should, whatever the store does)."""
        return [p.returncode for p in self._live if p.returncode is not None]

    async def stop(self, timeout_s: float = 30) -> list[int]:
        """SIGTERM every live worker; the exit codes (each should drain and exit 0)."""
        for process in self._live:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), timeout_s) for p in self._live]
        self._live.clear()
        return codes

    async def abandon(self) -> None:
        """Kill whatever still runs (teardown after a failure)."""
        for process in self._live:
            if process.returncode is None:
                process.kill()
                await process.wait()
        self._live.clear()
