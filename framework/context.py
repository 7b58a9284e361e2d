"""The running application: beans by name, lifecycle stop and close in order."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from loguru import logger

from .errors import BeanCloseError, BeanNotFoundError, ContextClosedError
from .lifecycle import Lifecycle, call_maybe_async, closer_of
from .tokens import Token, bean_name

if TYPE_CHECKING:
    from dependency_injector.containers import DynamicContainer

T = TypeVar("T")


class ApplicationContext:
    """Holds the beans of a refreshed application; made by ``ApplicationBuilder.run()``.

    Every bean is a singleton in a dependency-injector container. ``close()`` stops running
    lifecycle beans in descending phase, then closes every bean in reverse order of creation,
    except that a bean declared to close before others (``@entry(closes_before=...)``) does.
    """

    def __init__(self) -> None:
        self._container: DynamicContainer | None = None
        self._created: list[tuple[str, object]] = []
        self._closes_before: dict[str, set[str]] = {}
        self._closing = False
        self._closed = False

    def _attach(self, container: DynamicContainer) -> None:
        self._container = container

    def _close_first(self, closes_before: dict[str, set[str]]) -> None:
        self._closes_before = closes_before

    def _record_created(self, name: str, bean: object) -> None:
        self._created.append((name, bean))

    @overload
    def get_value(self, key: Token[T]) -> T: ...

    @overload
    def get_value(self, key: str) -> Any: ...

    def get_value(self, key: Token[Any] | str) -> Any:
        """The bean under a token or a plain name; BeanNotFoundError names the known beans."""
        if self._closed:
            raise ContextClosedError(f"the context is closed; cannot get {bean_name(key)!r}")
        name = bean_name(key)
        container = self._container
        provider = container.providers.get(name) if container is not None else None
        if provider is None:
            raise BeanNotFoundError(name, self.bean_names)
        return provider()

    def __contains__(self, key: Token[Any] | str) -> bool:
        container = self._container
        return container is not None and bean_name(key) in container.providers

    @property
    def bean_names(self) -> Sequence[str]:
        """Names of every bean, in order of creation."""
        return [name for name, _ in self._created]

    def beans(self) -> Sequence[tuple[str, object]]:
        """Every (name, bean) pair, in order of creation."""
        return list(self._created)

    def beans_of_type(self, cls: type[T]) -> list[T]:
        """Every bean that is an instance of ``cls``, in order of creation."""
        return [bean for _, bean in self._created if isinstance(bean, cls)]

    @property
    def is_closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Stop running lifecycle beans (descending phase), then close every bean once.

        Every bean is tried even when an earlier one fails; the failures are raised together
        as a BeanCloseError afterwards. Beans can still be looked up while others stop and
        drain; after close, ``get_value`` raises ContextClosedError. A second call does nothing.
        """
        if self._closing:
            return
        self._closing = True  # beans being stopped may still look up others until the end
        try:
            failures = await self._stop_running()
            failures += await self._close_beans()
        finally:
            self._closed = True
        if failures:
            raise BeanCloseError(failures)

    async def _stop_running(self) -> list[tuple[str, BaseException]]:
        running = [
            (name, bean)
            for name, bean in self._created
            if isinstance(bean, Lifecycle) and bean.is_running
        ]
        running.sort(key=lambda item: item[1].phase, reverse=True)
        failures: list[tuple[str, BaseException]] = []
        for name, bean in running:
            try:
                await call_maybe_async(bean.stop)
            except Exception as exc:
                logger.opt(exception=exc).error("stopping bean {} failed", name)
                failures.append((name, exc))
        return failures

    async def _close_beans(self) -> list[tuple[str, BaseException]]:
        failures: list[tuple[str, BaseException]] = []
        seen: set[int] = set()
        for name, bean in close_order(self._created, self._closes_before):
            if id(bean) in seen:
                continue
            seen.add(id(bean))
            closer = closer_of(bean)
            if closer is None:
                continue
            try:
                await call_maybe_async(closer)
            except Exception as exc:
                logger.opt(exception=exc).error("closing bean {} failed", name)
                failures.append((name, exc))
        return failures

    async def __aenter__(self) -> ApplicationContext:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def close_order(
    created: Sequence[tuple[str, object]], closes_before: dict[str, set[str]]
) -> list[tuple[str, object]]:
    """Reverse creation order, except that a bean goes before those it ``closes_before``: each
    step closes the most recently created bean that no bean still open must precede."""
    waiting = list(reversed(created))
    order: list[tuple[str, object]] = []
    while waiting:
        open_names = {name for name, _ in waiting}
        held = {
            other
            for name in open_names
            for other in closes_before.get(name, ())
        }
        index = next((i for i, (name, _) in enumerate(waiting) if name not in held), 0)
        order.append(waiting.pop(index))
    return order
