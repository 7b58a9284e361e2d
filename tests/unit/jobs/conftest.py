from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from framework import ApplicationBuilder, ApplicationContext, configuration, entry
from jobs import JOB_DRIVER, JOBS_SETTINGS, JobDriver, JobsAutoConfiguration, JobsSettings

AppFactory = Callable[..., Awaitable[ApplicationContext]]


def app_configuration(
    beans: dict[str, object], settings: JobsSettings | None, driver: JobDriver | None
) -> type:
    """A @configuration class whose entries return the given objects."""
    namespace: dict[str, Any] = {}

    def add(name: str, value: object, token: Any = None) -> None:
        def factory(self: object, _value: object = value) -> object:
            return _value

        factory.__name__ = name
        factory.__qualname__ = f"TestApp.{name}"
        namespace[name] = entry(token)(factory)

    for name, bean in beans.items():
        add(name, bean)
    if settings is not None:
        add("jobs_settings", settings, JOBS_SETTINGS)
    if driver is not None:
        add("job_driver", driver, JOB_DRIVER)
    return configuration(type("TestApp", (), namespace))


@pytest.fixture
async def make_app() -> AsyncIterator[AppFactory]:
    """Boot JobsAutoConfiguration plus the given beans; every context is closed at teardown."""
    contexts: list[ApplicationContext] = []

    async def build(
        settings: JobsSettings | None = None, driver: JobDriver | None = None, **beans: object
    ) -> ApplicationContext:
        config = app_configuration(beans, settings, driver)
        context = await ApplicationBuilder([JobsAutoConfiguration, config]).run()
        contexts.append(context)
        return context

    yield build
    for context in contexts:
        await context.close()
