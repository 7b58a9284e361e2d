"""``neverlost outbox list|show|retry APP``: the APP's outbox entries, for the stuck ones.

An entry waits in the outbox until a relay hands it over to the job queue; one whose hand-over
failed waits for its retry delay (backoff up to 30 s) with its ``last_error``. ``list`` shows
them oldest first (``--state unpublished|failing|published``), ``show`` one with its payload
and last error, ``retry`` makes entries claimable now (the relay's next claim takes them; each
is recorded in the job store's audit trail as ``outbox_retry``). These need an APP whose outbox
store (bean ``outbox_store``) has ``jobs.spi.OutboxOperations`` (``SQLAlchemyOutboxStore``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.panel import Panel
from rich.text import Text

from .. import audit
from ..spi import OUTBOX_ENTRY_STATES, OutboxEntryInfo
from ..spi.outbox import OutboxOperations
from .durations import format_ms
from .errors import CliUsageError, CommandFailed, StoreError
from .group import cli
from .outbox_view import outbox_operations
from .render import console, json_option, literal, one_line, print_json, table
from .running import STORE_FAILURES, describe_failure, run_on_target
from .target import Target, id_target_options, target_options, target_spec
from .write_commands import CLI_ACTOR

T = TypeVar("T")


@cli.group()
def outbox() -> None:
    """The APP's outbox entries: list, show and retry the ones that are stuck."""


def _operations(target: Target) -> OutboxOperations:
    operations = outbox_operations(target.outbox)
    if operations is not None:
        return operations
    if target.context is None:
        raise CliUsageError("neverlost outbox reads an APP's outbox store: give APP, not --url")
    if target.outbox is None:
        raise CliUsageError("this APP declares no outbox store (bean 'outbox_store')")
    raise CliUsageError(
        f"the outbox store {type(target.outbox).__name__} cannot be listed "
        "(it does not implement jobs.spi.OutboxOperations)"
    )


async def _asking(store: OutboxOperations, call: Callable[[], Awaitable[T]]) -> T:
    """A call on the outbox store; its failure is one line naming the outbox store."""
    try:
        return await call()
    except STORE_FAILURES as exc:
        raise StoreError(f"outbox store {store!r} failed: {describe_failure(exc)}") from None


def _age(entry: OutboxEntryInfo, now: datetime) -> str:
    return format_ms(max(int((now - entry.created_at).total_seconds() * 1000), 0))


@outbox.command("list")
@target_options
@json_option
@click.option("--state", type=click.Choice(OUTBOX_ENTRY_STATES), help="Only these entries.")
@click.option("--type", "entry_type", help="Only entries of this job type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its next_cursor).")
def list_entries(
    as_json: bool,
    state: str | None,
    entry_type: str | None,
    limit: int,
    cursor: str | None,
    **params: Any,
) -> None:
    """Entries oldest first: id, type, state, attempts, age, last error. ``failing`` are the
    unpublished ones whose last hand-over failed."""

    async def work(target: Target) -> None:
        store = _operations(target)
        try:
            page = await _asking(
                store,
                lambda: store.list_entries(
                    state=state, type=entry_type, limit=limit, cursor=cursor
                ),
            )
        except ValueError as exc:
            raise CliUsageError(str(exc)) from None
        if as_json:
            print_json({"entries": page.entries, "next_cursor": page.next_cursor})
            return
        now = datetime.now(UTC)
        columns = ("id", "type", "state", "attempts", "age", "last_error")
        rows = [
            [e.id, e.type, e.state, e.attempts, _age(e, now), one_line(e.last_error, 50)]
            for e in page.entries
        ]
        out = console()
        title = " ".join(filter(None, [state, entry_type, "outbox entries, oldest first"]))
        out.print(table(title, columns, rows))
        if page.next_cursor is not None:
            out.print(f"more: --cursor {page.next_cursor}")
        elif not rows:
            out.print("no entries")

    run_on_target(target_spec(params), work, create=False)


@outbox.command("show")
@id_target_options
@json_option
def show_entry(job_ids: tuple[str, ...], as_json: bool, **params: Any) -> None:
    """One entry: type, state, key, attempts, times, payload, last error."""
    if len(job_ids) != 1:
        raise CliUsageError("give one entry ID")
    (entry_id,) = job_ids

    async def work(target: Target) -> None:
        store = _operations(target)
        entry = await _asking(store, lambda: store.get_entry(entry_id))
        if entry is None:
            raise CommandFailed(f"no outbox entry {entry_id!r}")
        if as_json:
            print_json({**_plain_entry(entry), "state": entry.state})
            return
        fields = [
            ("id", entry.id), ("type", entry.type), ("state", entry.state), ("key", entry.key),
            ("attempts", entry.attempts), ("leased by a relay", "yes" if entry.leased else "no"),
            ("created_at", entry.created_at), ("available_at", entry.available_at),
            ("published_at", entry.published_at), ("max_attempts", entry.max_attempts),
        ]  # fmt: skip
        out = console()
        out.print(table(f"outbox entry {entry.id}", ("field", "value"), fields))
        payload = literal(json.dumps(entry.payload, indent=2, ensure_ascii=False), multiline=True)
        out.print(Panel(payload, title=Text("payload"), title_align="left"))
        if entry.last_error is not None:
            title = Text("last hand-over failed")
            error = literal(entry.last_error, multiline=True)
            out.print(Panel(error, title=title, title_align="left"))

    run_on_target(target_spec(params), work, create=False)


def _retry_call(store: OutboxOperations, entry_id: str) -> Callable[[], Awaitable[bool]]:
    return lambda: store.retry_entry(entry_id)


def _plain_entry(entry: OutboxEntryInfo) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__dataclass_fields__}


@outbox.command("retry")
@id_target_options
@json_option
def retry_entries(job_ids: tuple[str, ...], as_json: bool, **params: Any) -> None:
    """Make unpublished entries claimable now (their retry delay dropped); the relay's next
    claim hands them over. A published entry or an unknown id is not retried (exit 1)."""
    if not job_ids:
        raise CliUsageError("give one or more entry IDs")

    async def work(target: Target) -> None:
        store = _operations(target)
        moved = []
        for entry_id in job_ids:
            if await _asking(store, _retry_call(store, entry_id)):
                moved.append(entry_id)
        target_text = (
            f"outbox entry {job_ids[0]}" if len(job_ids) == 1 else f"{len(job_ids)} outbox entries"
        )
        await audit.record(target.driver, CLI_ACTOR, "outbox_retry", target_text, len(moved))
        refused = [entry_id for entry_id in job_ids if entry_id not in moved]
        if as_json:
            print_json({"retried": moved, "not_retried": refused})
        else:
            for entry_id in moved:
                click.echo(f"retried outbox entry {entry_id}")
        if refused:
            raise CommandFailed(
                f"not retried (published or unknown): {', '.join(refused)}"
            )

    run_on_target(target_spec(params), work, create=False)
