"""``neverlost audit list``: the store's audit trail of operators' actions, newest first.

(Its own group: ``neverlost audit-loss``, the live auditor, is another command.)
"""

from __future__ import annotations

from typing import Any

import click

from .errors import CliUsageError
from .group import cli
from .render import console, json_option, print_json, table
from .running import run_on_target
from .target import Target, target_options, target_spec


@cli.group()
def audit() -> None:
    """The audit trail: who retried, cancelled, deleted or purged what."""


@audit.command("list")
@target_options
@json_option
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its next_cursor).")
def list_actions(as_json: bool, limit: int, cursor: str | None, **params: Any) -> None:
    """Operators' actions newest first: time, action, target, actor, source, count."""

    async def work(target: Target) -> None:
        try:
            page = await target.queue.list_actions(limit=limit, cursor=cursor)
        except ValueError as exc:
            raise CliUsageError(str(exc)) from None
        if as_json:
            print_json({"actions": page.entries, "next_cursor": page.next_cursor})
            return
        columns = ("at", "action", "target", "actor", "source", "count")
        rows = [[getattr(entry, column) for column in columns] for entry in page.entries]
        out = console()
        out.print(table(f"actions on {target.description}, newest first (UTC)", columns, rows))
        if page.next_cursor is not None:
            out.print(f"more: --cursor {page.next_cursor}")
        elif not rows:
            out.print("no actions recorded")

    run_on_target(target_spec(params), work, create=False)
