"""Transactions bound to the async context: ``@transactional``, ``tm.session``, after-commit hooks.

The open transaction lives in one module-private ContextVar, set with a token when a
transaction opens and reset in ``finally``. Everything running in the same async context sees
it and joins it; a task created elsewhere (another request, a worker) does not.

Rules, in the order a user meets them:

* **Nesting joins.** ``tm.transaction()`` or a ``@transactional`` call inside an open
  transaction of the same manager joins it: same session, one commit, at the outermost exit.
  Managers of different engines nest independently.
* **An exception rolls back, the whole transaction.** When a nested (joined) block raises, the
  outer transaction is rolled back at once, there being no partial commit of one transaction.
  If the outer code catches that exception and carries on, ``tm.session`` raises
  ``NoTransactionError`` and the outermost exit raises ``TransactionRolledBackError`` instead of
  pretending to commit.
* **Tasks.** ``asyncio.create_task`` copies the context, so a task created *inside* a
  transaction joins it while that transaction is open. An AsyncSession is not safe for
  concurrent use: await such tasks before the transaction ends, and do not use the session from
  two tasks at once. Once the owning transaction has ended, ``tm.session``,
  ``current_session()`` and ``after_commit`` raise ``NoTransactionError`` in that task, a new
  ``tm.transaction()`` there opens a fresh, independent one, and the ended session object itself
  refuses further use (it is closed with ``close_resets_only=False``).
* **After commit.** ``tm.after_commit(callback)`` runs the callback (sync or async) after the
  outermost commit succeeded, outside the transaction, in registration order; never after a
  rollback. A failing callback is logged and the rest still run: the commit already happened.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from loguru import logger
from sqlalchemy import URL
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from ._database.errors import check_engine
from ._database.sqlite_writes import close_turn_slot, open_turn_slot, writer_gate
from .engine import configure_sqlite, create_engine
from .errors import NoTransactionError, SQLAlchemyJobsError

__all__ = [
    "AfterCommitCallback",
    "SQLAlchemyTransactionManager",
    "TransactionRolledBackError",
    "current_session",
    "transactional",
]

P = ParamSpec("P")
R = TypeVar("R")

AfterCommitCallback = Callable[[], None] | Callable[[], Awaitable[None]]


class TransactionRolledBackError(SQLAlchemyJobsError):
    """The transaction was rolled back by a failure in a nested block the caller caught."""


class _State(enum.Enum):
    ACTIVE = "active"
    ROLLED_BACK = "rolled back"
    ENDED = "ended"


@dataclass(eq=False)
class _Frame:
    """One open (outermost) transaction; ``parent`` is the frame it was opened inside of."""

    manager: SQLAlchemyTransactionManager
    session: AsyncSession
    parent: _Frame | None
    state: _State = _State.ACTIVE
    callbacks: list[AfterCommitCallback] = field(default_factory=list)


_current: ContextVar[_Frame | None] = ContextVar("orm_sqlalchemy_transaction", default=None)


def _open_frame(manager: SQLAlchemyTransactionManager | None) -> _Frame | None:
    """The innermost frame of ``manager`` (any manager when None) whose owner has not exited.

    Frames of ended transactions are skipped: a task that outlived the transaction it was
    created in is outside any transaction.
    """
    frame = _current.get()
    while frame is not None:
        if frame.state is not _State.ENDED and (manager is None or frame.manager is manager):
            return frame
        frame = frame.parent
    return None


def _require_frame(manager: SQLAlchemyTransactionManager | None) -> _Frame:
    frame = _open_frame(manager)
    if frame is None:
        raise NoTransactionError(
            "no transaction is open in this context: use @transactional() or "
            "'async with tm.transaction()'"
        )
    if frame.state is _State.ROLLED_BACK:
        raise NoTransactionError(
            "the transaction in this context was rolled back by an exception in a nested "
            "transactional block; let the exception propagate"
        )
    return frame


def current_session() -> AsyncSession:
    """The session of the innermost open transaction in this context (any manager)."""
    return _require_frame(None).session


class SQLAlchemyTransactionManager:
    """Opens transactions on ``engine`` and binds their session to the async context.

    A SQLite engine is given ``configure_sqlite`` (WAL, busy timeout, ``BEGIN IMMEDIATE``):
    any transaction here may write, and a deferred one that upgrades fails at once. So the
    outermost transactions of a SQLite manager take the engine's writer gate at their BEGIN
    (the first statement), one at a time in arrival order, and give it back at commit or
    rollback, before the after-commit callbacks (``_database.sqlite_writes``).
    """

    def __init__(self, engine: AsyncEngine, *, expire_on_commit: bool = False) -> None:
        configure_sqlite(engine)
        self._engine = engine
        self._gate = writer_gate(engine)
        self._sessions = async_sessionmaker(
            engine, expire_on_commit=expire_on_commit, close_resets_only=False
        )

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def session(self) -> AsyncSession:
        """The open session of this manager in this context; ``NoTransactionError`` if none."""
        return _require_frame(self).session

    @property
    def in_transaction(self) -> bool:
        frame = _open_frame(self)
        return frame is not None and frame.state is _State.ACTIVE

    def after_commit(self, callback: AfterCommitCallback) -> None:
        """Run ``callback`` after the outermost commit of the open transaction succeeds."""
        _require_frame(self).callbacks.append(callback)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """Open a transaction, or join the one open in this context; yields its session."""
        if _open_frame(self) is not None:
            frame = _require_frame(self)
            async with self._joined(frame):
                yield frame.session
            return
        slot, slot_token = (None, None) if self._gate is None else open_turn_slot()
        try:
            async with self._sessions() as session:
                frame = _Frame(self, session, _current.get())
                token = _current.set(frame)
                try:
                    try:
                        yield session
                    except BaseException:
                        await self._rollback(frame)
                        raise
                    await self._commit(frame)
                finally:
                    frame.state = _State.ENDED
                    _current.reset(token)
                    if slot is not None:
                        slot.release()
        finally:
            if slot is not None and slot_token is not None:
                slot.release()
                close_turn_slot(slot_token)
        if frame.callbacks:
            await self._run_callbacks(frame.callbacks)

    @asynccontextmanager
    async def _joined(self, frame: _Frame) -> AsyncIterator[None]:
        try:
            yield
        except BaseException:
            if frame.state is _State.ACTIVE:
                await self._rollback(frame)
            raise

    async def _commit(self, frame: _Frame) -> None:
        if frame.state is not _State.ACTIVE:
            raise TransactionRolledBackError(
                "the transaction was rolled back by an exception in a nested transactional "
                "block, which the caller caught; nothing was committed"
            )
        try:
            await frame.session.commit()
        except BaseException:
            await self._rollback(frame)
            raise

    @staticmethod
    async def _rollback(frame: _Frame) -> None:
        """Roll back, keeping the caller's exception: a failed rollback is only logged."""
        frame.state = _State.ROLLED_BACK
        try:
            await frame.session.rollback()
        except Exception:
            logger.opt(exception=True).warning("rollback failed; the connection is discarded")

    @staticmethod
    async def _run_callbacks(callbacks: list[AfterCommitCallback]) -> None:
        for callback in callbacks:
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.opt(exception=True).error(
                    "after-commit callback {callback!r} failed; the commit stands",
                    callback=callback,
                )


def transactional(
    manager: SQLAlchemyTransactionManager | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Run the decorated coroutine function in a transaction (joining an open one).

    ``@transactional(tm)`` names the manager; bare ``@transactional()`` on a method uses
    ``self.transaction_manager``.
    """
    if manager is not None and not isinstance(manager, SQLAlchemyTransactionManager):
        raise TypeError(
            "transactional takes a SQLAlchemyTransactionManager or nothing: "
            "write @transactional() or @transactional(tm)"
        )

    def decorate(func: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        if not inspect.iscoroutinefunction(func):
            raise TypeError(f"@transactional needs an async def function, got {func!r}")

        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            tm = manager if manager is not None else _manager_of(func, args)
            async with tm.transaction():
                return await func(*args, **kwargs)

        return wrapper

    return decorate


def _manager_of(func: Callable[..., Any], args: tuple[Any, ...]) -> SQLAlchemyTransactionManager:
    tm = getattr(args[0], "transaction_manager", None) if args else None
    if not isinstance(tm, SQLAlchemyTransactionManager):
        raise TypeError(
            f"@transactional() on {func.__qualname__} needs self.transaction_manager "
            "(a SQLAlchemyTransactionManager); or name one: @transactional(tm)"
        )
    return tm


def transaction_manager_of(
    given: SQLAlchemyTransactionManager | AsyncEngine | str | URL, *, store: str
) -> tuple[SQLAlchemyTransactionManager, AsyncEngine | None]:
    """The transaction manager a store (``store`` names it in errors) takes as a manager, an
    engine or a URL, and the engine it made from a URL (the store disposes of it), else None."""
    if isinstance(given, SQLAlchemyTransactionManager):
        return given, None
    if isinstance(given, AsyncEngine):
        check_engine(given, store=store)
        return SQLAlchemyTransactionManager(given), None
    if isinstance(given, str | URL):
        engine = create_engine(given)
        return SQLAlchemyTransactionManager(engine), engine
    raise TypeError(
        f"{store} takes a SQLAlchemyTransactionManager, an AsyncEngine or a database URL, "
        f"got {type(given).__name__}"
    )
