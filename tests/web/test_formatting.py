"""The dashboard's text filters: times, durations, errors and trace ids as shown."""

from __future__ import annotations

import os
import sys

from jobs.web.formatting import duration, first_line, relative, tail, trace_id, utc

NOW = 1_764_590_400_000  # 2025-12-01 12:00:00 UTC


def test_durations_and_relative_times_read_as_an_operator_says_them() -> None:
    assert [duration(ms) for ms in (None, 850, 4_200, 185_000, 7_440_000, 3 * 86_400_000)] == [
        "—", "850 ms", "4.2 s", "3 min 5 s", "2 h 4 min", "3 d",
    ]  # fmt: skip
    assert relative(NOW - 5_200, NOW) == "5.2 s ago"
    assert relative(NOW - 185_000, NOW) == "3 min ago"  # whole minutes past a minute
    assert relative(NOW + 3_600_000, NOW) == "in 1 h"
    assert relative(NOW, NOW) == "now"
    assert relative(None, NOW) == "—"
    assert utc(NOW) == "2025-12-01 12:00:00 UTC"


def test_an_error_shows_its_message_and_the_tail_of_its_traceback() -> None:
    root = os.path.abspath(sys.path[-1])
    frames = [f'  File "{root}/app/step{n}.py", line {n}, in f' for n in range(60)]
    error = "\n".join(["ValueError: bad row", *frames])
    shown = tail(error).split("\n")
    assert shown[0] == "ValueError: bad row"
    assert shown[1] == "  … 21 lines"
    assert shown[-1] == '  File "app/step59.py", line 59, in f'  # by import path
    assert len(shown) == 41
    assert first_line(error) == "ValueError: bad row"
    assert first_line("x" * 300, 10) == "x" * 9 + "…"


def test_trace_id_of_a_traceparent() -> None:
    assert trace_id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") == (
        "4bf92f3577b34da6a3ce929d0e0e4736"
    )
    assert trace_id("garbage") is None
    assert trace_id(None) is None
