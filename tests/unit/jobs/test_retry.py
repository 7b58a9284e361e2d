from __future__ import annotations

import pytest

from jobs import exponential_backoff
from jobs.retry import DEFAULT_BACKOFF

NOMINAL = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]


def test_the_nominal_backoff_is_one_second_doubling_capped_at_thirty() -> None:
    assert [exponential_backoff(jitter=0)(n) for n in range(1, 9)] == NOMINAL
    assert [exponential_backoff(rng=lambda: 0.5)(n) for n in range(1, 9)] == NOMINAL
    assert exponential_backoff(jitter=0)(10_000) == 30_000


def test_the_default_backoff_jitters_within_15_percent_of_the_nominal_delay() -> None:
    for attempt, nominal in enumerate(NOMINAL, start=1):
        drawn = {DEFAULT_BACKOFF(attempt) for _ in range(200)}
        assert min(drawn) >= nominal * 0.85
        assert max(drawn) <= min(nominal * 1.15, 30_000)
        assert len(drawn) > 20  # spread, not one value
    low = exponential_backoff(rng=lambda: 0.0)
    high = exponential_backoff(rng=lambda: 0.999999)
    assert [low(n) for n in (1, 2, 6)] == [850, 1_700, 25_500]
    assert [high(n) for n in (1, 2, 6)] == [1_150, 2_300, 30_000]  # still capped


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
