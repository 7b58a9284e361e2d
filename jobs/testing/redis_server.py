"""A private redis-server for fault tests: started on a free loopback port, stopped at teardown.

Shipped with the chaos kit (jobs.testing.chaos) and used by the project's own fault tests. Tests
that stop, restart or reconfigure Redis use one of these instead of the shared server on
127.0.0.1:6379, which they never touch. The server writes its append-only file (and its log)
under the test's ``tmp_path``; ``restart()`` brings it back on the same port and directory, so it
reloads what it had acknowledged. Every wait has a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import time
from pathlib import Path

from jobs.errors import require_extra

require_extra("jobs.testing.redis_server", "redis", "redis")

from redis import exceptions as redis_errors  # noqa: E402
from redis.asyncio import Redis  # noqa: E402
from redis.asyncio.retry import Retry  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
DURABLE = ("--appendonly", "yes", "--appendfsync", "always")
"""Every write Redis acknowledges is in the append-only file, fsynced, before the reply."""


def redis_server_binary() -> str:
    """The redis-server on PATH; the test fails (it does not skip) without one."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not on PATH; the Redis fault tests need it")
    return binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process on 127.0.0.1:``port`` with its files in ``directory``."""

    def __init__(self, directory: Path, options: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.options = options
        self.port = free_port()
        self.log = directory / "redis.log"
        self._binary = redis_server_binary()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    def admin(self) -> Redis:
        """A client that fails fast (no retries): for probing and inspecting the server."""
        return Redis.from_url(self.url, retry=Retry(NoBackoff(), 0), socket_timeout=5)

    async def start(self) -> None:
        """Start the server and wait until it has loaded its data and answers."""
        if self.running:
            raise RuntimeError("the private redis-server is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process = await asyncio.create_subprocess_exec(
            self._binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.log),
            *DURABLE,
            *self.options,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await self._wait_until_ready()

    async def stop(self) -> None:
        """SIGTERM: Redis shuts down cleanly (its append-only file flushed); wait for the exit."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await self._wait_for_exit("SIGTERM")

    async def shutdown(self) -> None:
        """SHUTDOWN: Redis fsyncs its append-only file and exits at once; wait for the exit."""
        admin = self.admin()
        try:
            await admin.shutdown()  # the server closes the connection instead of replying
        finally:
            await admin.aclose()
        await self._wait_for_exit("SHUTDOWN")

    async def kill(self) -> None:
        """SIGKILL if still running, and reap the process."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            process.kill()
        await process.wait()
        self._process = None

    async def _wait_for_exit(self, how: str) -> None:
        process = self._process
        assert process is not None
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            await self.kill()
            raise RuntimeError(
                f"redis-server did not exit within {STOP_TIMEOUT_S} s of {how}:\n{self._log_tail()}"
            ) from None
        self._process = None

    async def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        client = self.admin()
        try:
            while True:
                if not self.running:
                    raise RuntimeError(f"redis-server exited at start:\n{self._log_tail()}")
                try:
                    info = await client.info("persistence")
                    if not int(info.get("loading", 0)):
                        return
                except (redis_errors.ConnectionError, redis_errors.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not answer within {START_TIMEOUT_S} s:\n"
                        f"{self._log_tail()}"
                    )
                await asyncio.sleep(0.01)
        finally:
            await client.aclose()

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no redis-server log)"


class RedisServers:
    """Private servers started for one test; ``stop_all()`` at teardown stops every one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.servers: list[RedisServer] = []

    async def start(self, *options: str) -> RedisServer:
        """A started server with extra redis-server ``options`` (``"--maxmemory-policy", ...``)."""
        server = RedisServer(self.directory / f"redis-{len(self.servers)}", options)
        self.servers.append(server)
        await server.start()
        return server

    async def stop_all(self) -> None:
        for server in self.servers:
            try:
                await server.stop()
            finally:
                await server.kill()
