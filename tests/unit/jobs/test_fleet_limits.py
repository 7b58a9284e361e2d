"""Fleet-wide limits as users write them (``global_concurrency``, ``rate_limit``,
``queue_limits``): refused at decoration or in the settings with the option and the fix named;
and the claim plan every store shares (``plan_claim``), checked against a brute force."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs import JobHandlerRegistry, JobsSettings, job_handler
from jobs.errors import JobOptionError
from jobs.spi import ClaimLimits, FleetLimit, LimitUsage, plan_claim, queue_key, type_key


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"global_concurrency": 0}, "global_concurrency of handler 'x' must be an int from 1"),
        ({"global_concurrency": True}, "global_concurrency of handler 'x'"),
        ({"global_concurrency": math.nan}, "got nan (a float)"),
        ({"global_concurrency": 2.0}, "global_concurrency of handler 'x'"),
        ({"rate_limit": "10/x"}, "rate_limit of handler 'x' must be 'N/s', 'N/m' or 'N/h'"),
        ({"rate_limit": "0/s"}, "rate_limit of handler 'x'"),
        ({"rate_limit": 10}, "rate_limit of handler 'x'"),
    ],
)
def test_a_bad_limit_is_refused_at_decoration_naming_the_handler(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(JobOptionError) as refused:
        job_handler("x", **options)
    assert named in str(refused.value)
    with pytest.raises(JobOptionError):
        JobHandlerRegistry().register("x", lambda payload: None, **options)


def test_a_handlers_limits_are_what_the_registry_hands_the_runner() -> None:
    registry = JobHandlerRegistry()
    registry.register("sms.send", lambda p: None, global_concurrency=5, rate_limit="600/m")
    registry.register("plain", lambda p: None)
    assert registry.fleet_limits == {"sms.send": FleetLimit(concurrency=5, rate=600, per_ms=60_000)}


@pytest.mark.parametrize(
    ("queue_limits", "named"),
    [
        ([("exports", 2)], "queue_limits of JobsSettings must map queue names"),
        ({"exports": {}}, "queue_limits['exports'] of JobsSettings must be a mapping"),
        ({"exports": {"concurrency": 2}}, "unknown option(s) concurrency"),
        ({"two words": {"global_concurrency": 2}}, "queue"),
        ({"exports": {"global_concurrency": -1}}, "queue 'exports'"),
        ({"exports": {"rate_limit": "fast"}}, "queue 'exports'"),
    ],
)
def test_bad_queue_limits_are_refused_by_the_settings(queue_limits: object, named: str) -> None:
    with pytest.raises(JobOptionError) as refused:
        JobsSettings(queue_limits=queue_limits)  # type: ignore[arg-type]
    assert named in str(refused.value)


def test_a_limit_describes_itself_as_the_pages_show_it() -> None:
    assert FleetLimit(concurrency=2, rate=10).describe() == "2 at once, 10/s"
    assert FleetLimit(rate=5000, per_ms=3_600_000).describe() == "5000/h"
    with pytest.raises(ValueError, match="limits concurrency, rate or both"):
        FleetLimit()


def test_a_full_rate_says_when_its_window_turns_and_a_full_concurrency_does_not() -> None:
    limits = ClaimLimits(
        types={"a": FleetLimit(rate=2, per_ms=1_000), "b": FleetLimit(concurrency=1)}
    )
    usage = {
        type_key("a"): LimitUsage(held=0, started=2, oldest_start_ms=9_400),
        type_key("b"): LimitUsage(held=1),
    }
    plan = plan_claim(10, ["a", "b", "c"], "default", limits, usage, now_ms=10_000)
    assert plan.types == ["c"]
    assert plan.held == {"a", "b"}
    assert plan.retry_ms is None, "b frees at a settle: no time known"
    only_rate = plan_claim(10, ["a", "c"], "default", limits, usage, now_ms=10_000)
    assert only_rate.retry_ms == 400


_TYPES = ("a", "b", "c")


@given(
    limit=st.integers(1, 12),
    rooms=st.fixed_dictionaries({t: st.none() | st.integers(0, 4) for t in _TYPES}),
    queue_room=st.none() | st.integers(0, 6),
    candidates=st.lists(st.sampled_from(_TYPES), max_size=30),
)
def test_a_plan_takes_in_order_what_every_room_admits_and_nothing_more(
    limit: int,
    rooms: dict[str, int | None],
    queue_room: int | None,
    candidates: list[str],
) -> None:
    limits = ClaimLimits(
        types={t: FleetLimit(concurrency=4) for t, room in rooms.items() if room is not None},
        queue=None if queue_room is None else FleetLimit(concurrency=6),
    )
    usage = {
        type_key(t): LimitUsage(held=4 - room) for t, room in rooms.items() if room is not None
    }
    if queue_room is not None:
        usage[queue_key("q")] = LimitUsage(held=6 - queue_room)
    plan = plan_claim(limit, _TYPES, "q", limits, usage, now_ms=0)
    offered = [(n, t) for n, t in enumerate(candidates) if t in plan.types]
    taken = [candidates[n] for n in plan.pick(offered)]

    # the brute force: walk the candidates in order, take each one every room still admits
    left = dict(rooms)
    total = limit if queue_room is None else min(limit, queue_room)
    expected: list[str] = []
    for job_type in candidates:
        if len(expected) == total:
            break
        room = left[job_type]
        if room is None or room > 0:
            expected.append(job_type)
            left[job_type] = None if room is None else room - 1
    assert taken == expected
    held = {t for t, room in rooms.items() if room == 0}
    assert plan.held == (set(_TYPES) if queue_room == 0 else held)
