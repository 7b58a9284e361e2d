"""A private PostgreSQL server for fault tests: its own data directory and loopback port.

Shipped with the chaos kit, which terminates its backends and restarts it; never the server an
application or another test uses. ``initdb`` and ``pg_ctl`` come from PATH or PostgreSQL's
Debian directories. PostgreSQL refuses to run as root: as root, the commands run as the
``postgres`` user (``runuser``) and the directory is handed to it.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import socket
import stat
import time
from pathlib import Path

from jobs.errors import require_extra

require_extra("jobs.testing.postgres_server", "postgres", "asyncpg")

import asyncpg  # type: ignore[import-untyped]  # noqa: E402

START_TIMEOUT_S = 30.0


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(f"{name} not found: install PostgreSQL's server package")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _let_postgres_reach(directory: Path) -> None:
    """Hand ``directory`` to the postgres user and let it traverse (not list) the parents."""
    shutil.chown(directory, "postgres", "postgres")
    for parent in directory.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


class PostgresServer:
    """One postgres on 127.0.0.1:``port``, data and socket in ``directory``, trust auth."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = _free_port()

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    async def _run(self, *argv: str) -> None:
        prefix: list[str] = []
        if os.geteuid() == 0:
            prefix = [_binary("runuser"), "-u", "postgres", "--"]
        process = await asyncio.create_subprocess_exec(
            *prefix, *argv, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{output.decode(errors='replace')}")

    async def start(self) -> None:
        """initdb on first start, then start and wait until it accepts connections."""
        if not self.data.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                _let_postgres_reach(self.directory)
            await self._run(_binary("initdb"), "-D", str(self.data), "-A", "trust",
                            "-U", "postgres", "--no-sync")  # fmt: skip
        await self._pg_ctl("start")
        await self.wait_until_ready()

    async def restart(self) -> None:
        """``pg_ctl restart -m fast``: clients are cut off, the server comes back."""
        await self._pg_ctl("restart", "-m", "fast")
        await self.wait_until_ready()

    async def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            await self._run(_binary("pg_ctl"), "-D", str(self.data), "stop", "-m", "fast", "-w")

    async def _pg_ctl(self, *action: str) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.directory} -c fsync=on")  # fmt: skip
        await self._run(_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                        "-o", options, "-w", *action)  # fmt: skip

    async def wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                connection = await asyncpg.connect(
                    host="127.0.0.1", port=self.port, user="postgres", database="postgres"
                )
            except (OSError, asyncpg.PostgresError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres on port {self.port} did not come up") from None
                await asyncio.sleep(0.1)
            else:
                await connection.close()
                return

    async def terminate_backends(self) -> int:
        """``pg_terminate_backend`` of every client backend but the caller's; how many."""
        connection = await asyncpg.connect(
            host="127.0.0.1", port=self.port, user="postgres", database="postgres"
        )
        try:
            return int(
                await connection.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
            )
        finally:
            await connection.close()
