"""A fuzz (property) test of the public enqueue API on every driver (Hypothesis).

Any input to ``JobQueue.enqueue`` or ``enqueue_many`` (payloads of every JSON and non-JSON
shape, names with odd characters, options of every type: NaN, infinities, huge ints, bools,
floats, negatives, None, strings, naive and far datetimes) ends one of two ways:

- a typed error (``JobOptionError``, ``PayloadError``, ``JobTypeError``: ValueErrors the
  package defines) with nothing written; or
- a job that reads back unchanged through ``get_job``, ``list_jobs``, a claim and the
  dashboard's job page.

The inputs a job is made of are judged here independently of the package (``expected``), so
the test also fails when a good input is refused. A few examples per driver in ``make test``,
many more in ``make test-all``.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import math
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs import (
    JobOptionError,
    JobOutboxPublisher,
    JobQueue,
    ManualClock,
    NewJob,
    PayloadError,
)
from jobs.errors import JobTypeError
from jobs.options import MAX_ATTEMPTS, MAX_DELAY_MS, MAX_RUN_AT_MS, MAX_TIMEOUT_MS
from jobs.payload import MAX_DEPTH, MAX_KEY_LENGTH, MAX_TYPE_LENGTH
from jobs.spi import JOB_STATES, JobDriver, JobInfo
from jobs.testing.stateful import CleanableHarness
from jobs.web import create_dashboard
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)
from orm_sqlalchemy.factory import drop_prefixed_tables
from tests.conformance.conftest import InProcessHarness
from tests.integration.redis.harness import RedisHarness
from tests.integration.sql_store.support import StoreHarness
from tests.stores import POSTGRES_URL

LEASE_MS = 30_000
TYPED_ERRORS = (JobOptionError, PayloadError, JobTypeError)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SqlHarness(StoreHarness):
    """A StoreHarness in a temporary directory of its own, removed at cleanup."""

    def __init__(self, backend: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="enqueue-fuzz-"))
        super().__init__(backend, self.directory)

    async def cleanup(self) -> None:
        try:
            await super().cleanup()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


HARNESSES: dict[str, Callable[[], CleanableHarness]] = {
    "inprocess": InProcessHarness,
    "sqlite": lambda: SqlHarness("sqlite"),
    "postgres": lambda: SqlHarness("postgres"),
    "redis": RedisHarness,
}
DRIVERS = [
    pytest.param("inprocess"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]

# -- inputs -------------------------------------------------------------------------------------

odd_text = st.text(
    st.characters(codec=None, exclude_categories=()),  # any code point: NUL, surrogates, RTL...
    max_size=40,
)
good_names = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1,
            max_size=40),
    st.sampled_from(["t", "email.send", "[/bold]", "<script>x</script>", "a" * MAX_TYPE_LENGTH]),
)  # fmt: skip
names = st.one_of(
    good_names,
    good_names,
    good_names,
    odd_text,
    st.text(min_size=MAX_TYPE_LENGTH, max_size=MAX_TYPE_LENGTH + 2),
    st.integers(),
    st.none(),
    st.binary(max_size=5),
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_text,
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(odd_text, inner, max_size=4)
    ),
    max_leaves=12,
)
not_json = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not math.isfinite(x)),
    st.sets(st.integers(), max_size=3),
    st.tuples(st.integers()),
    st.binary(max_size=5),
    st.datetimes(),
    st.builds(object),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.dictionaries(st.tuples(st.integers()), st.integers(), min_size=1, max_size=1),
)
payloads = st.one_of(
    json_values,
    json_values,
    st.recursive(
        st.one_of(json_leaves, not_json),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(odd_text, inner, max_size=3)
        ),
        max_leaves=8,
    ),
)


def numbers(low: int, high: int) -> st.SearchStrategy[Any]:
    """Anything a caller might pass as an int option (often nothing, or a good one)."""
    good = st.one_of(st.integers(min_value=low, max_value=high), st.sampled_from([low, high]))
    return st.one_of(
        st.none(),
        st.none(),
        good,
        good,
        st.sampled_from([low - 1, high + 1, 0, -1, 2**31, 2**63, -(2**63), 10**20]),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 1.0, 0.5, 5.0]),
        st.booleans(),
        st.text(max_size=3),
    )


zones: Any = st.one_of(
    st.none(),
    st.just(UTC),
    st.builds(
        lambda minutes: timezone(timedelta(minutes=minutes)),
        st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
    ),
)
run_ats = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.datetimes(timezones=zones),
    st.datetimes(datetime(1969, 12, 30), datetime(1970, 1, 2), timezones=zones),
    st.datetimes(datetime(2499, 12, 30), datetime(2500, 1, 2), timezones=zones),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
)


@dataclass(frozen=True)
class Case:
    """One call's arguments (options None are left out of the call)."""

    job_type: Any
    payload: Any
    options: dict[str, Any]

    def call_options(self) -> dict[str, Any]:
        return {name: value for name, value in self.options.items() if value is not None}


ANY_OPTION: dict[str, st.SearchStrategy[Any]] = {
    "delay_ms": numbers(0, MAX_DELAY_MS),
    "run_at": run_ats,
    "timeout_ms": numbers(1, MAX_TIMEOUT_MS),
    "max_attempts": numbers(1, MAX_ATTEMPTS),
    "key": st.one_of(st.none(), names),
}
good_run_at = st.datetimes(datetime(1970, 1, 2), datetime(2499, 12, 30), timezones=st.just(UTC))
good_options = st.builds(
    lambda when, timeout, attempts, key: {**when, "timeout_ms": timeout,
                                          "max_attempts": attempts, "key": key},
    st.one_of(
        st.just({"delay_ms": None, "run_at": None}),
        st.builds(lambda ms: {"delay_ms": ms, "run_at": None}, st.integers(0, MAX_DELAY_MS)),
        st.builds(lambda ms: {"delay_ms": ms, "run_at": None}, st.just(0)),
        st.builds(lambda at: {"delay_ms": None, "run_at": at}, good_run_at),
    ),
    st.one_of(st.none(), st.integers(1, MAX_TIMEOUT_MS)),
    st.one_of(st.none(), st.integers(1, MAX_ATTEMPTS)),
    st.one_of(st.none(), good_names),
)  # fmt: skip
good_cases = st.builds(Case, job_type=good_names, payload=json_values, options=good_options)
"""A job every driver must store."""


def _spoiled(case: Case, field: str, value: Any) -> Case:
    if field == "job_type":
        return Case(value, case.payload, case.options)
    if field == "payload":
        return Case(case.job_type, value, case.options)
    return Case(case.job_type, case.payload, {**case.options, field: value})


one_field_wild = st.builds(
    lambda case, change: _spoiled(case, *change),
    good_cases,
    st.sampled_from(["job_type", "payload", *ANY_OPTION]).flatmap(
        lambda field: st.tuples(
            st.just(field),
            {"job_type": names, "payload": payloads, **ANY_OPTION}[field],
        )
    ),
)
"""A good job with one argument drawn from anything at all."""
all_wild = st.builds(
    Case, job_type=names, payload=payloads, options=st.fixed_dictionaries(ANY_OPTION)
)
cases = st.one_of(good_cases, one_field_wild, one_field_wild, all_wild)


# -- what the package must do with them, judged here ----------------------------------------------


def is_text(value: Any) -> bool:
    """A str that UTF-8 can hold (no lone surrogate)."""
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_name(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and "\x00" not in value and (
        is_text(str(value))
    )


def is_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` comes back from JSON as it went in (the payload rules)."""
    if depth > MAX_DEPTH:
        return False
    if value is None or type(value) in (bool, int):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is str:
        return is_text(value)
    if type(value) is list:
        return all(is_json(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(is_text(key) for key in value) and all(
            is_json(item, depth + 1) for item in value.values()
        )
    return False


def is_int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def expected_run_at_ms(case: Case, now_ms: int) -> int | None:
    """The job's run_at by the store's clock, or None when the options are refused."""
    delay, run_at = case.options["delay_ms"], case.options["run_at"]
    if delay is not None and run_at is not None:
        return None
    if delay is not None:
        return now_ms + delay if is_int_in(delay, 0, MAX_DELAY_MS) else None
    if run_at is None:
        return now_ms
    if not isinstance(run_at, datetime) or run_at.utcoffset() is None:
        return None
    try:
        ms = (run_at - EPOCH) // timedelta(milliseconds=1)
    except OverflowError:
        return None
    return ms if 0 <= ms < MAX_RUN_AT_MS else None


def accepted(case: Case, now_ms: int) -> bool:
    options = case.options
    return (
        is_name(case.job_type, MAX_TYPE_LENGTH)
        and (options["key"] is None or is_name(options["key"], MAX_KEY_LENGTH))
        and is_json(case.payload)
        and expected_run_at_ms(case, now_ms) is not None
        and (options["timeout_ms"] is None or is_int_in(options["timeout_ms"], 1, MAX_TIMEOUT_MS))
        and (
            options["max_attempts"] is None or is_int_in(options["max_attempts"], 1, MAX_ATTEMPTS)
        )
    )


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON types all the way down (1 is not 1.0, True is not 1)."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


# -- the checks -----------------------------------------------------------------------------------


class Fuzz:
    """One driver, one queue and one dashboard for every example of a test."""

    def __init__(self, harness: CleanableHarness, driver: JobDriver) -> None:
        self.harness = harness
        self.driver = driver
        self.queue = JobQueue(driver)
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_dashboard(self.queue)),
            base_url="http://dashboard",
        )
        self.serial = itertools.count()

    def unique(self, case: Case) -> Case:
        """The case with a key no other example used (the generated text kept after it)."""
        key = case.options["key"]
        if not isinstance(key, str):
            return case
        prefix = f"{next(self.serial)}:"
        return Case(case.job_type, case.payload, {**case.options, "key": prefix + key})

    async def written(self) -> tuple[dict[Any, int], list[str]]:
        page = await self.driver.list_jobs(limit=1_000)
        return await self.driver.counts(), [job.id for job in page.jobs]

    async def enqueue_one(self, case: Case) -> None:
        case = self.unique(case)
        before = await self.written()
        now_ms = self.harness.clock.now_ms()
        try:
            job_id = await self.queue.enqueue(case.job_type, case.payload, **case.call_options())
        except TYPED_ERRORS as exc:
            refused: BaseException | None = exc
        else:
            refused = None
        if refused is not None:
            assert not accepted(case, now_ms), f"a good job was refused: {refused!r}"
            assert await self.written() == before, "a refused enqueue wrote something"
            return
        assert accepted(case, now_ms), f"a bad job was stored: {case!r}"
        assert job_id is not None
        await self.check_claims([await self.check_stored(job_id, case, now_ms)], now_ms)

    async def enqueue_batch(self, batch: list[Case]) -> None:
        batch = [self.unique(case) for case in batch]
        before = await self.written()
        now_ms = self.harness.clock.now_ms()
        jobs = [
            NewJob(type=case.job_type, payload=case.payload, **case.call_options())
            for case in batch
        ]
        try:
            ids = await self.queue.enqueue_many(jobs)
        except TYPED_ERRORS as exc:
            refused: BaseException | None = exc
        else:
            refused = None
        if refused is not None:
            assert not all(accepted(case, now_ms) for case in batch), f"refused: {refused!r}"
            assert await self.written() == before, "a refused batch wrote something"
            return
        assert all(accepted(case, now_ms) for case in batch), f"a bad job was stored: {batch!r}"
        stored: list[tuple[JobInfo, Any]] = []
        for case, job_id in zip(batch, ids, strict=True):
            assert job_id is not None  # every key is new (``unique``)
            stored.append(await self.check_stored(job_id, case, now_ms))
        await self.check_claims(stored, now_ms)

    async def check_stored(self, job_id: str, case: Case, now_ms: int) -> tuple[JobInfo, Any]:
        """The job as get_job, list_jobs and the dashboard show it; its JobInfo and payload."""
        options = case.options
        info = await self.driver.get_job(job_id)
        assert info is not None
        expected_payload = json.loads(json.dumps(case.payload))
        assert same(info.payload, expected_payload), (info.payload, case.payload)
        assert (info.type, info.state, info.attempts) == (case.job_type, "pending", 0)
        assert info.key == options["key"]
        assert info.max_attempts == (options["max_attempts"] or 3)
        assert info.timeout_ms == options["timeout_ms"]
        run_at_ms = expected_run_at_ms(case, now_ms)
        assert (info.run_at - EPOCH) // timedelta(milliseconds=1) == run_at_ms
        page = await self.driver.list_jobs(job_type=case.job_type, limit=1_000)
        listed = [job for job in page.jobs if job.id == job_id]
        assert listed == [info], "list_jobs does not show the job as get_job does"
        await self.check_page(info, expected_payload)
        return info, expected_payload

    async def check_page(self, info: JobInfo, payload: Any) -> None:
        response = await self.client.get(f"/job/{info.id}", params={"payload": "all"})
        assert response.status_code == 200, response.text[:500]
        shown = re.search(
            r'<pre class="code" data-testid="payload">(.*?)</pre>',
            response.text,
            re.S,
        )
        assert shown is not None
        assert same(json.loads(html.unescape(shown.group(1))), payload)
        assert f'<h1 class="mono job-id">{html.escape(info.id)}</h1>' in response.text

    async def check_claims(self, stored: list[tuple[JobInfo, Any]], now_ms: int) -> None:
        """A claim of the jobs' types leases the due ones as stored, and no other of them."""
        types = sorted({info.type for info, _ in stored})
        claimed = {job.id: job for job in await self.driver.claim(1_000, LEASE_MS, types)}
        for info, payload in stored:
            due = (info.run_at - EPOCH) // timedelta(milliseconds=1) <= now_ms
            job = claimed.get(info.id)
            if not due:
                assert job is None, "a job not due yet was claimed"
                continue
            assert job is not None, "a due job was not claimed"
            assert same(json.loads(job.payload), payload)
            assert (job.type, job.attempt, job.max_attempts) == (info.type, 1, info.max_attempts)
            assert (job.key, job.timeout_ms) == (info.key, info.timeout_ms)
        assert await self.driver.complete_many(
            [(job.id, job.lease_token) for job in claimed.values()]
        ) == [True] * len(claimed)

    async def close(self) -> None:
        await self.client.aclose()


def run_fuzz(name: str, max_examples: int, batches: bool) -> None:
    """The property, ``max_examples`` times, on one fresh store of driver ``name``."""
    loop = asyncio.new_event_loop()
    harness = HARNESSES[name]()
    try:
        fuzz = Fuzz(harness, loop.run_until_complete(harness.driver()))

        @settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        )
        @given(st.lists(cases, min_size=1, max_size=4) if batches else cases)
        def one(case: Any) -> None:
            call = fuzz.enqueue_batch(case) if batches else fuzz.enqueue_one(case)
            loop.run_until_complete(call)

        try:
            one()
            counts = loop.run_until_complete(fuzz.driver.counts())
            assert set(counts) == set(JOB_STATES)
        finally:
            loop.run_until_complete(fuzz.close())
    finally:
        try:
            loop.run_until_complete(harness.cleanup())
        finally:
            loop.close()


class OutboxFuzz:
    """An outbox and a job store on one SQL database (and one clock), relayed by hand."""

    def __init__(self, backend: str, directory: Path) -> None:
        self.backend = backend
        self.clock = ManualClock()
        self.prefix = f"f{uuid.uuid4().hex[:10]}_"
        url = POSTGRES_URL if backend == "postgres" else f"sqlite+aiosqlite:///{directory}/o.db"
        self.tm = SQLAlchemyTransactionManager(create_engine(url))
        self.outbox = SQLAlchemyOutboxStore(
            transaction_manager=self.tm, table_prefix=self.prefix, clock=self.clock
        )
        self.jobs = SQLAlchemyJobStore(
            engine=self.tm.engine, table_prefix=self.prefix, clock=self.clock
        )
        self.queue = JobQueue(self.jobs)
        self.publisher = JobOutboxPublisher(self.queue)
        self.serial = itertools.count()

    async def append_one(self, case: Case) -> None:
        options = {k: v for k, v in case.call_options().items() if k != "timeout_ms"}
        case = Case(case.job_type, case.payload, {**case.options, "timeout_ms": None})
        key = options.get("key")
        if isinstance(key, str):
            options["key"] = f"{next(self.serial)}:{key}"
        now_ms = self.clock.now_ms()
        refused: BaseException | None = None
        async with self.tm.transaction():
            try:
                entry_id = await self.outbox.append(case.job_type, case.payload, **options)
            except TYPED_ERRORS as exc:
                refused = exc
        if refused is not None:
            assert not accepted(case, now_ms), f"a good entry was refused: {refused!r}"
            assert await self.outbox.claim(1_000, LEASE_MS) == [], "a refused append wrote"
            return
        assert accepted(case, now_ms), f"a bad entry was stored: {case!r}"
        assert entry_id is not None
        [entry] = await self.outbox.claim(1_000, LEASE_MS)
        assert entry.id == entry_id
        await self.publisher.publish(entry)
        assert await self.outbox.mark_published(entry.id, entry.lease_token)
        job = await self.queue.find_job(key=options.get("key") or f"outbox:{entry_id}")
        assert job is not None
        assert same(job.payload, json.loads(json.dumps(case.payload)))
        assert (job.type, job.max_attempts) == (case.job_type, case.options["max_attempts"] or 3)
        expected = expected_run_at_ms(case, now_ms)
        assert (job.run_at - EPOCH) // timedelta(milliseconds=1) == expected

    async def close(self) -> None:
        await self.outbox.close()
        await self.jobs.close()
        if self.backend == "postgres":
            async with self.tm.engine.begin() as conn:
                await drop_prefixed_tables(conn, self.prefix)
        await self.tm.engine.dispose()


def run_outbox_fuzz(backend: str, max_examples: int) -> None:
    loop = asyncio.new_event_loop()
    directory = Path(tempfile.mkdtemp(prefix="outbox-fuzz-"))
    fuzz = OutboxFuzz(backend, directory)
    try:

        @settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        )
        @given(cases)
        def one(case: Case) -> None:
            loop.run_until_complete(fuzz.append_one(case))

        one()
    finally:
        try:
            loop.run_until_complete(fuzz.close())
        finally:
            loop.close()
            shutil.rmtree(directory, ignore_errors=True)


OUTBOXES = [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", OUTBOXES)
def test_any_outbox_append_is_a_typed_error_or_a_job_that_reads_back_unchanged(
    backend: str,
) -> None:
    run_outbox_fuzz(backend, max_examples=30)


@pytest.mark.parametrize("name", DRIVERS)
def test_any_enqueue_is_a_typed_error_or_a_job_that_reads_back_unchanged(name: str) -> None:
    run_fuzz(name, max_examples=60, batches=False)


@pytest.mark.parametrize("name", DRIVERS)
def test_any_batch_is_a_typed_error_or_jobs_that_read_back_unchanged(name: str) -> None:
    run_fuzz(name, max_examples=25, batches=True)


@pytest.mark.slow
@pytest.mark.timeout(1_200)
@pytest.mark.parametrize("name", DRIVERS)
def test_enqueue_fuzz_at_length(name: str) -> None:
    run_fuzz(name, max_examples=600, batches=False)
    run_fuzz(name, max_examples=200, batches=True)


@pytest.mark.slow
@pytest.mark.timeout(1_200)
@pytest.mark.parametrize("backend", OUTBOXES)
def test_outbox_append_fuzz_at_length(backend: str) -> None:
    run_outbox_fuzz(backend, max_examples=400)
