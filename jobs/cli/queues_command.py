"""``neverlost queues list|pause NAME|resume NAME``: the named queues, and pausing them in the
store (every worker stops claiming from a paused queue within one poll interval; jobs running
finish; enqueues go on). Pauses and resumes are recorded in the audit trail."""

from __future__ import annotations

from typing import Any

import click

from ..errors import JobOptionError
from .errors import CliUsageError
from .group import cli
from .render import console, json_option, print_json, table
from .running import run_on_target
from .target import Target, target_options, target_spec
from .write_commands import CLI_ACTOR


@cli.group()
def queues() -> None:
    """The named queues: list them, pause or resume one."""


@queues.command("list")
@target_options
@json_option
def list_queues(as_json: bool, **params: Any) -> None:
    """Each queue with a live job, each paused one, each with limits, and default: paused,
    due, scheduled, active, failed, workers, limits."""

    async def work(target: Target) -> None:
        try:
            found = await target.queue.list_queues()
        except NotImplementedError as exc:
            raise CliUsageError(str(exc)) from None
        if as_json:
            print_json({"queues": found})
            return
        columns = ("name", "paused", "due", "scheduled", "active", "failed", "workers", "limits")
        rows = [
            [q.name, "PAUSED" if q.paused else "", q.due, q.scheduled, q.active,
             "-" if q.failed is None else q.failed, q.workers,
             q.limits.describe() if q.limits else ""]
            for q in found
        ]  # fmt: skip
        console().print(table(f"queues of {target.description}", columns, rows))

    run_on_target(target_spec(params), work, create=False)


def _change(verb: str, name: str, params: dict[str, Any], as_json: bool) -> None:
    async def work(target: Target) -> None:
        change = target.queue.pause_queue if verb == "pause" else target.queue.resume_queue
        try:
            changed = await change(name, actor=CLI_ACTOR)
        except (JobOptionError, NotImplementedError) as exc:
            raise CliUsageError(" ".join(str(exc).split())) from None
        done = "paused" if verb == "pause" else "resumed"
        if as_json:
            print_json({"queue": name, done: changed})
            return
        if changed:
            click.echo(f"{done} queue {name}")
        else:
            click.echo(f"queue {name} was {'already paused' if verb == 'pause' else 'not paused'}")

    run_on_target(target_spec(params), work)


@queues.command("pause")
@click.argument("name")
@target_options
@json_option
def pause(name: str, as_json: bool, **params: Any) -> None:
    """Pause queue NAME: workers stop claiming from it within one poll interval (jobs running
    finish; enqueues still succeed, and wait)."""
    _change("pause", name, params, as_json)


@queues.command("resume")
@click.argument("name")
@target_options
@json_option
def resume(name: str, as_json: bool, **params: Any) -> None:
    """Resume queue NAME: workers claim from it again within one poll interval."""
    _change("resume", name, params, as_json)
