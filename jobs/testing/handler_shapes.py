"""Every shape a handler can take, for the runner's conformance case and the unit tests.

Each shape is built around one body that records the payload's ``id`` in ``ran`` (with the
thread it ran in) once it really ran: a handler marked completed without its body running (a
coroutine made and thrown away) leaves ``ran`` empty. ``SHAPES`` maps a shape's name to its
factory, and ``ASYNC_SHAPES`` names those that registration should call on the event loop.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any

Ran = list[tuple[str, str]]
"""(payload id, name of the thread the body ran in), one per run."""


def _record(ran: Ran, payload: Any) -> None:
    ran.append((payload["id"], threading.current_thread().name))


def _async_body(ran: Ran) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def body(payload: Any) -> None:
        _record(ran, payload)

    return body


def _plain_decorator(function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any) -> Any:
        return function(*args)

    return wrapper


def _wraps_decorator(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any) -> Any:
        return function(*args)

    return wrapper


class _AsyncCallable:
    def __init__(self, ran: Ran) -> None:
        self.ran = ran

    async def __call__(self, payload: Any) -> None:
        _record(self.ran, payload)


class _Bean:
    """Handlers as bean methods, the way ``@job_handler`` finds them."""

    def __init__(self, ran: Ran) -> None:
        self.ran = ran

    async def method(self, payload: Any) -> None:
        _record(self.ran, payload)

    @_plain_decorator
    async def decorated(self, payload: Any) -> None:
        _record(self.ran, payload)

    async def with_context(self, payload: Any, ctx: Any) -> None:
        _record(self.ran, payload)


def _sync_function(ran: Ran) -> Callable[[Any], None]:
    def handler(payload: Any) -> None:
        _record(ran, payload)

    return handler


def _sync_returning_coroutine(ran: Ran) -> Callable[[Any], Any]:
    body = _async_body(ran)

    def handler(payload: Any) -> Any:
        return body(payload)

    return handler


def _async_returning_coroutine(ran: Ran) -> Callable[[Any], Any]:
    body = _async_body(ran)

    async def handler(payload: Any) -> Any:
        return body(payload)  # the await forgotten

    return handler


def _marked_callable(ran: Ran) -> Callable[[Any], Any]:
    """A sync callable returning a coroutine, marked as a coroutine function (3.12+)."""
    handler = _sync_returning_coroutine(ran)
    mark = getattr(inspect, "markcoroutinefunction", None)
    return mark(handler) if mark is not None else handler


SHAPES: dict[str, Callable[[Ran], Callable[..., Any]]] = {
    "async_function": _async_body,
    "sync_function": _sync_function,
    "async_callable_object": _AsyncCallable,
    "plain_decorator_around_async": lambda ran: _plain_decorator(_async_body(ran)),
    "wraps_decorator_around_async": lambda ran: _wraps_decorator(_async_body(ran)),
    "sync_returning_coroutine": _sync_returning_coroutine,
    "async_returning_coroutine": _async_returning_coroutine,
    "partial_of_async": lambda ran: functools.partial(_Bean(ran).with_context, ctx=None),
    "bound_async_method": lambda ran: _Bean(ran).method,
    "bound_method_plain_decorated": lambda ran: _Bean(ran).decorated,
    "partial_of_async_callable_object": lambda ran: functools.partial(_AsyncCallable(ran)),
    "marked_coroutine_function": _marked_callable,
}

ASYNC_SHAPES = frozenset(
    {
        "async_function",
        "async_callable_object",
        "async_returning_coroutine",
        "partial_of_async",
        "bound_async_method",
        "partial_of_async_callable_object",
        *(("marked_coroutine_function",) if hasattr(inspect, "markcoroutinefunction") else ()),
    }
)
"""Shapes whose call is a coroutine function's: run on the event loop, no thread."""
