"""``neverlost dashboard (APP | --url) [--host H] [--port P] [--allow-actions]
[--redact-keys K,...]``: serve it.

Imported lazily by the ``neverlost`` group (``jobs.cli.group.LAZY_COMMANDS``), so the worker
command never loads the web stack. The dashboard has no login: by default it listens on
loopback only; on any other host it logs a warning and every page shows one (job payloads and
errors are readable by whoever reaches the address).
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
from types import FrameType
from typing import Any

import click
import uvicorn
from loguru import logger

from ..cli.errors import CliUsageError, StoreError
from ..cli.redact import redact_keys_option
from ..cli.running import STORE_FAILURES, describe_failure
from ..cli.target import Target, open_target, target_options, target_spec
from ..errors import StoreSchemaError
from .app import create_dashboard

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@click.command()
@target_options
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Interface to listen on.")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free one, printed at start).",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Show retry, cancel and delete buttons (off: read-only, every POST answers 403).",
)
@redact_keys_option
def dashboard(**params: Any) -> None:
    """Serve the web dashboard of the store (overview, jobs, schedules) until interrupted."""
    spec = target_spec(params)
    host: str = params["host"]
    port: int = params["port"]
    allow_actions: bool = params["allow_actions"]
    redact = params["redact"]
    banner = None if _is_loopback(host) else exposure_warning(host, allow_actions)
    if banner is not None:
        logger.warning("{}", banner)

    async def serve() -> None:
        try:
            target = await open_target(spec, create=False)
        except STORE_FAILURES as exc:
            raise StoreError(f"store unreachable: {describe_failure(exc)}") from None
        try:
            await _check_exists(target)
            app = create_dashboard(
                target.context or target.queue,
                allow_actions=allow_actions,
                redact=redact,
                banner=banner,
            )
            sock = _listen(host, port)
            mode = "actions on" if allow_actions else "read-only"
            url = f"http://{_authority(host, sock.getsockname()[1])}/"
            click.echo(f"neverlost dashboard for {target.description} on {url} ({mode})")
            config = uvicorn.Config(app, log_level="warning", lifespan="off")
            stop.server = uvicorn.Server(config)
            await stop.server.serve(sockets=[sock])
        finally:
            await target.close()

    stop = _Stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    asyncio.run(serve())


async def _check_exists(target: Target) -> None:
    """One line naming what is missing when the ``--url`` store is not there (the dashboard
    creates nothing); a store that is down is served as 503 pages until it answers."""
    try:
        await target.driver.counts()
    except StoreSchemaError as exc:
        raise StoreError(f"nothing to show: {exc}") from None
    except STORE_FAILURES:
        return


class _Stop:
    """SIGINT/SIGTERM outside uvicorn's own handlers.

    uvicorn shuts down gracefully on a signal, restores the handlers it found, then raises the
    signal again "to trigger the expected behaviour": with the default handler that would end
    the process by the signal before the store is closed. This handler makes a signal once
    serving has begun mean "stop serving" (again, harmlessly), so the command closes the store
    and exits 0; before serving, it interrupts.
    """

    server: uvicorn.Server | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.server is None:
            raise KeyboardInterrupt
        self.server.should_exit = True


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before uvicorn starts so the printed port is the real one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliUsageError(f"cannot listen on {_authority(host, port)}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def exposure_warning(host: str, allow_actions: bool) -> str:
    """What a dashboard listening on ``host`` (not loopback) warns about."""
    actions = (
        " and actions are on: anyone who reaches it can retry, cancel and delete jobs"
        if allow_actions
        else ""
    )
    return (
        f"this dashboard listens on {host}, beyond this machine, with no login{actions}; every "
        "job's payload and errors are readable there. Put it behind your own authentication "
        "(or serve it on 127.0.0.1 and reach it through an SSH tunnel); --redact-keys hides "
        "payload fields"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
