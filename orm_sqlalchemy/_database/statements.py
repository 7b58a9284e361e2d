"""SQL statements kept as package resources (``sql/``), one file per store and dialect, loaded
once per table.

A file (``<resource>_<dialect>.sql``: ``jobs_sqlite.sql``, ``outbox_postgresql.sql`` ...) holds
named statements (``-- name: claim``) with ``:name`` parameters and these macros: ``{table}``
(the quoted table name; ``{edges}`` and ``{limits}``, the job store's other tables), ``{now}``
(the store's clock in epoch ms: the bound ``:now`` when it is not NULL, else the database's
clock; ``{statement_now}`` the same, read when the statement starts) and
``{statement:<name>}`` (an earlier statement of the file, so that a variant of one is written
once). PostgreSQL statements are rewritten to asyncpg's ``$n`` placeholders, SQLite ones keep
sqlite3's named style; either way a statement is bound from a dict of parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["Statement", "load_statements", "text_statement"]

_SQL = files(__name__.rsplit(".", 1)[0]).joinpath("sql")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_STATEMENT = re.compile(r"\{statement:(\w+)\}")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

_NOW = {
    "postgresql": "COALESCE(CAST(:now AS bigint), floor(extract(epoch FROM now()) * 1000)::bigint)",
    "sqlite": "COALESCE(:now, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))",
}

_STATEMENT_NOW = {
    "postgresql": (
        "COALESCE(CAST(:now AS bigint), "
        "floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint)"
    ),
    "sqlite": _NOW["sqlite"],
}
"""``{statement_now}``: ``{now}`` read when the statement starts, not when its transaction
did (PostgreSQL's now()): for a statement that follows a lock its transaction waited for."""


def _clock(template: str, dialect: str) -> str:
    return template.replace("{statement_now}", _STATEMENT_NOW[dialect]).replace(
        "{now}", _NOW[dialect]
    )


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement's text in the driver's paramstyle and, for ``$n`` style, its names."""

    name: str
    text: str
    positional: tuple[str, ...] | None

    def bind(self, params: dict[str, Any]) -> Any:
        """The driver's arguments: a tuple for ``$n`` placeholders, else the dict itself."""
        if self.positional is None:
            return params
        return tuple(map(params.__getitem__, self.positional))


@cache
def _sections(resource: str, dialect: str) -> dict[str, str]:
    source = _SQL.joinpath(f"{resource}_{dialect}.sql").read_text(encoding="utf-8")
    parts = _NAME.split(source)
    sections: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[name] = _STATEMENT.sub(lambda m: sections[m.group(1)], _strip_comments(body))
    return sections


def _strip_comments(body: str) -> str:
    lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def load_statements(
    dialect: str, table: str, *, resource: str = "jobs", edges: str = "", limits: str = ""
) -> dict[str, Statement]:
    """Every statement of ``resource`` ("jobs" or "outbox") in ``dialect`` ("postgresql" or
    "sqlite"), for the quoted ``table`` (and, for the job statements of workflows, the quoted
    ``edges`` table: the ``{edges}`` macro; for those of fleet-wide limits, the quoted
    ``limits`` table: ``{limits}``)."""
    if dialect not in _NOW:
        raise ValueError(f"the SQL stores support PostgreSQL and SQLite, not {dialect!r}")
    statements = {}
    for name, template in _sections(resource, dialect).items():
        statement = Statement(name, _clock(template, dialect), None)
        if dialect == "postgresql":
            statement = _numbered(statement)
        # The table goes in last, so that no quoted name is ever read as a parameter.
        text = statement.text.replace("{edges}", edges).replace("{limits}", limits)
        text = text.replace("{table}", table)
        statements[name] = Statement(name, text, statement.positional)
    return statements


def _numbered(statement: Statement) -> Statement:
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match.group(1)
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}"

    return Statement(statement.name, _PARAM.sub(number, statement.text), tuple(order))


def text_statement(dialect: str, table: str, name: str, *, resource: str, edges: str = "") -> str:
    """One statement of ``resource`` with its ``:name`` parameters as written, for SQLAlchemy's
    ``text()`` on a connection of any driver (the app's own: psycopg, pysqlite...), where the
    store's own statements are in its drivers' paramstyle."""
    if dialect not in _NOW:
        raise ValueError(f"the SQL stores support PostgreSQL and SQLite, not {dialect!r}")
    section = _clock(_sections(resource, dialect)[name], dialect)
    return section.replace("{edges}", edges).replace("{table}", table)
