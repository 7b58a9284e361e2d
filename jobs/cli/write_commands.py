"""Commands that change the store: retry, cancel, purge."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..audit import Actor, process_actor_name
from .durations import Duration, format_ms
from .errors import CliUsageError, CommandFailed
from .group import cli
from .hints import check_type_known, settle_all
from .render import console, json_option, print_json
from .running import run_on_target
from .target import Target, id_target_options, target_options, target_spec
from .terminal import terminal_text

PAGE = 500
PARALLEL = 16
PURGEABLE = ("pending", "completed", "failed", "cancelled")


async def _each(ids: list[str], action: Any, label: str, quiet: bool) -> dict[str, bool]:
    """Apply ``action`` to every id, at most PARALLEL at once; a progress bar on a terminal.

    After a failure (the store went away) no new call starts; those under way end, and the
    first error is raised (``settle_all``: no call is left running as the command exits)."""
    results: dict[str, bool] = {}
    gate = asyncio.Semaphore(PARALLEL)
    failed = False
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    bar = console(stderr=True)
    shown = not quiet and len(ids) > 1 and bar.is_terminal
    with Progress(*columns, console=bar, disable=not shown, transient=True) as progress:
        task = progress.add_task(label, total=len(ids))

        async def one(job_id: str) -> None:
            nonlocal failed
            async with gate:
                if failed:
                    return
                try:
                    results[job_id] = await action(job_id)
                except BaseException:
                    failed = True
                    raise
            progress.advance(task)

        await settle_all(*(one(job_id) for job_id in ids))
    return results


CLI_ACTOR = Actor(process_actor_name(), "cli")
"""Who the audit trail says acted: the shell's user@host."""


def _acting(change: Callable[..., Awaitable[bool]]) -> Callable[[str], Awaitable[bool]]:
    async def act(job_id: str) -> bool:
        return await change(job_id, actor=CLI_ACTOR)

    return act


async def _failed_ids(target: Target, job_type: str | None) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await target.queue.list_jobs(
            state="failed", type=job_type, limit=PAGE, cursor=cursor
        )
        ids.extend(job.id for job in page.jobs)
        cursor = page.next_cursor
        if cursor is None:
            return ids


async def _states(target: Target, ids: list[str]) -> dict[str, str]:
    infos = await settle_all(*(target.queue.get_job(job_id) for job_id in ids))
    return {
        job_id: (info.state if info else "not found")
        for job_id, info in zip(ids, infos, strict=True)
    }


def _report(verb: str, results: dict[str, bool], states: dict[str, str], as_json: bool) -> None:
    moved = [job_id for job_id, ok in results.items() if ok]
    refused = {job_id: states.get(job_id, "?") for job_id, ok in results.items() if not ok}
    if as_json:
        print_json({verb: moved, "refused": refused})
    else:
        for job_id in moved:
            click.echo(f"{verb} {terminal_text(job_id)}")
        click.echo(f"{len(moved)} job(s) {verb}")
    if refused:
        detail = ", ".join(f"{job_id} ({state})" for job_id, state in refused.items())
        raise CommandFailed(f"not {verb}: {detail}")


@cli.command()
@id_target_options
@json_option
@click.option("--failed", is_flag=True, help="Retry every failed job (of --type).")
@click.option("--type", "job_type", help="With --failed: only jobs of this type.")
def retry(
    job_ids: tuple[str, ...], as_json: bool, failed: bool, job_type: str | None, **params: Any
) -> None:
    """Give failed or cancelled jobs one more attempt, now (the id, key and payload stay)."""
    if failed == bool(job_ids):
        raise CliUsageError("give job IDs or --failed, one of them")
    if job_type is not None and not failed:
        raise CliUsageError("--type goes with --failed")

    async def work(target: Target) -> None:
        ids = list(dict.fromkeys(job_ids)) if job_ids else await _failed_ids(target, job_type)
        if not ids:
            await check_type_known(target, job_type)
        results = await _each(ids, _acting(target.queue.retry), "retrying", as_json)
        states = await _states(target, [i for i, ok in results.items() if not ok])
        _report("retried", results, states, as_json)

    run_on_target(target_spec(params), work)


@cli.command()
@id_target_options
@json_option
def cancel(job_ids: tuple[str, ...], as_json: bool, **params: Any) -> None:
    """Cancel jobs: a pending one does not run; a running one is interrupted."""
    if not job_ids:
        raise CliUsageError("name the job IDs to cancel")

    async def work(target: Target) -> None:
        ids = list(dict.fromkeys(job_ids))
        results = await _each(ids, _acting(target.queue.cancel), "cancelling", as_json)
        states = await _states(target, [i for i, ok in results.items() if not ok])
        _report("cancelled", results, states, as_json)

    run_on_target(target_spec(params), work)


@cli.command()
@target_options
@json_option
@click.option(
    "--state", "states", type=click.Choice(PURGEABLE), multiple=True, required=True,
    help="Delete jobs in this state (repeat for several); active jobs are never purged.",
)  # fmt: skip
@click.option("--older-than", type=Duration(), help="Only jobs older than this (7d, 12h, 30m).")
@click.option("--type", "job_type", help="Only jobs of this type.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def purge(
    as_json: bool, states: tuple[str, ...], older_than: int | None, job_type: str | None,
    yes: bool, **params: Any,
) -> None:  # fmt: skip
    """Delete finished (or pending) jobs, freeing their keys; prints how many went."""
    spec = target_spec(params)
    what = f"{'/'.join(states)} jobs" + (f" of type {job_type}" if job_type else "")
    if older_than is not None:
        what += f" older than {format_ms(older_than)}"

    async def work(target: Target) -> None:
        await check_type_known(target, job_type)
        if not yes:
            prompt = f"Delete {what} from {target.description}?"
            if not await asyncio.to_thread(click.confirm, prompt, err=True):
                raise click.Abort()
        count = await target.queue.purge(
            states=states, type=job_type, older_than_ms=older_than, actor=CLI_ACTOR
        )
        if as_json:
            print_json({"purged": count})
        else:
            click.echo(f"purged {count} job(s)")

    run_on_target(spec, work)
