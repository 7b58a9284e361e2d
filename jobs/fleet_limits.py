"""Reading fleet-wide limits (issue 30, item 4) from where users write them: a handler's
``global_concurrency=``/``rate_limit=`` (``@job_handler``) and ``JobsSettings.queue_limits``
(``{"exports": {"global_concurrency": 2, "rate_limit": "10/s"}}``). The store enforces them in
its claim (``jobs.spi.limits``); these checks run at decoration and in the settings, so a bad
limit is refused before a worker starts, naming the handler or the queue."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import JobOptionError
from .options import check_concurrency, check_queue, parse_rate_limit
from .spi.limits import FleetLimit

__all__ = ["fleet_limit", "parse_queue_limits", "LIMIT_OPTIONS"]

LIMIT_OPTIONS = ("global_concurrency", "rate_limit")
"""What a queue's limits may say (``JobsSettings.queue_limits``)."""


def fleet_limit(
    global_concurrency: object = None, rate_limit: object = None, where: str = ""
) -> FleetLimit | None:
    """The ``FleetLimit`` of these options (None when neither is given), each checked:
    ``global_concurrency`` an int from 1 (``check_concurrency``), ``rate_limit`` ``"N/s"``,
    ``"N/m"`` or ``"N/h"`` (``parse_rate_limit``)."""
    if global_concurrency is None and rate_limit is None:
        return None
    concurrency = (
        None
        if global_concurrency is None
        else check_concurrency(global_concurrency, where, "global_concurrency")
    )
    rate = None if rate_limit is None else parse_rate_limit(rate_limit, where)
    return FleetLimit(
        concurrency=concurrency,
        rate=None if rate is None else rate.count,
        per_ms=1_000 if rate is None else rate.period_ms,
    )


def parse_queue_limits(value: object, where: str = "JobsSettings") -> dict[str, FleetLimit]:
    """``queue_limits``: queue name -> ``{"global_concurrency": N, "rate_limit": "N/s"}``
    (either or both), as a ``FleetLimit`` per queue."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise JobOptionError(
            f"queue_limits of {where} must map queue names to their limits, e.g. "
            f'{{"exports": {{"global_concurrency": 2}}}}, got {type(value).__name__}',
            option="queue_limits",
            value=value,
        )
    limits: dict[str, FleetLimit] = {}
    for name, options in value.items():
        queue = check_queue(name, where)
        here = f"{where}, queue {queue!r}"
        if not isinstance(options, Mapping) or not options:
            raise JobOptionError(
                f"queue_limits[{queue!r}] of {where} must be a mapping with "
                f"global_concurrency and/or rate_limit, got {options!r}",
                option="queue_limits",
                value=options,
            )
        unknown = sorted(str(key) for key in options if key not in LIMIT_OPTIONS)
        if unknown:
            raise JobOptionError(
                f"queue_limits[{queue!r}] of {where} has unknown option(s) "
                f"{', '.join(unknown)}: it takes global_concurrency and rate_limit",
                option="queue_limits",
                value=options,
            )
        limit = fleet_limit(options.get("global_concurrency"), options.get("rate_limit"), here)
        assert limit is not None
        limits[queue] = limit
    return limits
