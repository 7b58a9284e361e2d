"""Commands that read the store: stats, workers, schedules, jobs list / show, healthcheck."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from ..clock import to_datetime
from ..errors import StoreSchemaError
from ..options import DEFAULT_QUEUE
from ..spi import JOB_STATES, JobInfo, JobProgress
from ..tokens import JOB_SCHEDULER
from .durations import Duration, format_ms
from .errors import CliUsageError, CommandFailed
from .group import cli
from .hints import check_type_known, other_namespaces, settle_all
from .history import history_renderable, history_view
from .outbox_view import outbox_line, outbox_view
from .redact import redact_keys_option
from .render import cell_text, console, json_option, literal, one_line, print_json, table
from .running import STORE_FAILURES, describe_failure, run_on_target
from .target import Target, id_target_options, target_options, target_spec
from .terminal import terminal_text

STAT_COLUMNS = ("due", "scheduled", "active", "completed", "failed", "cancelled")


async def _stats_view(target: Target) -> dict[str, Any]:
    """Per type numbers, and which types have due jobs but no live worker to run them."""
    stats, workers, outbox = await settle_all(
        target.queue.stats(), target.queue.workers(), outbox_view(target.outbox)
    )
    served = {job_type for worker in workers for job_type in worker.types}
    rows = []
    for job_type in sorted(stats):
        record = stats[job_type]
        row: dict[str, Any] = {"type": job_type}
        row.update({column: getattr(record, column) for column in STAT_COLUMNS})
        row["oldest_due_age_ms"] = record.oldest_due_age_ms
        row["unserved"] = record.due > 0 and job_type not in served
        rows.append(row)
    return {"types": rows, "workers": len(workers), "outbox": outbox}


def _stats_renderable(view: dict[str, Any], store: str) -> Group:
    rows = view["types"]
    shown = table(
        f"jobs in {store}",
        ("type", *STAT_COLUMNS, "oldest due", "flag"),
        (
            (
                row["type"],
                *(row[column] for column in STAT_COLUMNS),
                format_ms(row["oldest_due_age_ms"]),
                "NO WORKER" if row["unserved"] else "",
            )
            for row in rows
        ),
    )
    notes = [f"{view['workers']} live worker(s)"]
    unserved = [row["type"] for row in rows if row["unserved"]]
    if unserved:
        notes.append(f"due but no live worker handles: {', '.join(unserved)}")
    if not rows:
        notes.insert(0, "no jobs")
    if view.get("outbox") is None:
        return Group(shown, literal("; ".join(notes)))
    return Group(shown, literal("; ".join(notes)), literal(outbox_line(view["outbox"])))


@cli.command()
@target_options
@json_option
@click.option("--watch", is_flag=True, help="Refresh until Ctrl-C.")
@click.option(
    "--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
    help="Seconds between refreshes with --watch.",
)  # fmt: skip
@click.option(
    "--history", "history_ms", type=Duration(), is_flag=False, flag_value="1h", default=None,
    metavar="[WINDOW]",
    help="Also executions per type over WINDOW (default 1h): completed, failed, retried, "
    "runtime p50/p95, from the store's counters (kept 7 days, whatever is purged).",
)  # fmt: skip
def stats(
    as_json: bool, watch: bool, interval: float, history_ms: int | None, **params: Any
) -> None:
    """Jobs per type: due, scheduled, active, completed, failed, cancelled, oldest due age.

    Types with due jobs and no live worker handling them are flagged NO WORKER. With an APP
    that has an outbox store, a line (JSON: "outbox") counts its unpublished entries, the
    oldest one's age, those whose hand-over failed, those published in the last hour and the
    live relays, flagged NO RELAY when entries wait and no relay is alive.
    """
    spec = target_spec(params)
    if watch and as_json:
        raise CliUsageError("--watch and --json do not go together; poll with --json instead")
    if history_ms is not None and watch:
        raise CliUsageError("--history and --watch do not go together")

    async def work(target: Target) -> None:
        if not watch:
            view = await _stats_view(target)
            hint = await other_namespaces(spec, target) if not view["types"] else None
            if history_ms is not None:
                view["history"] = await history_view(target, history_ms)
            if as_json:
                print_json(view)
            else:
                console().print(_stats_renderable(view, target.description))
                if history_ms is not None:
                    console().print(history_renderable(view["history"]))
            if hint is not None:
                click.echo(hint, err=True)
            return
        out = console()
        if not out.is_terminal:  # a log or a pipe: one table after the other, timestamped
            while True:
                view = await _stats_view(target)
                out.print(f"-- {datetime.now(UTC).strftime('%H:%M:%S')}Z")
                out.print(_stats_renderable(view, target.description))
                await asyncio.sleep(interval)
        with Live(console=out, auto_refresh=False) as live:
            while True:
                live.update(_stats_renderable(await _stats_view(target), target.description))
                live.refresh()
                await asyncio.sleep(interval)

    with contextlib.suppress(KeyboardInterrupt):
        run_on_target(spec, work, create=False)


@cli.command()
@target_options
@json_option
def workers(as_json: bool, **params: Any) -> None:
    """Live worker processes: id, host, pid, types, concurrency, in flight, started, last seen."""

    async def work(target: Target) -> None:
        found = await target.queue.workers()
        if as_json:
            print_json({"workers": found})
            return
        columns = (
            "id",
            "host",
            "pid",
            "types",
            "concurrency",
            "in_flight",
            "started_at",
            "last_seen",
        )
        rows = [[getattr(w, column) for column in columns] for w in found]
        out = console()
        out.print(table(f"live workers of {target.description}", columns, rows))
        if not found:
            out.print("no live worker")

    run_on_target(target_spec(params), work, create=False)


@cli.command()
@target_options
@json_option
def schedules(as_json: bool, **params: Any) -> None:
    """The APP's schedules: name, job, cron, timezone and next occurrence."""
    spec = target_spec(params)
    if spec.app is None:
        raise CliUsageError("schedules are declared by the application: give APP, not --url")

    async def work(target: Target) -> None:
        assert target.context is not None
        now_ms = int(time.time() * 1000)
        rows = []
        for schedule in target.context.get_value(JOB_SCHEDULER).schedules:
            upcoming = schedule.next_after(now_ms)
            rows.append({
                "name": schedule.key_prefix,
                "job": schedule.job_type,
                "cron": schedule.cron,
                "timezone": schedule.timezone,
                "next": to_datetime(upcoming) if upcoming is not None else None,
            })  # fmt: skip
        if as_json:
            print_json({"schedules": rows})
            return
        columns = ("name", "job", "cron", "timezone", "next")
        console().print(table("schedules", columns, ([r[c] for c in columns] for r in rows)))

    run_on_target(spec, work, create=False)


@cli.group()
def jobs() -> None:
    """List jobs, or show one."""


@jobs.command("list")
@target_options
@json_option
@click.option("--state", type=click.Choice(JOB_STATES), help="Only jobs in this state.")
@click.option("--type", "job_type", help="Only jobs of this type.")
@click.option("--queue", "queue_name", metavar="QUEUE", help="Only jobs of this named queue.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its next_cursor).")
@redact_keys_option
def list_jobs(
    as_json: bool, state: str | None, job_type: str | None, queue_name: str | None, limit: int,
    cursor: str | None, redact: Callable[[Any], Any] | None, **params: Any,
) -> None:  # fmt: skip
    """Jobs newest first, a page at a time."""

    spec = target_spec(params)

    async def work(target: Target) -> None:
        try:
            page = await target.queue.list_jobs(
                state=state, type=job_type, limit=limit, cursor=cursor, queue=queue_name
            )
        except ValueError as exc:
            raise CliUsageError(str(exc)) from None
        hint = None
        if not page.jobs and cursor is None:
            await check_type_known(target, job_type)
            if state is None and job_type is None and queue_name is None:
                hint = await other_namespaces(spec, target)
        if hint is not None:
            click.echo(hint, err=True)
        if as_json:
            jobs = page.jobs
            if redact is not None:  # only --json shows payloads
                jobs = [dataclasses.replace(job, payload=redact(job.payload)) for job in jobs]
            print_json({"jobs": jobs, "next_cursor": page.next_cursor})
            return
        columns, rows = _job_table(page.jobs, state, job_type, queue_name)
        out = console()
        title = " ".join(filter(None, [state, job_type, "jobs, newest first (run_at in UTC)"]))
        if queue_name:
            title += f" in queue {queue_name}"
        out.print(table(title, columns, rows))
        if page.next_cursor is not None:
            out.print(f"more: --cursor {page.next_cursor}")
        elif not rows:
            out.print("no jobs")

    run_on_target(spec, work, create=False)


def _job_table(
    jobs: list[JobInfo], state: str | None, job_type: str | None, queue_name: str | None
) -> tuple[list[str], list[list[Any]]]:
    """The columns and rows of ``jobs list``: a filtered column says the same on every row, an
    empty one nothing (the queue column shows only when some job is not in "default")."""
    columns = ["id", "type", "queue", "state", "attempts", "run_at", "last_error"]
    rows = [
        [j.id, j.type, j.queue, j.state, f"{j.attempts}/{j.max_attempts}",
         j.run_at.astimezone(UTC).strftime("%m-%d %H:%M:%S"), one_line(j.last_error, 40)]
        for j in jobs
    ]  # fmt: skip
    no_errors = all(row[-1] is None for row in rows)
    one_queue = queue_name or all(row[2] == DEFAULT_QUEUE for row in rows)
    dropped = [
        name
        for name, drop in (
            ("type", job_type), ("queue", one_queue), ("state", state),
            ("last_error", no_errors),
        )
        if drop
    ]  # fmt: skip
    for name in dropped:  # a filtered column says the same on every row; an empty one nothing
        index = columns.index(name)
        del columns[index]
        for row in rows:
            del row[index]
    return columns, rows


@jobs.command("show")
@id_target_options
@json_option
@click.option("--key", help="Show the job holding this idempotency key instead of an ID.")
@redact_keys_option
def show_job(
    job_ids: tuple[str, ...],
    as_json: bool,
    key: str | None,
    redact: Callable[[Any], Any] | None,
    **params: Any,
) -> None:
    """One job: payload, attempts, every error, timestamps, key."""
    if len(job_ids) + (key is not None) != 1:
        raise CliUsageError("give one job ID or --key")
    job_id = job_ids[0] if job_ids else None

    async def work(target: Target) -> None:
        if key is not None:
            info = await target.queue.find_job(key=key)
        else:
            assert job_id is not None
            info = await target.queue.get_job(job_id)
        if info is None:
            raise CommandFailed(f"no job {'with key ' + repr(key) if key else repr(job_id)}")
        if redact is not None:
            result = None if info.result is None else redact(info.result)
            info = dataclasses.replace(info, payload=redact(info.payload), result=result)
        if as_json:
            print_json(info)
            return
        fields = [
            ("id", info.id), ("type", info.type), ("queue", info.queue), ("state", info.state),
            ("key", info.key),
            ("attempts", f"{info.attempts} of {info.max_attempts}"),
            ("stalls", f"{info.stalls} of {info.max_stalls}"), ("priority", info.priority),
            ("run_at", info.run_at),
            ("created_at", info.created_at),
            ("finished_at", info.finished_at),
            ("timeout_ms", info.timeout_ms),
            ("progress", _progress_text(info.progress)),
        ]  # fmt: skip
        if info.workflow_id is not None:
            fields.append(("workflow", info.workflow_id))
            fields.append(("after", ", ".join(info.depends_on) or None))
        out = console()
        out.print(table(f"job {info.id}", ("field", "value"), fields))
        out.print(_json_panel("payload", info.payload))
        if info.result is not None:
            out.print(_json_panel("result", info.result))
        for failed in info.errors:
            title = Text(f"attempt {failed.attempt} failed at {cell_text(failed.at).plain}")
            out.print(Panel(literal(failed.error, multiline=True), title=title, title_align="left"))

    run_on_target(target_spec(params), work, create=False)


def _progress_text(progress: JobProgress | None) -> str | None:
    """``42% copying page 3`` (None: nothing reported)."""
    if progress is None:
        return None
    percent = f"{progress.fraction * 100:.0f}%"
    return percent if progress.message is None else f"{percent} {progress.message}"


def _json_panel(title: str, value: Any) -> Panel:
    """A stored JSON value shown as JSON (as ``--json`` and the dashboard show it), indented;
    its strings literal (control characters escaped, as everywhere)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    return Panel(literal(text, multiline=True), title=Text(title), title_align="left")


@cli.command()
@target_options
@json_option
@click.option(
    "--min-workers", type=click.IntRange(min=0), default=1, show_default=True,
    help="Live workers needed to be healthy (0: check the store only).",
)  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
def healthcheck(as_json: bool, min_workers: int, timeout: float, **params: Any) -> None:
    """Exit 0 when the store answers and enough workers are alive, 1 otherwise (a probe)."""

    async def work(target: Target) -> None:
        started = time.monotonic()
        report: dict[str, Any] = {"store": target.description}
        try:
            async with asyncio.timeout(timeout):
                await target.driver.counts()
                report["store_ms"] = round((time.monotonic() - started) * 1000, 1)
                found = await target.queue.workers() if min_workers else []
        except StoreSchemaError as exc:  # no such store: the probe creates none
            report.update(healthy=False, reason=f"no store there: {exc}")
        except STORE_FAILURES as exc:
            cause = (
                f"no answer within {timeout:g} s"
                if isinstance(exc, TimeoutError)
                else (describe_failure(exc))
            )
            report.update(healthy=False, reason=f"store unreachable: {cause}")
        else:
            report["workers"] = len(found)
            healthy = len(found) >= min_workers
            report["healthy"] = healthy
            report["reason"] = (
                None if healthy else (f"{len(found)} live worker(s), {min_workers} needed")
            )
        if as_json:
            print_json(report)
        elif report["healthy"]:
            click.echo(
                f"healthy: {terminal_text(report['store'])} answered in {report['store_ms']} ms"
                + (f", {report['workers']} live worker(s)" if min_workers else "")
            )
        if not report["healthy"]:
            if as_json:
                raise SystemExit(1)
            raise CommandFailed(f"unhealthy: {report['store']}: {report['reason']}")

    run_on_target(target_spec(params), work, create=False)
