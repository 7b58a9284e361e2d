from __future__ import annotations

import pytest

from jobs import exponential_backoff
from jobs.retry import DEFAULT_BACKOFF


def test_default_backoff_is_one_second_doubling_capped_at_thirty() -> None:
    assert [DEFAULT_BACKOFF(n) for n in range(1, 9)] == [
        1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]
    assert DEFAULT_BACKOFF(10_000) == 30_000


def test_jitter_spreads_within_bounds() -> None:
    low = exponential_backoff(1_000, 30_000, 0.5, rng=lambda: 0.0)
    high = exponential_backoff(1_000, 30_000, 0.5, rng=lambda: 0.999999)
    assert low(3) == 2_000
    assert high(3) == 6_000
    assert high(10) == 30_000  # still capped


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="base_ms <= cap_ms"):
        exponential_backoff(5_000, 1_000)
    with pytest.raises(ValueError, match="jitter"):
        exponential_backoff(1_000, 2_000, 1.5)
