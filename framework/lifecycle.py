"""The lifecycle protocol (after Spring's SmartLifecycle) and calls that may be sync or async."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Lifecycle(Protocol):
    """A bean the context starts at refresh and stops at close.

    Beans with ``auto_startup`` are started in ascending ``phase`` order once every bean exists;
    at close, running ones are stopped in descending order. ``start`` and ``stop`` may be plain or
    ``async`` methods.
    """

    @property
    def phase(self) -> int: ...

    @property
    def auto_startup(self) -> bool: ...

    @property
    def is_running(self) -> bool: ...

    def start(self) -> Any: ...

    def stop(self) -> Any: ...


async def call_maybe_async(method: Callable[[], Any]) -> None:
    """Call a lifecycle method, awaiting its result when it is a coroutine."""
    result = method()
    if inspect.isawaitable(result):
        await result


def closer_of(bean: object) -> Callable[[], Any] | None:
    """The bean's ``aclose``, ``close`` or ``dispose`` (SQLAlchemy engines), in that order."""
    if inspect.isclass(bean) or inspect.ismodule(bean):
        return None
    for attr in ("aclose", "close", "dispose"):
        method = getattr(bean, attr, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    return None
