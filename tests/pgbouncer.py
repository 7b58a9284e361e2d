"""A private PgBouncer (Debian's package) in transaction mode, in front of the test database.

Started by the tests on a free loopback port in 6400-6599 with its own config directory, and
stopped afterwards. ``PGBOUNCER_URLS`` are the URL and the options that docs/how-to/pgbouncer.md
gives for a store behind it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.stores import POSTGRES_URL

PORTS = range(6400, 6600)
POOL_SIZE = 6
"""Server connections per PgBouncer: few, for the shared server's max_connections."""


@dataclass(frozen=True)
class PgBouncer:
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The documented URL of a store behind PgBouncer in transaction mode."""
        server = make_url(POSTGRES_URL)
        return (
            f"postgresql+asyncpg://{server.username}@127.0.0.1:{self.port}/{server.database}"
            "?prepared_statement_cache_size=0"
        )


def free_port(ports: range = PORTS) -> int:
    """A free loopback port of ``ports`` (this engineer's private range, below the ephemeral
    one, so no client socket takes it while a server restarts)."""
    for port in ports:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {ports}")


@contextmanager
def running_pgbouncer(pool_size: int = POOL_SIZE) -> Iterator[PgBouncer]:
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(binary):
        raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    server = make_url(POSTGRES_URL)
    home = Path(tempfile.mkdtemp(prefix="neverlost-pgbouncer-"))
    home.chmod(0o755)  # run as root, PgBouncer drops to "nobody", who must read its config
    port = free_port()
    log = home / "pgbouncer.log"
    (home / "users.txt").write_text(f'"{server.username}" ""\n')
    (home / "pgbouncer.ini").write_text(
        f"""[databases]
{server.database} = host={server.host} port={server.port or 5432} dbname={server.database}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / 'users.txt'}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
server_reset_query =
server_idle_timeout = 60
ignore_startup_parameters = extra_float_digits
logfile = {log}
"""
    )
    for path in home.iterdir():
        path.chmod(0o644)
    log.touch(mode=0o666)
    log.chmod(0o666)
    args = [binary, str(home / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "nobody"]
    with (home / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait_for_port(port, process, home)
        yield PgBouncer(port, log)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(home, ignore_errors=True)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], home: Path) -> None:
    log = home / "pgbouncer.log"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = (home / "stderr.txt").read_text()
            raise RuntimeError(f"pgbouncer exited: {stderr}{log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"pgbouncer did not listen on {port}: {log.read_text()}")
