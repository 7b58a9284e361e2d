from __future__ import annotations

import pytest

from jobs.cli.durations import format_ms, parse_duration_ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [("7d", 604_800_000), ("12h", 43_200_000), ("30m", 1_800_000), ("45s", 45_000),
     ("500ms", 500), ("1.5h", 5_400_000), ("2w", 1_209_600_000), ("90", 90_000)],
)  # fmt: skip
def test_durations_parse_to_milliseconds(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["soon", "7 days", "-1d", "", "1y"])
def test_a_bad_duration_names_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"write e\.g\. 7d, 12h, 30m, 45s or 500ms"):
        parse_duration_ms(text)


@pytest.mark.parametrize(
    ("ms", "text"),
    [(None, "-"), (850, "850ms"), (12_000, "12s"), (250_000, "4m 10s"), (11_100_000, "3h 5m"),
     (187_200_000, "2d 4h")],
)  # fmt: skip
def test_durations_print_short(ms: int | None, text: str) -> None:
    assert format_ms(ms) == text
