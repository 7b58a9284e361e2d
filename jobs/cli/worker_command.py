"""The ``worker`` command's options (the process itself is jobs.cli.worker)."""

from __future__ import annotations

import asyncio

import click

from ..errors import JobOptionError, require_extra
from ..options import QueueWeights, parse_queues
from .group import cli
from .logs import LEVELS, configure_logging
from .worker import WorkerOptions, WorkerProcess


def _types(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    types = tuple(part.strip() for part in value.split(",") if part.strip())
    if not types:
        raise click.BadParameter("name at least one job type, e.g. --types email.send,report.build")
    return types


def _queues(_ctx: click.Context, _param: click.Parameter, value: str | None) -> QueueWeights | None:
    if value is None:
        return None
    try:
        return parse_queues(value)
    except JobOptionError as exc:
        raise click.BadParameter(" ".join(str(exc).split())) from None


@cli.command()
@click.argument("app", envvar="NEVERLOST_APP")
@click.option(
    "--concurrency", type=click.IntRange(min=1), help="Jobs run at once [JobsSettings.concurrency]."
)
@click.option(
    "--types", callback=_types, help="Claim only these job types (comma-separated) [all handled]."
)
@click.option(
    "--queues",
    callback=_queues,
    help="Claim only from these named queues: critical,default (strict order: the first "
    "drained before the next) or critical=3,default=1 (weights) [JobsSettings.queues, else "
    "default and the queues the handlers name].",
)
@click.option(
    "--burst",
    is_flag=True,
    help="Relay the outbox entries waiting, run what is due, then exit 0 (for cron and CI).",
)
@click.option("--no-relay", is_flag=True, help="Do not run the outbox relay in this process.")
@click.option("--no-scheduler", is_flag=True, help="Do not queue cron schedules from this process.")
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=25.0,
    show_default=True,
    help="Seconds to let jobs in flight finish after SIGTERM; the rest are handed back.",
)
@click.option(
    "--startup-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to keep retrying an unreachable store at start before exiting 1.",
)
@click.option(
    "--health-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve GET /healthz on this port (200 healthy, 503 not; JSON).",
)
@click.option("--health-host", default="0.0.0.0", show_default=True, help="Address of /healthz.")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    help="The lowest level logged (to stderr).",
)
@click.option("--log-json", is_flag=True, help="Log one JSON object a line (loguru serialize).")
def worker(
    app: str,
    concurrency: int | None,
    types: tuple[str, ...],
    queues: QueueWeights | None,
    burst: bool,
    no_relay: bool,
    no_scheduler: bool,
    drain_timeout: float,
    startup_timeout: float,
    health_port: int | None,
    health_host: str,
    log_level: str,
    log_json: bool,
) -> int:
    """Run a worker for APP: the runner, the outbox relay (when APP has an outbox store) and
    the scheduler.

    SIGTERM or SIGINT stops claiming, lets the jobs in flight finish (up to --drain-timeout),
    closes the application and exits 0; a second signal cancels what is still running (each
    job is retried after its lease) and exits 1. A store that does not answer within
    --startup-timeout exits 1 naming it.
    """
    if health_port is not None:  # its HTTP server is the dashboard's stack
        require_extra("neverlost worker --health-port", "dashboard", "starlette", "uvicorn")
    configure_logging(log_level, json_lines=log_json)
    options = WorkerOptions(
        app=app,
        concurrency=concurrency,
        types=types,
        queues=queues,
        burst=burst,
        relay=not no_relay,
        scheduler=not no_scheduler,
        drain_timeout_s=drain_timeout,
        startup_timeout_s=startup_timeout,
        health_port=health_port,
        health_host=health_host,
    )
    return asyncio.run(WorkerProcess(options).run())
