"""The checks of queues, priorities and limits (jobs.options, issue 30): ranges and messages."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from jobs import JobOptionError
from jobs.options import (
    DEFAULT_QUEUE,
    MAX_CONCURRENCY,
    MAX_PRIORITY,
    MAX_QUEUE_LENGTH,
    MAX_RATE_COUNT,
    MIN_PRIORITY,
    QueueWeights,
    RateLimit,
    check_concurrency,
    check_priority,
    check_queue,
    parse_queues,
    parse_rate_limit,
)


class Urgent(enum.IntEnum):
    HIGH = 10


def test_priority_takes_the_ends_of_its_range_and_an_int_subclass() -> None:
    assert check_priority(0) == 0
    assert check_priority(MIN_PRIORITY) == MIN_PRIORITY
    assert check_priority(MAX_PRIORITY) == MAX_PRIORITY
    value = check_priority(Urgent.HIGH)
    assert value == 10
    assert type(value) is int


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (MAX_PRIORITY + 1, "from -100 to 100"),
        (MIN_PRIORITY - 1, "got -101"),
        (1.0, "got 1.0 (a float)"),
        (True, "got True (a bool)"),
        ("5", "got '5' (a str)"),
        (None, "got None (a NoneType)"),
    ],
)
def test_a_refused_priority_names_the_option_the_value_and_the_range(
    value: Any, shown: str
) -> None:
    with pytest.raises(JobOptionError, match="priority of job x must be an int") as caught:
        check_priority(value, "job x")
    assert shown in str(caught.value)
    assert caught.value.option == "priority"
    assert caught.value.value is value


def test_the_priority_range_folds_with_run_at_into_an_exact_double() -> None:
    # a store may sort on (MAX_PRIORITY - priority) * 2**44 + run_at_ms: exact below 2**53
    from jobs.options import MAX_RUN_AT_MS

    assert MAX_RUN_AT_MS < 2**44
    assert (MAX_PRIORITY - MIN_PRIORITY + 1) * 2**44 < 2**53


@pytest.mark.parametrize(
    "name", [DEFAULT_QUEUE, "emails", "exports.v2", "tenant:42", "a-b_c", "x" * MAX_QUEUE_LENGTH]
)
def test_a_queue_name_of_letters_digits_and_separators_is_taken(name: str) -> None:
    assert check_queue(name) == name


@pytest.mark.parametrize(
    "value",
    ["", "x" * (MAX_QUEUE_LENGTH + 1), "with space", "{tag}", "a\x00b", "é", 5, None, b"q"],
)
def test_a_bad_queue_name_is_refused_naming_the_option(value: Any) -> None:
    with pytest.raises(JobOptionError, match="queue must be a name of 1 to 64") as caught:
        check_queue(value)
    assert caught.value.option == "queue"


def test_queues_in_strict_order_from_text_or_a_list() -> None:
    assert parse_queues("critical,default") == QueueWeights(("critical", "default"))
    assert parse_queues(" critical , default ") == QueueWeights(("critical", "default"))
    assert parse_queues(["emails"]) == QueueWeights(("emails",))
    assert parse_queues(("a", "b")).weights is None


def test_queues_with_weights() -> None:
    assert parse_queues("critical=3,default=1") == QueueWeights(("critical", "default"), (3, 1))
    assert parse_queues(["a=1", "b = 2"]) == QueueWeights(("a", "b"), (1, 2))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "queue must be a name"),
        ([], "must name at least one queue"),
        ("a,a", "names a queue twice: a, a"),
        ("a=3,b", "give every queue a weight or none"),
        ("a=0", "the weight of 'a' must be a whole number from 1"),
        ("a=-1", "the weight of 'a' must be a whole number from 1"),
        ("a=1.5", "the weight of 'a' must be a whole number from 1"),
        ("a=\u00b3", "the weight of 'a' must be a whole number from 1"),
        (f"a={MAX_CONCURRENCY + 1}", "the weight of 'a' must be a whole number from 1"),
        ("a=" + "9" * 5000, "the weight of 'a' must be a whole number from 1"),
        ("a b", "queue must be a name"),
        (5, "queues must be a comma-separated text or a list"),
    ],
)
def test_bad_queues_are_refused_naming_the_option(value: Any, message: str) -> None:
    with pytest.raises(JobOptionError, match=message) as caught:
        parse_queues(value)
    assert caught.value.option in ("queues", "queue")


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("10/s", RateLimit(10, 1_000)),
        ("600/m", RateLimit(600, 60_000)),
        (" 5000 / h ", RateLimit(5000, 3_600_000)),
        (f"{MAX_RATE_COUNT}/s", RateLimit(MAX_RATE_COUNT, 1_000)),
    ],
)
def test_a_rate_limit_reads_as_starts_per_period(text: str, limit: RateLimit) -> None:
    assert parse_rate_limit(text) == limit
    assert parse_rate_limit(limit) is limit
    assert str(limit) == text.replace(" ", "")


@pytest.mark.parametrize(
    "value",
    [
        "0/s",
        "10",
        "10/d",
        "10/sec",
        "-1/s",
        "1.5/s",
        "\u0663/s",
        f"{MAX_RATE_COUNT + 1}/s",
        10,
        None,
    ],
)
def test_a_bad_rate_limit_is_refused_naming_the_option(value: Any) -> None:
    with pytest.raises(JobOptionError, match="rate_limit of t must be 'N/s', 'N/m' or 'N/h'") as c:
        parse_rate_limit(value, "t")
    assert c.value.option == "rate_limit"


def test_concurrency_is_a_whole_number_from_one() -> None:
    assert check_concurrency(1) == 1
    assert check_concurrency(MAX_CONCURRENCY) == MAX_CONCURRENCY
    for value in (0, -1, 2.0, True, MAX_CONCURRENCY + 1):
        with pytest.raises(JobOptionError, match="global_concurrency must be an int from 1"):
            check_concurrency(value, option="global_concurrency")
