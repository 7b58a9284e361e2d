"""The test side of the multi-process schedule tests: start servers, drive them, read what they did.

Each server is a ``scheduler_process`` child. Its stdout carries the protocol (``ready``,
``ran <id>``, ``bye``); its stderr, the scheduler's log, goes to a file so a killed process
loses nothing and a chatty one cannot fill a pipe. Every wait has a deadline. Only processes
started here are signalled or killed, each by its own handle.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .support import REPO_ROOT, ProcessOptions, SimulatedClock, real_ms

QUEUED = re.compile(r"queued (\S+) as job (\S+)")


@dataclass
class Server:
    process: asyncio.subprocess.Process
    log_path: Path
    output: list[str] = field(default_factory=list)

    @property
    def runs(self) -> list[str]:
        return [line.split()[1] for line in self.output if line.startswith("ran ")]

    def queued(self) -> list[tuple[str, str]]:
        """(key, job id) of every enqueue this server's scheduler won."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return [(m.group(1), m.group(2)) for m in QUEUED.finditer(text)]


class Fleet:
    """A few servers on one store; ``go()`` starts their schedulers at one simulated instant."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.servers: list[Server] = []

    async def start(self, options: list[ProcessOptions], within_s: float = 60.0) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for index, server_options in enumerate(options):
            log_path = self.log_dir / f"server-{index}.log"
            with log_path.open("wb") as log:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.integration.schedules.scheduler_process",
                    server_options.to_json(),
                    cwd=REPO_ROOT,
                    env=env,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=log,
                )
            self.servers.append(Server(process, log_path))
        await asyncio.wait_for(
            asyncio.gather(*(self._expect(s, "ready") for s in self.servers)), within_s
        )

    async def _expect(self, server: Server, wanted: str) -> None:
        assert server.process.stdout is not None
        line = (await server.process.stdout.readline()).decode().strip()
        if line != wanted:
            raise AssertionError(
                f"server said {line!r}, expected {wanted!r}; its log:\n{self.log(server)}"
            )

    def go(self, start_ms: int, *clocks: SimulatedClock) -> None:
        """Start every scheduler now, at simulated ``start_ms``; ``clocks`` follow the same time."""
        anchor = real_ms()
        for clock in clocks:
            clock.begin(start_ms, anchor)
        line = f"go {start_ms} {anchor}\n".encode()
        for server in self.servers:
            assert server.process.stdin is not None
            server.process.stdin.write(line)

    async def stop(self, within_s: float = 30.0) -> None:
        """Ask every live server to close, and wait for all to exit."""
        for server in self.servers:
            stdin = server.process.stdin
            if server.process.returncode is None and stdin is not None:
                stdin.write(b"stop\n")
                await stdin.drain()
        await asyncio.wait_for(asyncio.gather(*(self._finish(s) for s in self.servers)), within_s)

    async def _finish(self, server: Server) -> None:
        assert server.process.stdout is not None
        rest = await server.process.stdout.read()
        server.output.extend(rest.decode().splitlines())
        await server.process.wait()

    def signal(self, index: int, signum: signal.Signals) -> None:
        self.servers[index].process.send_signal(signum)

    def kill_all(self) -> None:
        """Teardown: kill whatever of ours is still running (SIGCONT first, if paused)."""
        for server in self.servers:
            if server.process.returncode is None:
                try:
                    server.process.send_signal(signal.SIGCONT)
                    server.process.kill()
                except ProcessLookupError:
                    pass

    async def reap(self) -> None:
        for server in self.servers:
            await server.process.wait()

    def log(self, server: Server) -> str:
        return server.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    # -- what the servers did ------------------------------------------------------------------

    def runs(self) -> Counter[str]:
        """Job id -> how many times a handler ran it, over every server."""
        return Counter(job_id for server in self.servers for job_id in server.runs)

    def queued(self) -> dict[str, list[str]]:
        """Key -> the job ids stored for it, over every server's enqueues."""
        found: dict[str, list[str]] = {}
        for server in self.servers:
            for key, job_id in server.queued():
                found.setdefault(key, []).append(job_id)
        return found

    def check_exits(self, *, killed: frozenset[int] = frozenset()) -> None:
        for index, server in enumerate(self.servers):
            code = server.process.returncode
            if index in killed:
                assert code == -signal.SIGKILL, f"server {index} exited {code}"
                continue
            assert code == 0, f"server {index} exited {code}; its log:\n{self.log(server)}"
            assert server.output[-1:] == ["bye"], f"server {index} said {server.output}"
