from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobs import (
    JOB_QUEUE,
    InProcessJobDriver,
    JobQueue,
    JobsSettings,
    ManualClock,
    NewJob,
    PayloadError,
    PayloadTooLargeError,
    PayloadValidationError,
    define_job,
    job_handler,
)
from jobs.settings import DEFAULT_RETAIN_COMPLETED_MS, Retention

from .conftest import AppFactory


class Receipt(BaseModel):
    invoice_id: int
    email: str


SEND_RECEIPT = define_job("receipt.send", Receipt, max_attempts=5, timeout_ms=9_000)


async def test_enqueue_returns_the_id_and_stores_the_job() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    job_id = await queue.enqueue("email.send", {"to": "a@b.c"})
    assert isinstance(job_id, str)
    assert len(job_id) == 32
    info = await driver.get_job(job_id)
    assert info is not None
    assert (info.type, info.payload, info.max_attempts) == ("email.send", {"to": "a@b.c"}, 3)


async def test_ids_sort_by_time() -> None:
    queue = JobQueue(InProcessJobDriver())
    first = await queue.enqueue("t")
    second = await queue.enqueue("t")
    assert first is not None
    assert second is not None
    assert first[:12] <= second[:12]


async def test_a_live_key_drops_the_repeat() -> None:
    queue = JobQueue(InProcessJobDriver())
    assert await queue.enqueue("receipt", {"id": 1}, key="receipt:1") is not None
    assert await queue.enqueue("receipt", {"id": 1}, key="receipt:1") is None


async def test_payload_errors_are_raised_before_anything_is_stored() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    with pytest.raises(PayloadError, match=r'payload\["items"\]\[2\]\["deep"\]: set is not JSON'):
        await queue.enqueue("t", {"items": [1, 2, {"deep": {3}}]})
    assert sum((await driver.counts()).values()) == 0


async def test_payload_size_limit_comes_from_settings() -> None:
    queue = JobQueue(InProcessJobDriver(), settings=JobsSettings(max_payload_bytes=100))
    with pytest.raises(PayloadTooLargeError):
        await queue.enqueue("t", "x" * 200)


async def test_delay_and_run_at_are_relative_and_absolute() -> None:
    clock = ManualClock()
    driver = InProcessJobDriver(clock=clock)
    queue = JobQueue(driver)
    delayed = await queue.enqueue("t", delay_ms=5_000)
    when = datetime(2030, 1, 1, tzinfo=UTC)
    scheduled = await queue.enqueue("t", run_at=when)
    assert delayed is not None
    assert scheduled is not None
    delayed_info = await driver.get_job(delayed)
    scheduled_info = await driver.get_job(scheduled)
    assert delayed_info is not None
    assert scheduled_info is not None
    assert delayed_info.run_at == datetime.fromtimestamp(clock.now_ms() / 1000, UTC) + timedelta(
        milliseconds=5_000
    )
    assert scheduled_info.run_at == when


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay_ms": 1, "run_at": datetime(2030, 1, 1, tzinfo=UTC)}, "not both"),
        ({"delay_ms": -1}, "delay_ms must be an int from 0"),
        ({"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
        ({"max_attempts": 0}, "max_attempts must be an int from 1"),
        ({"timeout_ms": 0}, "timeout_ms must be an int from 1"),
        ({"key": ""}, "key must not be empty"),
    ],
)
async def test_bad_options_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await JobQueue(InProcessJobDriver()).enqueue("t", **kwargs)


async def test_a_definition_validates_its_payload_at_enqueue() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    job_id = await queue.enqueue(SEND_RECEIPT, {"invoice_id": "7", "email": "a@b.c"})
    assert job_id is not None
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.payload == {"invoice_id": 7, "email": "a@b.c"}
    assert (info.max_attempts, info.timeout_ms) == (5, 9_000)
    assert await queue.enqueue(SEND_RECEIPT, Receipt(invoice_id=8, email="x")) is not None
    with pytest.raises(PayloadValidationError) as caught:
        await queue.enqueue(SEND_RECEIPT, {"invoice_id": "seven"})
    message = str(caught.value)
    assert "job 'receipt.send' does not fit Receipt" in message
    assert 'payload["invoice_id"]' in message
    assert 'payload["email"]: Field required' in message


async def test_handler_max_attempts_wins_over_the_request(make_app: AppFactory) -> None:
    class Worker:
        @job_handler("picky", max_attempts=7)
        async def handle(self, payload: Any) -> None: ...

    driver = InProcessJobDriver()
    context = await make_app(driver=driver, worker=Worker())
    job_id = await context.get_value(JOB_QUEUE).enqueue("picky", max_attempts=2)
    assert job_id is not None
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.max_attempts == 7


async def test_a_handlers_priority_is_a_default_the_request_overrides(
    make_app: AppFactory,
) -> None:
    urgent = define_job("urgent", Receipt, priority=3)

    class Worker:
        @job_handler("picky", priority=5)
        async def handle(self, payload: Any) -> None: ...

        @job_handler(urgent)
        async def handle_urgent(self, payload: Receipt) -> None: ...

    driver = InProcessJobDriver()
    context = await make_app(driver=driver, worker=Worker())
    queue = context.get_value(JOB_QUEUE)
    receipt = Receipt(invoice_id=1, email="a@b.c")
    ids = [
        await queue.enqueue("picky"),
        await queue.enqueue("picky", priority=-1),
        await queue.enqueue(urgent, receipt),
        await queue.enqueue("other"),
        *await queue.enqueue_many([NewJob(type="picky"), NewJob(type="picky", priority=9)]),
    ]
    priorities = []
    for job_id in ids:
        assert job_id is not None
        info = await driver.get_job(job_id)
        assert info is not None
        priorities.append(info.priority)
    assert priorities == [5, -1, 3, 0, 5, 9]


async def test_the_queue_bean_uses_the_driver_bean_of_its_context(make_app: AppFactory) -> None:
    mine = InProcessJobDriver()
    context = await make_app(driver=mine)
    job_id = await context.get_value(JOB_QUEUE).enqueue("t")
    assert job_id is not None
    assert await mine.get_job(job_id) is not None


def test_driver_retention_defaults_and_refuses_negatives() -> None:
    retention = Retention.of(None, 5)
    assert (retention.completed_ms, retention.failed_ms) == (DEFAULT_RETAIN_COMPLETED_MS, 5)
    assert (retention.of_state("completed"), retention.of_state("failed")) == (
        DEFAULT_RETAIN_COMPLETED_MS,
        5,
    )
    with pytest.raises(ValueError, match="retain_completed_ms must not be negative"):
        InProcessJobDriver(retain_completed_ms=-1)


async def test_enqueue_many_applies_each_jobs_options_in_order() -> None:
    clock = ManualClock()
    driver = InProcessJobDriver(clock=clock)
    queue = JobQueue(driver)
    ids = await queue.enqueue_many(
        [
            NewJob(type=SEND_RECEIPT, payload=Receipt(invoice_id=1, email="a@b.c")),
            NewJob(type="email.send", payload={"to": "x"}, delay_ms=5_000, key="mail:x"),
            NewJob(type="email.send", payload={"to": "y"}, key="mail:x"),
        ]
    )
    assert ids[2] is None
    first, second = [await driver.get_job(job_id or "") for job_id in ids[:2]]
    assert first is not None
    assert second is not None
    assert (first.type, first.max_attempts, first.timeout_ms) == ("receipt.send", 5, 9_000)
    assert first.payload == {"invoice_id": 1, "email": "a@b.c"}
    assert (second.key, int(second.run_at.timestamp() * 1000)) == ("mail:x", clock.now_ms() + 5_000)
    assert await queue.enqueue_many([]) == []


async def test_enqueue_many_refuses_bad_options_naming_the_job_and_stores_nothing() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    batch = [NewJob(type="t"), NewJob(type="t", delay_ms=-1)]
    with pytest.raises(ValueError, match="delay_ms must be an int from 0") as caught:
        await queue.enqueue_many(batch)
    assert caught.value.__notes__ == ["in job 1 of the batch; nothing was enqueued"]
    assert sum((await driver.counts()).values()) == 0


def test_a_job_request_keeps_the_dataclass_semantics_its_own_init_must_not_lose() -> None:
    """``JobRequest.__init__`` is written out (see its docstring); it must set every field,
    keep the defaults and keyword-only arguments, and leave the request frozen."""
    import dataclasses
    import inspect

    import pytest

    from jobs.spi import JobRequest

    request = JobRequest(
        id="i", type="t", payload="{}", max_attempts=2, timeout_ms=5, key="k", delay_ms=7,
        run_at_ms=8, keep_until_ms=9, trace_context="tp", max_stalls=4, priority=-6,
        queue="q",
    )  # fmt: skip
    assert [getattr(request, f.name) for f in dataclasses.fields(JobRequest)] == [
        "i", "t", "{}", 2, 5, "k", 7, 8, 9, "tp", 4, -6, "q",
    ]  # fmt: skip
    plain = JobRequest(id="i", type="t", payload="{}", max_attempts=2)
    assert (plain.timeout_ms, plain.key, plain.delay_ms, plain.run_at_ms) == (None, None, 0, None)
    assert (plain.keep_until_ms, plain.trace_context) == (None, None)
    assert dataclasses.replace(plain, key="k") == JobRequest(
        id="i", type="t", payload="{}", max_attempts=2, key="k"
    )
    assert hash(plain) == hash(JobRequest(id="i", type="t", payload="{}", max_attempts=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.key = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        JobRequest("i", "t", "{}", 2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        JobRequest(id="i", type="t", payload="{}")  # type: ignore[call-arg]
    parameters = list(inspect.signature(JobRequest.__init__).parameters.values())[1:]
    assert [(p.name, p.kind, p.default) for p in parameters] == [
        (
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(JobRequest)
    ], "JobRequest.__init__ must take every field, in order, with its default"
