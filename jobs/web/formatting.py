"""Jinja filters: times, durations, payloads and errors as an operator reads them.

Every filter returns plain text; the template environment escapes it. None of them marks
anything safe.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from ..clock import to_epoch_ms

TRACEBACK_TAIL_LINES = 40


def now_ms() -> int:
    return int(time.time() * 1000)


def epoch_ms(value: datetime | int | float | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_epoch_ms(value)
    return int(value)


def utc(value: datetime | int | None) -> str:
    """``2026-12-01 11:30:05 UTC``; an em dash for None."""
    ms = epoch_ms(value)
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(ms: int | float | None) -> str:
    """A span of time for humans: ``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``, ``3 d``."""
    if ms is None:
        return "—"
    ms = max(ms, 0)
    if ms < 1_000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} d"


def relative(value: datetime | int | None, now: int | None = None) -> str:
    """``5.2 s ago`` or ``in 3 min`` against ``now`` (epoch ms); whole minutes past a minute."""
    ms = epoch_ms(value)
    if ms is None:
        return "—"
    delta = (now if now is not None else now_ms()) - ms
    if abs(delta) < 1_000:
        return "now"
    span = duration(abs(delta) // 60_000 * 60_000 if abs(delta) >= 60_000 else abs(delta))
    return f"{span} ago" if delta > 0 else f"in {span}"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def tail(text: str | None, lines: int = TRACEBACK_TAIL_LINES) -> str:
    """The error's message line and the last ``lines`` lines of its traceback (paths shortened)."""
    if not text:
        return ""
    roots = _import_roots()
    rows = [_short_path(row, roots) for row in text.rstrip("\n").split("\n")]
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([rows[0], f"  … {len(rows) - lines} lines", *rows[-lines + 1 :]])


def _import_roots() -> list[str]:
    roots = {os.path.join(os.path.abspath(entry), "") for entry in sys.path if entry}
    return sorted(roots, key=len, reverse=True)


_FRAME = re.compile(r'^(\s*File ")([^"]+)(".*)$')


def _short_path(row: str, roots: list[str]) -> str:
    """A traceback frame's file as its import path (``jobs/execution.py``) where it is on
    ``sys.path`` here: shorter to read, and no machine paths on the page."""
    match = _FRAME.match(row)
    if match is None:
        return row
    path = match.group(2)
    for root in roots:
        if path.startswith(root):
            return f"{match.group(1)}{path[len(root) :]}{match.group(3)}"
    return row


def first_line(text: str | None, width: int = 120) -> str:
    """The summary line of an error (``ValueError: ...``, the runner writes it first), clipped."""
    if not text:
        return ""
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= width else line[: width - 1] + "…"


def trace_id(traceparent: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    if len(parts) == 4 and len(parts[1]) == 32:
        return parts[1]
    return None


def short_id(job_id: str, length: int = 12) -> str:
    return job_id if len(job_id) <= length + 1 else f"{job_id[:length]}…"


FILTERS = {
    "utc": utc,
    "duration": duration,
    "relative": relative,
    "pretty_json": pretty_json,
    "tail": tail,
    "first_line": first_line,
    "trace_id": trace_id,
    "short_id": short_id,
}
