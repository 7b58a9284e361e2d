"""The worker's start-up wait: every store it will use answers before it says "worker ready".

A worker uses up to three stores: the job driver (the runner), the outbox store (the relay,
unless ``--no-relay``) and the scheduler's store (its queue's driver, unless
``--no-scheduler``; most often the job driver itself, asked once). Each is asked a cheap read
until it answers. A failure that waiting cannot cure (a database that does not exist, a
password or user the server refuses, a SQLite file that cannot be opened, tables that do not
fit) exits 1 at once, in one line naming the store, its role and the fix; anything else (a
server down or restarting, a timeout) is retried with backoff until ``--startup-timeout``,
then exits 1 naming the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from loguru import logger

from framework import ApplicationContext

from ..errors import StoreSchemaError
from ..health import store_name
from ..redaction import redact_text
from ..spi import JobDriver
from ..spi.outbox import OutboxOperations
from ..tokens import JOB_DRIVER, JOB_SCHEDULER, OUTBOX_STORE
from .errors import StoreError
from .running import STORE_FAILURES, describe_failure

RETRY_MAX_S = 2.0
_FAILURES: tuple[type[BaseException], ...] = (*STORE_FAILURES, StoreSchemaError)

_SQLITE_FIX = "the SQLite file cannot be opened: check its directory exists and is writable"
_PG_MISSING_DATABASE = {"3D000"}
_MISSING_DATABASE = re.compile(r'database "([^"]+)" does not exist')
_PG_REFUSED_LOGIN = "28"  # class 28: invalid authorization (bad password, unknown role)
_REDIS_REFUSED_LOGIN = ("WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "invalid username")


@dataclass(frozen=True, slots=True)
class StoreProbe:
    """One store the worker needs, the roles it plays, and a cheap read that asks it."""

    roles: tuple[str, ...]
    store: object
    ask: Callable[[], Awaitable[object]]

    @property
    def name(self) -> str:
        return store_name(self.store)

    @property
    def described(self) -> str:
        """``store <name> (job driver, scheduler's store)``."""
        return f"store {self.name} ({', '.join(self.roles)})"


def store_probes(
    context: ApplicationContext, *, relay: bool, scheduler: bool
) -> list[StoreProbe]:
    """The stores this worker will use: the job driver always, the outbox store when it runs
    the relay (and the store can be asked: ``OutboxOperations``), the scheduler's store when
    it runs the scheduler; one probe per store object, naming every role it plays."""
    driver: JobDriver = context.get_value(JOB_DRIVER)
    probes: list[tuple[list[str], object, Callable[[], Awaitable[object]]]] = [
        (["job driver"], driver, driver.counts)
    ]
    if scheduler and JOB_SCHEDULER.name in context:
        scheduler_driver = context.get_value(JOB_SCHEDULER).queue.driver
        _add(probes, "scheduler's store", scheduler_driver, scheduler_driver.counts)
    if relay and OUTBOX_STORE.name in context:
        outbox = context.get_value(OUTBOX_STORE)
        if isinstance(outbox, OutboxOperations):
            _add(probes, "outbox store", outbox, outbox.outbox_stats)
        else:
            logger.debug("outbox store {} cannot be asked at start-up", store_name(outbox))
    return [StoreProbe(tuple(roles), store, ask) for roles, store, ask in probes]


def _add(
    probes: list[tuple[list[str], object, Callable[[], Awaitable[object]]]],
    role: str,
    store: object,
    ask: Callable[[], Awaitable[object]],
) -> None:
    for roles, known, _ in probes:
        if known is store:
            roles.append(role)
            return
    probes.append(([role], store, ask))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's
        if isinstance(orig, BaseException) and id(orig) not in seen:
            yield from _chain(orig)
        current = current.__cause__ or current.__context__


def permanent_failure(
    exc: BaseException, *, sqlite: bool = False
) -> tuple[BaseException, str] | None:
    """The error in ``exc``'s chain that waiting cannot cure, and what to fix; None when
    ``exc`` may pass (a server down or restarting). ``sqlite``: the store is a SQLite file, so
    a missing directory or a refused permission is for good too (on a server's socket path it
    may be a server still starting)."""
    for error in _chain(exc):
        if sqlite and isinstance(error, FileNotFoundError | NotADirectoryError | PermissionError):
            return error, _SQLITE_FIX
        fix = _fix(error)
        if fix is not None:
            return error, fix
    return None


def _message(error: BaseException) -> str:
    """The driver's own words (``database "x" does not exist``), any URL in them redacted."""
    return redact_text(" ".join(str(error).split())) or type(error).__name__


def _fix(error: BaseException) -> str | None:
    sqlstate = str(getattr(error, "sqlstate", "") or "")
    text = str(error)
    if sqlstate in _PG_MISSING_DATABASE:
        missing = _MISSING_DATABASE.search(text)
        name = missing.group(1) if missing else "NAME"
        return f"create the database (createdb {name}) or fix the database name in the URL"
    if sqlstate.startswith(_PG_REFUSED_LOGIN):
        return "the server refused the login: fix the user or password in the URL"
    if type(error).__name__ == "AuthenticationError" or any(
        hint in text for hint in _REDIS_REFUSED_LOGIN
    ):
        return "Redis refused the login: fix the user or password in the URL"
    if "unable to open database file" in text:
        return _SQLITE_FIX
    if isinstance(error, StoreSchemaError):
        return "bring the tables up to date (see the message) or fix the table prefix"
    return None


async def wait_for_stores(
    probes: list[StoreProbe], timeout_s: float, stop_requested: asyncio.Event
) -> None:
    """Ask each store until it answers, within one deadline of ``timeout_s`` for all; a
    permanent failure or the deadline is a StoreError (one line, exit 1). Returns early when
    ``stop_requested`` is set."""
    deadline = time.monotonic() + timeout_s
    for probe in probes:
        await _wait_for(probe, deadline, timeout_s, stop_requested)
        if stop_requested.is_set():
            return


async def _wait_for(
    probe: StoreProbe, deadline: float, timeout_s: float, stop_requested: asyncio.Event
) -> None:
    failures = 0
    while True:
        remaining = deadline - time.monotonic()
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                await probe.ask()
            if failures:
                logger.info("{} answers after {} failure(s)", probe.described, failures)
            return
        except _FAILURES as exc:
            permanent = (
                None
                if isinstance(exc, TimeoutError)
                else permanent_failure(exc, sqlite="sqlite" in probe.name)
            )
            if permanent is not None:
                error, fix = permanent
                raise StoreError(
                    f"{probe.described} cannot be used: {_message(error)}; {fix}"
                ) from None
            cause = (
                f"no answer within {timeout_s:g} s"
                if isinstance(exc, TimeoutError)
                else describe_failure(exc)
            )
            failures += 1
            delay = min(RETRY_MAX_S, 0.1 * 2**failures)
            if time.monotonic() + delay >= deadline:
                raise StoreError(
                    f"store {probe.name} unreachable after {timeout_s:g} s "
                    f"({', '.join(probe.roles)}): {cause}"
                ) from None
            logger.warning("{} not answering ({}); retrying", probe.described, cause)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_requested.wait(), delay)
            if stop_requested.is_set():
                return
