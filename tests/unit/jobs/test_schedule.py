"""Schedule and cron maths: next occurrences, keys, validation, daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from jobs import JobHandlerRegistry, Schedule, ScheduleError, define_job, job_handler
from jobs.schedule import occurrence_iso


def ms(text: str) -> int:
    """Epoch ms of an ISO time (``Z`` or an explicit offset)."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def isos(values: Any) -> list[str]:
    return [occurrence_iso(value) for value in values]


def nexts(schedule: Schedule, after: str, count: int) -> list[str]:
    found: list[int] = []
    when = ms(after)
    for _ in range(count):
        occurrence = schedule.next_after(when)
        assert occurrence is not None
        found.append(occurrence)
        when = occurrence
    return isos(found)


# -- UTC ---------------------------------------------------------------------------------------


def test_next_occurrence_is_strictly_after_the_given_time() -> None:
    nightly = Schedule(cron="0 3 * * *", job="report.nightly")
    assert nexts(nightly, "2026-10-16T02:59:30Z", 1) == ["2026-10-16T03:00:00Z"]
    assert nexts(nightly, "2026-10-16T02:59:59.999Z", 1) == ["2026-10-16T03:00:00Z"]
    assert nexts(nightly, "2026-10-16T03:00:00Z", 1) == ["2026-10-17T03:00:00Z"]
    assert nexts(nightly, "2026-10-16T03:00:00.001Z", 1) == ["2026-10-17T03:00:00Z"]


def test_the_key_is_the_name_and_the_utc_occurrence() -> None:
    nightly = Schedule(cron="0 3 * * *", job="report.nightly")
    assert nightly.key(ms("2026-10-16T03:00:00Z")) == "report.nightly:2026-10-16T03:00:00Z"
    named = Schedule(cron="0 3 * * *", job="report.nightly", name="report.nightly.eu")
    assert named.key(ms("2026-10-16T03:00:00Z")) == "report.nightly.eu:2026-10-16T03:00:00Z"
    berlin = Schedule(cron="0 3 * * *", job="r", timezone="Europe/Berlin")
    assert berlin.key(ms("2026-10-16T03:00:00+02:00")) == "r:2026-10-16T01:00:00Z"


def test_occurrences_in_a_window_include_both_ends() -> None:
    every_minute = Schedule(cron="* * * * *", job="t")
    window = every_minute.occurrences(ms("2026-01-01T00:00:00Z"), ms("2026-01-01T00:03:00Z"))
    assert isos(window) == [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:01:00Z",
        "2026-01-01T00:02:00Z",
        "2026-01-01T00:03:00Z",
    ]
    assert (
        list(
            every_minute.occurrences(ms("2026-01-01T00:00:00.001Z"), ms("2026-01-01T00:00:59.999Z"))
        )
        == []
    )


def test_six_fields_lead_with_seconds() -> None:
    every_five_seconds = Schedule(cron="*/5 * * * * *", job="t")
    assert nexts(every_five_seconds, "2026-01-01T00:00:01Z", 3) == [
        "2026-01-01T00:00:05Z",
        "2026-01-01T00:00:10Z",
        "2026-01-01T00:00:15Z",
    ]


def test_month_ends_and_leap_days() -> None:
    leap = Schedule(cron="0 0 29 2 *", job="t")
    assert nexts(leap, "2026-03-01T00:00:00Z", 2) == [
        "2028-02-29T00:00:00Z",
        "2032-02-29T00:00:00Z",
    ]
    last_day = Schedule(cron="0 12 L * *", job="t")
    assert nexts(last_day, "2026-02-01T00:00:00Z", 2) == [
        "2026-02-28T12:00:00Z",
        "2026-03-31T12:00:00Z",
    ]


# -- daylight saving: Europe/Berlin (last Sundays of March and October) ------------------------


def test_berlin_spring_forward_runs_a_skipped_wall_clock_time_once_after_the_gap() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    schedule = Schedule(cron="30 2 * * *", job="t", timezone="Europe/Berlin")
    assert nexts(schedule, "2026-03-28T00:00:00Z", 3) == [
        "2026-03-28T01:30:00Z",  # 02:30 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST, the first valid minute after the gap
        "2026-03-30T00:30:00Z",  # 02:30 CEST
    ]


def test_berlin_fall_back_runs_a_repeated_wall_clock_time_once() -> None:
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    schedule = Schedule(cron="30 2 * * *", job="t", timezone="Europe/Berlin")
    assert nexts(schedule, "2026-10-24T12:00:00Z", 3) == [
        "2026-10-25T00:30:00Z",  # 02:30 CEST, the first of the two
        "2026-10-26T01:30:00Z",  # 02:30 CET
        "2026-10-27T01:30:00Z",
    ]


def test_berlin_hourly_follows_real_time_across_both_changes() -> None:
    hourly = Schedule(cron="0 * * * *", job="t", timezone="Europe/Berlin")
    spring = hourly.occurrences(ms("2026-03-28T23:30:00Z"), ms("2026-03-29T02:30:00Z"))
    assert isos(spring) == [
        "2026-03-29T00:00:00Z",  # 01:00 CET
        "2026-03-29T01:00:00Z",  # 03:00 CEST (there is no 02:00)
        "2026-03-29T02:00:00Z",  # 04:00 CEST
    ]
    autumn = hourly.occurrences(ms("2026-10-24T23:30:00Z"), ms("2026-10-25T02:30:00Z"))
    assert isos(autumn) == [
        "2026-10-25T00:00:00Z",  # 02:00 CEST
        "2026-10-25T01:00:00Z",  # 02:00 CET: the repeated hour, a distinct key
        "2026-10-25T02:00:00Z",  # 03:00 CET
    ]


# -- daylight saving: America/New_York (second Sunday of March, first of November) -------------


def test_new_york_spring_forward() -> None:
    # 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    schedule = Schedule(cron="30 2 * * *", job="t", timezone="America/New_York")
    assert nexts(schedule, "2026-03-07T12:00:00Z", 3) == [
        "2026-03-08T07:00:00Z",  # 03:00 EDT
        "2026-03-09T06:30:00Z",  # 02:30 EDT
        "2026-03-10T06:30:00Z",
    ]


def test_new_york_fall_back_runs_once_even_when_asked_inside_the_repeated_hour() -> None:
    # 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens at 05:30Z and 06:30Z.
    schedule = Schedule(cron="30 1 * * *", job="t", timezone="America/New_York")
    assert nexts(schedule, "2026-10-31T12:00:00Z", 2) == [
        "2026-11-01T05:30:00Z",  # 01:30 EDT
        "2026-11-02T06:30:00Z",  # 01:30 EST the next day; not 06:30Z on the 1st
    ]
    # Asked at 01:10 EST (the second 01:xx), the first 01:30 has passed and the second is not
    # an occurrence: the next is the following day, never a time in the past.
    assert nexts(schedule, "2026-11-01T06:10:00Z", 1) == ["2026-11-02T06:30:00Z"]


def test_new_york_weekday_mornings_keep_their_wall_clock_time() -> None:
    schedule = Schedule(cron="0 9 * * 1-5", job="t", timezone="America/New_York")
    assert nexts(schedule, "2026-03-05T00:00:00Z", 3) == [
        "2026-03-05T14:00:00Z",  # Thu 09:00 EST
        "2026-03-06T14:00:00Z",  # Fri 09:00 EST
        "2026-03-09T13:00:00Z",  # Mon 09:00 EDT (after the Sunday change)
    ]


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "timezone", "expected"),
    [
        ("61 * * * *", "UTC", "bad cron"),
        ("* * *", "UTC", "needs 5 fields"),
        ("* * * * * * *", "UTC", "needs 5 fields"),
        ("", "UTC", "non-empty"),
        ("0 3 * * mon-xyz", "UTC", "bad cron"),
        ("0 0 31 2 *", "UTC", "bad cron"),
        ("0 3 * * *", "Mars/Olympus_Mons", "unknown timezone"),
        ("0 3 * * *", "../etc/passwd", "unknown timezone"),
        ("0 3 * * *", "", "timezone"),
    ],
)
def test_a_bad_cron_or_timezone_names_the_schedule(cron: str, timezone: str, expected: str) -> None:
    with pytest.raises(ScheduleError, match=expected) as raised:
        Schedule(cron=cron, job="report.nightly", timezone=timezone)
    assert "'report.nightly'" in str(raised.value)
    with pytest.raises(ScheduleError, match="'nightly-eu'"):
        Schedule(cron=cron, job="report.nightly", timezone=timezone, name="nightly-eu")


def test_a_bad_job_type_or_name_is_a_schedule_error() -> None:
    with pytest.raises(ScheduleError, match="job type must not be empty"):
        Schedule(cron="0 3 * * *", job="")
    with pytest.raises(ScheduleError, match="over the limit"):
        Schedule(cron="0 3 * * *", job="t", name="n" * 1020)


def test_job_handler_checks_cron_and_timezone_at_decoration() -> None:
    with pytest.raises(ScheduleError, match=r"'report.nightly'.*bad cron"):
        job_handler("report.nightly", cron="0 25 * * *")
    with pytest.raises(ScheduleError, match=r"'report.nightly'.*unknown timezone"):
        job_handler("report.nightly", cron="0 3 * * *", timezone="Europe/Atlantis")
    with pytest.raises(ScheduleError, match=r"'report.weekly'"):
        JobHandlerRegistry().register("report.weekly", lambda payload: None, cron="nope")
    job_handler("report.nightly", cron="0 3 * * *", timezone="Europe/Berlin")  # fine


def test_a_definition_schedule_sends_the_schema_defaults_without_a_payload() -> None:
    class Report(BaseModel):
        region: str = "eu"

    definition = define_job("report.nightly", Report)
    schedule = Schedule(cron="0 3 * * *", job=definition)
    assert (schedule.job_type, schedule.key_prefix, schedule.job_payload) == (
        "report.nightly",
        "report.nightly",
        {},
    )
    assert Schedule(cron="0 3 * * *", job="t").job_payload is None


def test_occurrence_iso_is_utc_to_the_second() -> None:
    assert occurrence_iso(ms("2026-10-16T03:00:00.999Z")) == "2026-10-16T03:00:00Z"
    assert occurrence_iso(0) == "1970-01-01T00:00:00Z"
    assert datetime(2026, 10, 16, 3, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") == (
        occurrence_iso(ms("2026-10-16T03:00:00Z"))
    )
