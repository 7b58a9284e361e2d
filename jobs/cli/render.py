"""Output: ``--json`` for scripts (one JSON document on stdout), rich tables for people.

What a store holds is data, never markup or terminal commands: job types, keys, errors,
payloads and worker hosts are printed literally. The console reads no Rich markup or emoji
codes (a job type ``[/bold]`` would raise MarkupError, ``[link=...]`` would make a link), and
every string it renders has its control characters (ESC, and so clear-screen or window-title
sequences; C1 codes such as CSI) shown as ``\\x1b``-style escapes (``terminal_text``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .terminal import terminal_text

F = TypeVar("F", bound=Callable[..., Any])


MIN_WIDTH = {"id": 32}
"""A job id is never folded (a cut id cannot be copied); the other columns fold instead."""

PIPE_WIDTH = 160
"""The width of tables written to a pipe or a file (no terminal to fit; COLUMNS overrides)."""


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(command)


def plain(value: Any) -> Any:
    """``value`` made of JSON types: dataclasses as objects, datetimes as ISO 8601 (UTC)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw that a terminal may act on: DEL, the C1
controls (CSI is one) and the Unicode line separators; JSON escapes C0 itself."""


def print_json(value: Any) -> None:
    """``value`` as one JSON document (non-ASCII text as it is, but control characters as
    ``\\u`` escapes: the same data, harmless on a terminal)."""
    text = json.dumps(plain(value), indent=2, ensure_ascii=False)
    click.echo(_RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group(0)):04x}", text))


def literal(value: object, *, multiline: bool = False) -> Text:
    """``value`` as a Rich ``Text``: never read as markup, control characters escaped."""
    return Text(terminal_text(value, multiline=multiline))


class SafeConsole(Console):
    """A console that reads no markup or emoji codes and escapes the control characters of
    every string it renders (table cells and titles included); newlines stay."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        options["markup"] = False
        options["emoji"] = False
        return super().render_str(terminal_text(text, multiline=True), **options)


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) for stored strings (``SafeConsole``); no colour codes
    and PIPE_WIDTH columns when it is not a terminal."""
    out = SafeConsole(soft_wrap=False, stderr=stderr)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = PIPE_WIDTH
    return out


def table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> Table:
    """A table whose cells are shown as text (numbers right-aligned)."""
    cells = [list(row) for row in rows]
    result = Table(
        title=literal(title) if title is not None else None, title_justify="left", expand=False
    )
    for index, name in enumerate(columns):
        numeric = bool(cells) and all(isinstance(row[index], int | float) for row in cells)
        result.add_column(
            name,
            justify="right" if numeric else "left",
            overflow="fold",
            min_width=MIN_WIDTH.get(name),
        )
    for row in cells:
        result.add_row(*(cell_text(cell) for cell in row))
    return result


def cell_text(value: Any) -> Text:
    """A table cell: literal text on one line (see ``terminal_text``)."""
    if value is None:
        return Text("-")
    if isinstance(value, datetime):
        return Text(value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ"))
    if isinstance(value, list | tuple | frozenset | set):
        return literal(", ".join(str(v) for v in value) or "-")
    return literal(value)


def one_line(text: str | None, width: int = 60) -> str | None:
    """The first line of ``text``, cut to ``width`` characters."""
    if text is None:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"
