"""The functions: one fixed library built from files, loaded when missing, batched per loop tick."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from importlib.resources import files
from typing import Any

import hiredis
import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from jobs.testing import new_request
from redis_jobs import Keys, RedisJobDriver, RedisScriptError
from redis_jobs.library import LIBRARY, PER_CALL, Library, package_library
from redis_jobs.scripts import MAX_BATCH, SCRIPT_NAMES, ScriptRunner
from redis_jobs.topology import Topology

from .harness import RedisHarness

pytestmark = pytest.mark.redis

LEASE_MS = 30_000
HOSTILE = [
    "x'); DROP TABLE jobs;--",
    "]] redis.call('FLUSHALL') --[[",
    "return redis.call('DEL', KEYS[1])",
    "{tag}",
    "*",
    "a\nb",
    "\U0001f680",
]


def on_writes(monkeypatch: pytest.MonkeyPatch, seen: Callable[[Any, list[bytes]], None]) -> None:
    """Call ``seen(writer, chunks)`` for every write to a stream (the wire writes a connected
    connection's stream itself, redis-py's send writes its lines) while the test runs."""
    write, writelines = asyncio.StreamWriter.write, asyncio.StreamWriter.writelines

    def writing(self: asyncio.StreamWriter, data: Any) -> None:
        seen(self, [bytes(data)])
        write(self, data)

    def writing_lines(self: asyncio.StreamWriter, data: Any) -> None:
        chunks = [bytes(chunk) for chunk in data]
        seen(self, chunks)
        writelines(self, chunks)

    monkeypatch.setattr(asyncio.StreamWriter, "write", writing)
    monkeypatch.setattr(asyncio.StreamWriter, "writelines", writing_lines)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every command sent on a redis-py connection while the test runs, read back from RESP."""
    commands: list[tuple[Any, ...]] = []

    def recording(writer: Any, chunks: list[bytes]) -> None:
        reader = hiredis.Reader()
        for chunk in chunks:
            reader.feed(chunk)
        while (parsed := reader.gets()) is not False:
            commands.append(tuple(parsed))

    on_writes(monkeypatch, recording)
    return commands


def word(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def test_each_script_is_a_file_with_a_header_of_keys_and_argv() -> None:
    lua = files("redis_jobs") / "lua"
    assert sorted(LIBRARY.functions) == sorted(SCRIPT_NAMES)
    for name in SCRIPT_NAMES:
        text = (lua / f"{name}.lua").read_text(encoding="utf-8")
        header = text.split("\n\n", 1)[0]
        assert header.startswith(f"-- {name}.lua: ")
        assert "KEYS" in header
        assert "ARGV" in header
        setup, _, body = text.rpartition(PER_CALL)
        assert f"do\n{setup}\nredis.register_function" in LIBRARY.code
        assert f"begin(keys, args)\n{body}\nend" in LIBRARY.code


async def test_only_the_fixed_scripts_ever_run(
    harness: RedisHarness, sent: list[tuple[Any, ...]]
) -> None:
    driver = harness.redis_driver()
    for name in HOSTILE:
        payload = {"code": name, "lua": f"{name} redis.call('FLUSHALL')"}
        first = await driver.enqueue(new_request(name, payload, key=name, trace_context=name))
        second = await driver.enqueue(new_request(name, payload))
        assert first is not None
        assert second is not None
        for job in await driver.claim(2, LEASE_MS, [name]):
            assert await driver.heartbeat(job.id, job.lease_token, LEASE_MS)
            if job.id == first:
                assert await driver.retry(job.id, job.lease_token, delay_ms=0, error=name)
            else:
                assert await driver.fail(job.id, job.lease_token, error=name)
        [again] = await driver.claim(1, LEASE_MS, [name])
        assert await driver.complete(again.id, again.lease_token)
        info = await driver.get_job(first)
        assert info is not None
        assert (info.type, info.key, info.payload) == (name, name, payload)
        await driver.wait_for_work([name], 1)
    assert (await driver.counts())["completed"] == len(HOSTILE)

    names = {word(command[0]).upper() for command in sent}
    assert not names & {"EVAL", "EVALSHA", "SCRIPT"}
    assert "FCALL" in names
    for command in sent:
        if word(command[0]).upper() == "FCALL":
            assert word(command[1]) in LIBRARY.functions.values()
        if word(command[0]).upper() == "FUNCTION":
            assert word(command[-1]) == LIBRARY.code


async def test_a_scripts_definitions_before_per_call_are_made_once_per_load(
    admin: Redis,
) -> None:
    counter = f"local calls = 0\n{PER_CALL}calls = calls + 1\nreturn calls"
    library = Library.build(
        "local function begin(keys, args) end\n",
        {"first": counter, "second": counter},
        version=f"test{uuid.uuid4().hex[:12]}",
    )
    await admin.function_load(library.code)
    try:
        first, second = library.functions["first"], library.functions["second"]
        assert [await admin.fcall(first, 0) for _ in range(3)] == [1, 2, 3]
        assert await admin.fcall(second, 0) == 1  # each script's names are its own
    finally:
        await admin.function_delete(library.name)


async def test_a_missing_library_is_loaded_and_the_refused_calls_run(
    harness: RedisHarness, admin: Redis, sent: list[tuple[Any, ...]]
) -> None:
    # A library of its own (a version no other test uses) that the server does not have yet,
    # as after a restart without persistence, a FUNCTION FLUSH or on a node new to the slot.
    library = package_library(version=f"test{uuid.uuid4().hex[:12]}")
    client = harness.client()
    runner = ScriptRunner(Topology(client, Keys(harness.namespace)), library=library)
    missing = [f"{{{harness.namespace}}}:job:none", f"{{{harness.namespace}}}:leased:t"]
    try:
        assert await runner.per_job("heartbeat", ([], [""]), missing, ["none", "1:x:t", 1]) == 0
        loads = [c for c in sent if [word(part).upper() for part in c[:2]] == ["FUNCTION", "LOAD"]]
        assert len(loads) == 1

        await admin.function_delete(library.name)  # two batches in one tick: one load
        del sent[:]
        replies = await asyncio.gather(
            runner.per_job("heartbeat", ([], [""]), missing, ["none", "1:x:t", 1]),
            runner.per_job("heartbeat", ([], ["1"]), missing, ["none", "1:x:t", 1]),
        )
        assert list(replies) == [0, 0]
        loads = [c for c in sent if [word(part).upper() for part in c[:2]] == ["FUNCTION", "LOAD"]]
        assert len(loads) == 1
        fcalls = [c for c in sent if word(c[0]).upper() == "FCALL"]
        assert len(fcalls) == 4  # both refused, both run again
    finally:
        await runner.drain()
        await admin.function_delete(library.name)


async def test_another_version_of_the_library_does_not_clash(harness: RedisHarness) -> None:
    other = package_library(version=f"test{uuid.uuid4().hex[:12]}")
    admin = harness.client()
    try:
        await admin.function_load(other.code, replace=True)
        driver = harness.redis_driver()
        assert await driver.enqueue(new_request()) is not None
        libraries = {
            word(entry[1]) for entry in await admin.function_list(library="neverlost_jobs_*")
        }
        assert {other.name, LIBRARY.name} <= libraries
    finally:
        await admin.function_delete(other.name)


async def test_settles_of_one_tick_share_one_call_with_their_own_results(
    harness: RedisHarness, admin: Redis, sent: list[tuple[Any, ...]]
) -> None:
    driver: RedisJobDriver = harness.redis_driver()
    for _ in range(10):
        await driver.enqueue(new_request())
    jobs = await driver.claim(10, LEASE_MS, ["t"])
    broken = jobs[-1]
    await admin.hdel(driver.keys.job(broken.id), "max_attempts")
    tokens = [job.lease_token for job in jobs]
    tokens[0] = jobs[1].lease_token  # stale for job 0

    del sent[:]
    results = await asyncio.gather(
        *(driver.complete(job.id, token) for job, token in zip(jobs, tokens, strict=True)),
        return_exceptions=True,
    )
    assert sum(word(command[0]).upper() == "FCALL" for command in sent) == 1
    assert results[0] is False
    assert results[1:-1] == [True] * 8
    assert isinstance(results[-1], RedisScriptError)
    counts = await driver.counts()
    assert (counts["completed"], counts["active"]) == (8, 2)


async def test_concurrent_enqueues_share_one_call(
    harness: RedisHarness, sent: list[tuple[Any, ...]]
) -> None:
    driver = harness.redis_driver()
    del sent[:]
    results = await asyncio.gather(
        *(driver.enqueue(new_request(key=f"k{n % 5}")) for n in range(20))
    )
    assert sum(word(command[0]).upper() == "FCALL" for command in sent) == 1
    assert sum(result is not None for result in results) == 5
    assert (await driver.counts())["pending"] == 5


async def test_a_batch_is_one_script_call_per_max_batch_jobs_in_one_round_trip(
    harness: RedisHarness, sent: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = harness.redis_driver()
    events: list[str] = []
    carriers: set[int] = set()  # the stream of the script calls (not the policy check's)
    read = AbstractConnection.read_response

    def counted(writer: Any, chunks: list[bytes]) -> None:
        if any(b"FCALL" in chunk for chunk in chunks):
            carriers.add(id(writer))
            events.append("send")

    async def reading(self: AbstractConnection, *args: Any, **kw: Any) -> Any:
        if id(self._writer) in carriers:
            events.append("read")
        return await read(self, *args, **kw)

    on_writes(monkeypatch, counted)
    monkeypatch.setattr(AbstractConnection, "read_response", reading)
    requests = [new_request(key=f"k{n % 400}") for n in range(2 * MAX_BATCH + 50)]
    del sent[:]
    results = await driver.enqueue_many(requests)
    assert sum(word(command[0]).upper() == "FCALL" for command in sent) == 3
    # One round trip: each call is sent as soon as it is packed (Redis runs the first while the
    # next is packed), and no reply is read before the last is sent.
    assert events[:6] == ["send"] * 3 + ["read"] * 3
    assert results == [r.id if n < 400 else None for n, r in enumerate(requests)]
    assert (await driver.counts())["pending"] == 400


async def test_a_batch_makes_each_calls_arguments_after_the_call_before_is_sent(
    harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis runs a bulk enqueue's first call while the client makes the next one: a call's
    # keys and arguments are made when it is sent, not all before the first is.
    driver = harness.redis_driver()
    events: list[str] = []
    job_key = Keys.job

    def naming(self: Keys, job_id: str) -> str:
        events.append("job")
        return job_key(self, job_id)

    def counted(writer: Any, chunks: list[bytes]) -> None:
        if any(b"FCALL" in chunk for chunk in chunks):
            events.append("send")

    on_writes(monkeypatch, counted)
    monkeypatch.setattr(Keys, "job", naming)
    requests = [new_request() for _ in range(2 * MAX_BATCH + 50)]
    results = await driver.enqueue_many(requests)
    assert results == [request.id for request in requests]
    sends = [index for index, event in enumerate(events) if event == "send"]
    assert len(sends) == 3
    assert sends == [MAX_BATCH, 2 * MAX_BATCH + 1, 2 * MAX_BATCH + 50 + 2]


async def test_a_call_alone_in_its_tick_is_sent_without_waiting_a_loop_pass(
    harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call's lead waits one loop pass for the calls of its tick to join, unless nothing is
    # queued to run before its next step (one by one): then none can, and it sends at once.
    driver = harness.redis_driver()
    await driver.enqueue(new_request())  # warm: the memory-policy check is started
    policy = driver._policy_check
    if policy is not None:
        await policy
    passes: list[float] = []
    sleep = asyncio.sleep

    async def counted(delay: float, *args: Any) -> Any:
        passes.append(delay)
        return await sleep(delay, *args)

    monkeypatch.setattr(asyncio, "sleep", counted)
    request = new_request()
    assert await driver.enqueue(request) == request.id
    assert passes == []
    # Calls of one tick still join one call (see test_concurrent_enqueues_share_one_call).
    results = await asyncio.gather(*(driver.enqueue(new_request()) for _ in range(3)))
    assert None not in results
    assert passes == [0]
