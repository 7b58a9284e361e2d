"""``@job_handler`` and the registry that finds handlers on every bean at refresh."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, overload

from pydantic import BaseModel

from .context import JobContext
from .definitions import JobDefinition, UsesJobDefinitions
from .errors import DuplicateHandlerError, JobTypeError
from .fleet_limits import fleet_limit
from .options import (
    check_concurrency,
    check_max_attempts,
    check_max_stalls,
    check_priority,
    check_queue,
    check_timeout_ms,
)
from .payload import MAX_TYPE_LENGTH, check_name
from .retry import Backoff
from .schedule import check_cron
from .spi.inbox import JobInbox, SyncJobInbox
from .spi.limits import FleetLimit

if TYPE_CHECKING:
    from framework import ApplicationContext

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)
S = TypeVar("S")
R = TypeVar("R")

_HANDLER_ATTR = "__job_handler__"


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerOptions:
    """What ``@job_handler`` records; None means "not set here"."""

    job_type: str
    definition: JobDefinition[Any] | None = None
    max_attempts: int | None = None
    timeout_ms: int | None = None
    backoff: Backoff | None = None
    cron: str | None = None
    timezone: str | None = None
    max_stalls: int | None = None
    inbox: JobInbox | None = None
    priority: int | None = None
    """The default priority of the type's jobs (a request's own ``priority`` wins)."""
    queue: str | None = None
    """The default queue of the type's jobs (a request's own ``queue`` wins); a runner given
    no queues serves it besides ``"default"``."""
    concurrency: int | None = None
    """At most this many attempts of the type at once in one runner (None: no limit of its
    own; the runner's ``concurrency`` bounds every type together)."""
    fleet_limit: FleetLimit | None = None
    """``global_concurrency`` and ``rate_limit``: the type's limits across every worker,
    enforced by the store in its claim (None: none)."""


class _TypedHandlerDecorator(Protocol[M]):
    """``@job_handler(definition)``: the payload parameter of the method (or plain function, as
    a ``jobs.Worker`` takes them) must accept the model."""

    @overload
    def __call__(self, method: Callable[[S, M], R]) -> Callable[[S, M], R]: ...

    @overload
    def __call__(
        self, method: Callable[[S, M, JobContext], R]
    ) -> Callable[[S, M, JobContext], R]: ...

    @overload
    def __call__(self, method: Callable[[M], R]) -> Callable[[M], R]: ...

    @overload
    def __call__(self, method: Callable[[M, JobContext], R]) -> Callable[[M, JobContext], R]: ...


@overload
def job_handler(
    type_or_definition: JobDefinition[M],
    *,
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    backoff: Backoff | None = None,
    cron: str | None = None,
    timezone: str | None = None,
    max_stalls: int | None = None,
    inbox: JobInbox | None = None,
    priority: int | None = None,
    concurrency: int | None = None,
    queue: str | None = None,
    global_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> _TypedHandlerDecorator[M]: ...


@overload
def job_handler(
    type_or_definition: str,
    *,
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    backoff: Backoff | None = None,
    cron: str | None = None,
    timezone: str | None = None,
    max_stalls: int | None = None,
    inbox: JobInbox | None = None,
    priority: int | None = None,
    concurrency: int | None = None,
    queue: str | None = None,
    global_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> Callable[[F], F]: ...


def job_handler(
    type_or_definition: str | JobDefinition[Any],
    *,
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    backoff: Backoff | None = None,
    cron: str | None = None,
    timezone: str | None = None,
    max_stalls: int | None = None,
    inbox: JobInbox | None = None,
    priority: int | None = None,
    concurrency: int | None = None,
    queue: str | None = None,
    global_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> Callable[[F], F] | _TypedHandlerDecorator[Any]:
    """Mark a bean method as the handler of a job type.

    The method takes ``(payload)`` or ``(payload, ctx: JobContext)``; it may be ``async`` or
    plain (plain ones run in a worker thread). Options here override what a request or the
    job's definition asked for. With ``cron``, the scheduler also queues the job on that
    schedule (``timezone`` defaults to UTC). With a job definition the payload is the
    validated model, and a type checker refuses a method whose payload parameter cannot
    take it. ``max_stalls``: how many times the job's lease may expire without a settle (a
    crashed or killed worker) before it fails for good (default ``JobsSettings.max_stalls``).
    A number of the wrong type or out of its range (``jobs.options``) is a JobOptionError
    here, at decoration. ``inbox`` (e.g. ``orm_sqlalchemy.SQLAlchemyInbox``) runs the whole
    handler in ``inbox.once(ctx)`` (a ``def`` handler: ``inbox.once_sync(ctx)``, in its
    thread): its database writes commit once per job, with the inbox's record, and a re-run of
    a job whose effects committed skips the handler and completes the job (docs: "Effects
    exactly once").
    ``priority`` is the default priority of the type's jobs (``MIN_PRIORITY`` to
    ``MAX_PRIORITY``, higher claimed first); an ``enqueue(..., priority=)`` wins over it.
    ``concurrency``: at most that many attempts of the type at once in one runner, the
    runner's other slots left to other types (a runner claims no more of the type than it
    has room for, and hands back at no cost any a claim brought beyond it).
    ``queue``: the named queue the type's jobs wait in unless an ``enqueue(..., queue=)`` names
    another (``check_queue``); only runners serving it claim them (a runner given no
    ``queues`` serves ``"default"`` and every queue its handlers name).
    ``global_concurrency`` and ``rate_limit`` (``"10/s"``, ``"600/m"``, ``"5000/h"``) limit the
    type across the whole fleet: at most that many of its jobs held at once by all workers
    together, at most that many claims in any window. The store enforces them in its claim
    (``jobs.spi.limits``); a job a limit holds back waits, pending, at no cost.
    """
    options = _options(
        type_or_definition,
        max_attempts,
        timeout_ms,
        backoff,
        cron,
        timezone,
        max_stalls,
        inbox,
        priority,
        concurrency,
        queue,
        global_concurrency,
        rate_limit,
    )

    def decorate(method: F) -> F:
        if not callable(method):
            raise TypeError(f"@job_handler({options.job_type!r}) decorates a function")
        setattr(method, _HANDLER_ATTR, options)
        return method

    return decorate


def _checked_inbox(inbox: object, job_type: str) -> JobInbox:
    if not callable(getattr(inbox, "once", None)):
        raise TypeError(
            f"handler {job_type!r}: inbox= takes an inbox (with a once(ctx) method, such as "
            f"orm_sqlalchemy.SQLAlchemyInbox), got {inbox!r}"
        )
    return cast(JobInbox, inbox)


def _options(
    type_or_definition: str | JobDefinition[Any],
    max_attempts: int | None,
    timeout_ms: int | None,
    backoff: Backoff | None,
    cron: str | None,
    timezone: str | None,
    max_stalls: int | None,
    inbox: JobInbox | None = None,
    priority: int | None = None,
    concurrency: int | None = None,
    queue: str | None = None,
    global_concurrency: object = None,
    rate_limit: object = None,
) -> HandlerOptions:
    if isinstance(type_or_definition, JobDefinition):
        definition: JobDefinition[Any] | None = type_or_definition
        job_type = type_or_definition.type
    else:
        definition, job_type = None, type_or_definition
    check_name("job type", job_type, MAX_TYPE_LENGTH)
    where = f"handler {job_type!r}"
    if max_attempts is not None:
        max_attempts = check_max_attempts(max_attempts, where)
    if timeout_ms is not None:
        timeout_ms = check_timeout_ms(timeout_ms, where)
    if max_stalls is not None:
        max_stalls = check_max_stalls(max_stalls, where)
    if priority is not None:
        priority = check_priority(priority, where)
    if concurrency is not None:
        concurrency = check_concurrency(concurrency, where)
    if queue is not None:
        queue = check_queue(queue, where)
    fleet = fleet_limit(global_concurrency, rate_limit, where)
    if timezone is not None and cron is None:
        raise ValueError(f"handler {job_type!r} has a timezone but no cron schedule")
    if cron is not None:
        check_cron(cron, timezone, job_type)  # ScheduleError naming the job type
    if definition is not None:
        max_attempts = max_attempts if max_attempts is not None else definition.max_attempts
        timeout_ms = timeout_ms if timeout_ms is not None else definition.timeout_ms
        max_stalls = max_stalls if max_stalls is not None else definition.max_stalls
        priority = priority if priority is not None else definition.priority
        queue = queue if queue is not None else definition.queue
    return HandlerOptions(
        job_type=job_type,
        definition=definition,
        max_attempts=max_attempts,
        timeout_ms=timeout_ms,
        backoff=backoff,
        cron=cron,
        timezone=timezone,
        max_stalls=max_stalls,
        inbox=None if inbox is None else _checked_inbox(inbox, job_type),
        priority=priority,
        concurrency=concurrency,
        queue=queue,
        fleet_limit=fleet,
    )


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    """A handler bound to its bean, with how to call it worked out once."""

    options: HandlerOptions
    function: Callable[..., Any]
    source: str
    is_async: bool
    takes_context: bool
    hinted: set[str] = field(default_factory=set, compare=False, repr=False)
    """Hints already logged about this handler (each is logged once)."""

    @property
    def job_type(self) -> str:
        return self.options.job_type


def _limits_of(handlers: dict[str, RegisteredHandler]) -> dict[str, int]:
    return {
        job_type: handler.options.concurrency
        for job_type, handler in handlers.items()
        if handler.options.concurrency is not None
    }


def handler_options(function: object) -> HandlerOptions | None:
    options = getattr(function, _HANDLER_ATTR, None)
    return options if isinstance(options, HandlerOptions) else None


class JobHandlerRegistry:
    """Job type -> handler. Lifecycle phase 0: scans every bean of the context when started.

    A type with two handlers fails ``run()`` naming the type and both handlers. Handlers that
    are not beans can be added with ``register()``.
    """

    phase = 0
    auto_startup = True

    def __init__(self, context: ApplicationContext | None = None) -> None:
        self._context = context
        self._handlers: dict[str, RegisteredHandler] = {}
        self._types: frozenset[str] = frozenset()
        self._limits: dict[str, int] = {}
        self._running = False

    @property
    def is_running(self) -> bool:
        return self._running

    def start(self) -> None:
        if self._running:
            return
        if self._context is not None:
            beans = [(name, bean) for name, bean in self._context.beans() if bean is not self]
            for name, bean in beans:
                self._scan(name, bean)
            for _, bean in beans:  # an outbox store: appends by type name typed too
                if isinstance(bean, UsesJobDefinitions) and not isinstance(bean, type):
                    bean.use_definitions(self)
        self._running = True

    def stop(self) -> None:
        self._running = False

    def register(
        self,
        type_or_definition: str | JobDefinition[Any],
        function: Callable[..., Any],
        *,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        backoff: Backoff | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        max_stalls: int | None = None,
        inbox: JobInbox | None = None,
        priority: int | None = None,
        concurrency: int | None = None,
        queue: str | None = None,
        global_concurrency: int | None = None,
        rate_limit: str | None = None,
    ) -> RegisteredHandler:
        """Register a plain function (or bound method) as the handler of a job type."""
        options = _options(
            type_or_definition,
            max_attempts,
            timeout_ms,
            backoff,
            cron,
            timezone,
            max_stalls,
            inbox,
            priority,
            concurrency,
            queue,
            global_concurrency,
            rate_limit,
        )
        return self._add(options, function, getattr(function, "__qualname__", repr(function)))

    def add(self, function: Callable[..., Any]) -> RegisteredHandler:
        """Register a function decorated with ``@job_handler(...)``, with its options."""
        options = handler_options(function)
        if options is None:
            raise TypeError(f"{function!r} is not decorated with @job_handler(...)")
        return self._add(options, function, getattr(function, "__qualname__", repr(function)))

    def scan(self, bean: object, *, name: str) -> None:
        """Register the ``@job_handler`` methods of ``bean`` (as ``start`` does for beans),
        named ``name.method`` in errors."""
        self._scan(name, bean)

    def get(self, job_type: str) -> RegisteredHandler | None:
        return self._handlers.get(job_type)

    def definition_of(self, job_type: str) -> JobDefinition[Any] | None:
        """The definition of the handler of ``job_type`` (``JobDefinitions``): what a job of
        that type enqueued or appended by name is validated against. None without a handler
        or for a handler of a plain payload."""
        handler = self._handlers.get(job_type)
        return handler.options.definition if handler is not None else None

    @property
    def types(self) -> frozenset[str]:
        """Job types with a handler: what a runner claims."""
        return self._types

    @property
    def queues(self) -> tuple[str, ...]:
        """The queues the handlers name (``queue=`` of a handler or its definition), by name:
        what a runner given no ``queues`` serves besides ``"default"``."""
        named = {h.options.queue for h in self._handlers.values() if h.options.queue}
        return tuple(sorted(named))

    @property
    def fleet_limits(self) -> dict[str, FleetLimit]:
        """Job type -> its handler's fleet-wide limits (``global_concurrency``, ``rate_limit``),
        for the types that have them: what a runner passes to its claims."""
        return {
            job_type: handler.options.fleet_limit
            for job_type, handler in self._handlers.items()
            if handler.options.fleet_limit is not None
        }

    @property
    def limits(self) -> dict[str, int]:
        """Job type -> its handler's ``concurrency``, for the types that have one (a runner
        runs no more attempts of such a type at once)."""
        return self._limits

    def handlers(self) -> Iterable[RegisteredHandler]:
        return list(self._handlers.values())

    def only(self, types: Iterable[str]) -> JobHandlerRegistry:
        """A registry of the handlers of ``types`` alone (a worker serving part of the types).

        Raises JobTypeError naming any type without a handler here, and the known ones.
        """
        wanted = list(dict.fromkeys(types))
        unknown = [job_type for job_type in wanted if job_type not in self._handlers]
        if unknown:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise JobTypeError(
                f"no handler for job type(s) {', '.join(unknown)}; the handled types are {known}"
            )
        subset = JobHandlerRegistry()
        subset._handlers = {job_type: self._handlers[job_type] for job_type in wanted}
        subset._types = frozenset(subset._handlers)
        subset._limits = _limits_of(subset._handlers)
        subset._running = True
        return subset

    def _scan(self, bean_name: str, bean: object) -> None:
        if inspect.isclass(bean) or inspect.ismodule(bean):
            return
        seen: set[str] = set()
        for cls in type(bean).__mro__:
            for attr, value in vars(cls).items():
                if attr in seen:
                    continue
                seen.add(attr)
                options = handler_options(value)
                if options is not None:
                    self._add(options, getattr(bean, attr), f"{bean_name}.{attr}")

    def _add(
        self, options: HandlerOptions, function: Callable[..., Any], source: str
    ) -> RegisteredHandler:
        existing = self._handlers.get(options.job_type)
        if existing is not None:
            raise DuplicateHandlerError(options.job_type, existing.source, source)
        is_async = calls_coroutine_function(function)
        if (
            options.inbox is not None
            and not is_async
            and not isinstance(options.inbox, SyncJobInbox)
        ):
            raise TypeError(
                f"the handler of {options.job_type!r} ({source}) is a def and its inbox "
                f"{options.inbox!r} has no once_sync(ctx): make the handler an async def, or "
                "give it an inbox for sync code (orm_sqlalchemy.SQLAlchemyInbox)"
            )
        handler = RegisteredHandler(
            options=options,
            function=function,
            source=source,
            is_async=is_async,
            takes_context=_takes_context(function, options.job_type),
        )
        self._handlers[options.job_type] = handler
        self._types = frozenset(self._handlers)
        self._limits = _limits_of(self._handlers)
        return handler


def calls_coroutine_function(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` runs a coroutine function, so the call itself only makes a
    coroutine and the handler runs on the event loop: an ``async def`` function or bound
    method, a ``functools.partial`` of one, a callable object whose ``__call__`` is one, or
    anything ``inspect.markcoroutinefunction`` marked (Python 3.12+).

    Anything else runs in a worker thread; if its call returns an awaitable after all (a plain
    decorator around an ``async def``, a ``def`` returning a coroutine), the runner awaits it
    on the event loop (``execution``), so every shape runs its body.
    """
    for _ in range(32):  # partials of bound methods of callables...: a bounded walk
        if inspect.iscoroutinefunction(function):
            return True
        if isinstance(function, functools.partial):
            function = function.func
        elif inspect.ismethod(function):
            function = function.__func__
        elif inspect.isroutine(function) or inspect.isclass(function):
            return False
        elif callable(function):
            function = type(function).__call__
        else:
            return False
    return False


def _takes_context(function: Callable[..., Any], job_type: str) -> bool:
    """Whether the handler takes ``(payload, ctx)`` rather than ``(payload)``.

    A wrapper that takes ``*args`` (a plain decorator without ``functools.wraps``, whose
    signature hides the wrapped one) is given the payload alone.
    """
    parameters = inspect.signature(function).parameters.values()
    params = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < 2 and any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return False
    if len(params) not in (1, 2):
        raise TypeError(
            f"handler of {job_type!r} must take (payload) or (payload, ctx), "
            f"got {len(params)} positional parameters"
        )
    return len(params) == 2
