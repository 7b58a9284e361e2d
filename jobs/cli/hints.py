"""What a command says when its answer is empty because of the question: a ``--type`` that no
job has (did you mean ...?), or a ``--url redis://`` without ``--namespace`` whose default
namespace is empty while others hold jobs.

Both are asked only once the answer came back empty, so a normal listing pays nothing.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Iterable
from typing import Any

from ..drivers import factory_for
from ..tokens import JOB_HANDLER_REGISTRY
from .errors import CommandFailed
from .target import Target, TargetSpec

SUGGESTIONS = 3


async def settle_all(*awaitables: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather`` that leaves nothing running: every awaitable is awaited to its end,
    then the first error (if any) is raised.

    A plain ``gather`` returns at the first error while the others go on as orphan tasks;
    ``asyncio.run`` then cancels them as the command exits, one of them perhaps in the middle
    of a connect, whose failure nobody awaits ("Future exception was never retrieved" after
    the command's one-line error).
    """
    results = await asyncio.gather(*awaitables, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


async def known_types(target: Target) -> set[str]:
    """The job types the store holds, and those the APP has handlers for."""
    types = set(await target.queue.stats())
    if target.context is not None and JOB_HANDLER_REGISTRY.name in target.context:
        types.update(target.context.get_value(JOB_HANDLER_REGISTRY).types)
    return types


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"``, or ``""`` when nothing is close."""
    close = difflib.get_close_matches(name, sorted(choices), n=SUGGESTIONS, cutoff=0.7)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(choice) for choice in close) + "?"


async def check_type_known(target: Target, job_type: str | None) -> None:
    """CommandFailed, one line, when ``job_type`` is neither in the store nor handled by the
    APP: a typo would otherwise answer "no jobs"."""
    if job_type is None:
        return
    types = await known_types(target)
    if job_type in types:
        return
    where = "the store" if target.context is None else "the store or the APP's handlers"
    hint = did_you_mean(job_type, types)
    if not hint and types:
        shown = sorted(types)
        hint = "; types: " + ", ".join(shown[:10]) + (" ..." if len(shown) > 10 else "")
    raise CommandFailed(f"no job type {job_type!r} in {where}{hint}")


async def other_namespaces(spec: TargetSpec, target: Target) -> str | None:
    """For a ``--url`` given without ``--namespace``/``--table-prefix`` whose default store is
    empty: a line naming the prefixes that do hold a store there (None: none, or the driver
    cannot list them)."""
    if spec.url is None or spec.namespace or spec.table_prefix:
        return None
    factory = factory_for(spec.url)
    if factory.prefixes is None:
        return None
    current = getattr(target.driver, "namespace", None)
    found = [prefix for prefix in await factory.prefixes(spec.url) if prefix != current]
    if not found:
        return None
    shown = ", ".join(found[:20]) + (" ..." if len(found) > 20 else "")
    default = f" {current!r}" if isinstance(current, str) else ""
    return (
        f"nothing in the default namespace{default}; "
        f"namespaces holding jobs: {shown} (give --namespace)"
    )
