"""``--redact-keys a,b``: payload fields that ``jobs show`` and the dashboard show as ``***``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..redaction import redact_keys

F = TypeVar("F", bound=Callable[..., Any])


def _parse(
    ctx: click.Context, _param: click.Parameter, value: str | None
) -> Callable[[Any], Any] | None:
    if not value:
        return None
    keys = [key.strip() for key in value.split(",") if key.strip()]
    if not keys:
        raise click.BadParameter("name the payload keys to hide, comma-separated: ssn,password")
    return redact_keys(keys)


def redact_keys_option(command: F) -> F:
    """The option; the command receives ``redact``: a payload hook, or None."""
    return click.option(
        "--redact-keys",
        "redact",
        envvar="NEVERLOST_REDACT_KEYS",
        callback=_parse,
        metavar="KEY,...",
        help="Show these payload keys' values (at any depth, any case) as \"***\".",
    )(command)
