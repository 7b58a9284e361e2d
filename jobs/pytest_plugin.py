"""The pytest plugin of neverlost (entry point ``pytest11``): fixtures for application tests.

* ``jobs_configurations``: the application's ``@configuration`` classes; override it in your
  ``conftest.py`` (empty by default: only the jobs plugin's beans).
* ``jobs_clock``: a ``ManualClock`` at the current time; override it to start elsewhere
  (``ManualClock(datetime(2026, 10, 16, 2, 59, tzinfo=UTC))``).
* ``jobs_context``: a started context of those configurations for a test
  (``jobs.testing.builder_for_tests``: the in-process driver on ``jobs_clock``, nothing running
  until ``run_jobs``), closed after the test.
* ``jobs_queue``: that context's JobQueue.

Async fixtures need pytest-asyncio: without it the plugin still loads (an application's other
tests run), and ``jobs_context`` fails saying what to install. The plugin defines fixtures only
(no hooks, no options) and lives outside ``jobs.testing`` so that loading it imports nothing
but pytest and the ``jobs`` package (which a neverlost application's tests import anyway);
``jobs.testing``, with the conformance suite, is imported by the fixtures that use it.
``pytest -p no:neverlost`` turns it off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

_async_fixture: Any
try:
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # jobs_context says what to install when a test asks for it
    _async_fixture = None

if TYPE_CHECKING:
    from framework import ApplicationContext
    from jobs import JobQueue, ManualClock


@pytest.fixture
def jobs_configurations() -> list[type]:
    """The application's @configuration classes (override in conftest.py)."""
    return []


@pytest.fixture
def jobs_clock() -> ManualClock:
    """The clock of ``jobs_context``: moves only when the test says (``advance``, ``set``)."""
    from jobs import ManualClock

    return ManualClock()


async def _jobs_context(
    jobs_configurations: list[type], jobs_clock: ManualClock
) -> AsyncIterator[ApplicationContext]:
    """A started testing context of ``jobs_configurations`` on ``jobs_clock``."""
    from jobs.testing.app_context import builder_for_tests

    async with await builder_for_tests(jobs_configurations, clock=jobs_clock).run() as context:
        yield context


def _needs_pytest_asyncio() -> NoReturn:
    pytest.fail("jobs_context is async: it needs pytest-asyncio (pip install pytest-asyncio)")


jobs_context: Any = (
    _async_fixture(_jobs_context, name="jobs_context")
    if _async_fixture is not None
    else pytest.fixture(_needs_pytest_asyncio, name="jobs_context")
)


@pytest.fixture
def jobs_queue(jobs_context: ApplicationContext) -> JobQueue:
    """The JobQueue of ``jobs_context``."""
    from jobs import JOB_QUEUE

    return jobs_context.get_value(JOB_QUEUE)
