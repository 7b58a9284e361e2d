"""FailureStreak: one line per failure naming the cause, one traceback per run, one recovery."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger

from jobs.errors import StoreUnavailableError
from jobs.failures import FailureStreak, describe_cause


@pytest.fixture
def records() -> Iterator[list[Any]]:
    """Loguru records written during the test, with the exception they carry."""
    kept: list[Any] = []
    handler_id = logger.add(lambda message: kept.append(message.record), level="DEBUG")
    yield kept
    logger.remove(handler_id)


def refused() -> StoreUnavailableError:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6391)")
        except OSError as exc:
            raise StoreUnavailableError("Redis is unavailable:\n  127.0.0.1:6391 refused") from exc
    except StoreUnavailableError as error:
        return error


def test_each_failure_names_the_cause_and_only_the_first_carries_the_traceback(
    records: list[Any],
) -> None:
    streak = FailureStreak("claiming jobs")
    for delay in (100, 200, 400):
        streak.failed(refused(), retry_in_ms=delay)
    messages = [record["message"] for record in records]
    cause = (
        "StoreUnavailableError: Redis is unavailable: 127.0.0.1:6391 refused (caused by "
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 6391))"
    )
    assert messages == [
        f"claiming jobs failed: {cause}; retrying in 100 ms",
        f"claiming jobs failed (2 in a row): {cause}; retrying in 200 ms",
        f"claiming jobs failed (3 in a row): {cause}; retrying in 400 ms",
    ]
    assert [record["level"].name for record in records] == ["ERROR"] * 3
    assert [record["exception"] is not None for record in records] == [True, False, False]
    assert streak.count == 3
    assert streak.failing


def test_a_recovery_is_one_line_and_starts_a_new_run(records: list[Any]) -> None:
    streak = FailureStreak("relaying outbox entries", level="WARNING", job_type="t")
    streak.succeeded()  # no run: nothing to say
    assert records == []
    streak.failed(RuntimeError("down"), then="giving up on this batch")
    streak.failed(RuntimeError("down"), then="giving up on this batch")
    streak.succeeded()
    streak.failed(RuntimeError("down again"), retry_in_ms=5)
    messages = [record["message"] for record in records]
    assert messages[1] == (
        "relaying outbox entries failed (2 in a row): RuntimeError: down; giving up on this batch"
    )
    assert messages[2].startswith("relaying outbox entries works again after 2 failures (")
    assert records[2]["level"].name == "INFO"
    assert (
        messages[3] == "relaying outbox entries failed: RuntimeError: down again; retrying in 5 ms"
    )
    assert records[3]["exception"] is not None  # a new run: its first failure is explained
    assert all(record["extra"] == {"job_type": "t"} for record in records)
    assert not FailureStreak("x").failing


def test_a_fast_retrying_loop_logs_a_line_per_quiet_interval_after_the_first_few(
    records: list[Any],
) -> None:
    streak = FailureStreak("claiming jobs", quiet_ms=60_000)
    for _ in range(500):
        streak.failed(refused(), retry_in_ms=1)
    assert len(records) == 3
    assert streak.count == 500
    streak.succeeded()
    assert records[-1]["message"].startswith("claiming jobs works again after 500 failures")


def test_describe_cause_keeps_one_line_and_a_bounded_size() -> None:
    assert describe_cause(ValueError()) == "ValueError"
    assert describe_cause(ValueError("a\n\tb")) == "ValueError: a b"
    long = describe_cause(RuntimeError("x" * 5_000))
    assert len(long) == 500
    assert long.endswith("...")
    wrapped = StoreUnavailableError("the store is down: boom")
    wrapped.__cause__ = OSError("boom")
    assert describe_cause(wrapped) == "StoreUnavailableError: the store is down: boom"
