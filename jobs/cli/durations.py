"""Durations on the command line: ``7d``, ``12h``, ``30m``, ``45s``, ``500ms``, or seconds."""

from __future__ import annotations

import re
from typing import Any

import click

UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


def parse_duration_ms(text: str) -> int:
    """Milliseconds in ``text``; a bare number is seconds. ValueError naming the forms."""
    match = _PATTERN.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write e.g. 7d, 12h, 30m, 45s or 500ms")
    value, unit = match.groups()
    return round(float(value) * UNITS_MS[unit or "s"])


class Duration(click.ParamType):  # type: ignore[type-arg]
    """A click parameter type giving milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ms(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def format_ms(ms: int | float | None) -> str:
    """A short human duration: ``850ms``, ``12s``, ``4m 10s``, ``3h 5m``, ``2d 4h``."""
    if ms is None:
        return "-"
    if ms < 1_000:
        return f"{int(ms)}ms"
    seconds = int(ms // 1000)
    for unit, size, sub, sub_size in (("d", 86_400, "h", 3_600), ("h", 3_600, "m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} {(seconds % size) // sub_size}{sub}"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds}s"
