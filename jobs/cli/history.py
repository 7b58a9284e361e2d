"""``neverlost stats --history [WINDOW]``: executions per type over a window, from the store's
per-minute outcome counters (``jobs.counters``), which a purge or retention does not erase:
completed, failed, retried, and runtime p50/p95 (the upper bound of the bucket holding it)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rich.console import Group

from ..counters import MINUTE_MS, summarize
from .durations import format_ms
from .render import literal, table
from .target import Target

HISTORY_COLUMNS = ("completed", "failed", "retried", "p50_ms", "p95_ms", "mean_ms")


async def history_view(target: Target, window_ms: int) -> dict[str, Any]:
    now = int(time.time() * 1000)
    since = max(now - now % MINUTE_MS - window_ms + MINUTE_MS, 0)
    rows = summarize(await target.queue.outcome_counts(since_ms=since))
    return {
        "window_ms": window_ms,
        "since_ms": since,
        "types": [
            {key: value for key, value in dataclasses.asdict(row).items() if key != "buckets"}
            for row in rows
        ],
    }


def history_renderable(view: dict[str, Any]) -> Group:
    rows = view["types"]
    shown = table(
        f"executions in the last {format_ms(view['window_ms'])} (counters, kept 7 days)",
        ("type", "completed", "failed", "retried", "p50", "p95", "mean"),
        (
            (
                row["type"],
                row["completed"],
                row["failed"],
                row["retried"],
                _bound(row["p50_ms"]),
                _bound(row["p95_ms"]),
                format_ms(row["mean_ms"]),
            )
            for row in rows
        ),
    )
    note = "p50/p95: the upper bound of the runtime bucket holding it"
    if not rows:
        note = "no execution counted in that window"
    return Group(shown, literal(note))


def _bound(ms: int | None) -> str:
    return "-" if ms is None else f"<= {format_ms(ms)}"
