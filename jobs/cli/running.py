"""Running a command's coroutine on its target, and store failures as one line, exit 1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy import exc as sql_errors

from ..errors import DriverError, StoreSchemaError
from ..redaction import redact_text
from .errors import StoreError
from .target import Target, TargetSpec, describe_store, open_target

T = TypeVar("T")


def _redis_errors() -> tuple[type[BaseException], ...]:
    try:
        from redis import exceptions as redis_errors
    except ImportError:  # no redis extra: no Redis store to fail
        return ()
    return (redis_errors.RedisError,)


STORE_FAILURES: tuple[type[BaseException], ...] = (
    DriverError,
    OSError,
    TimeoutError,
    *_redis_errors(),
    sql_errors.DBAPIError,
)
"""What a store that is down, unreachable or refusing raises through the drivers."""


def describe_failure(exc: BaseException) -> str:
    """The cause of a store failure in one line (the innermost meaningful message, any URL
    in it redacted)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, sql_errors.DBAPIError) and exc.orig is not None:
        text = " ".join(str(exc.orig).split())
    return redact_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def run_on_target(
    spec: TargetSpec, work: Callable[[Target], Awaitable[T]], *, create: bool = True
) -> T:
    """Open the target, run ``work`` on it, close it; a store failure becomes a StoreError.

    ``create=False`` for a command that only reads: a ``--url`` store creates nothing (see
    ``open_target``), and one that is not there is named in one line.
    """

    async def main() -> T:
        target = await open_target(spec, create=create)
        try:
            return await work(target)
        except StoreSchemaError as exc:
            if create:
                raise StoreError(
                    f"store {describe_store(target.driver)} failed: {describe_failure(exc)}"
                ) from None
            store = describe_store(target.driver)
            raise StoreError(f"nothing to read in {store}: {exc}") from None
        except STORE_FAILURES as exc:
            raise StoreError(
                f"store {describe_store(target.driver)} failed: {describe_failure(exc)}"
            ) from None
        except NotImplementedError as exc:  # a driver without part of the operations SPI
            raise StoreError(f"{exc}: this command needs it") from None
        finally:
            await target.close()

    return asyncio.run(main())
