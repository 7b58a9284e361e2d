"""What a driver or outbox store may use of the engine: one curated place, so a driver never
reaches into the engine's modules (and those modules may move without breaking drivers).

- options: the engine's checks of a job's options (``jobs.options``): ``check_delay_ms``,
  ``check_run_at``, ``check_max_attempts``, ``check_priority`` (an outbox store's ``append``),
  ``check_timeout_ms`` (its ``append_workflow``), and
  ``check_request``, a driver's second line of defence for a request that did not come
  through a queue;
- ``stalled_error_parts``: the text of ``stalled_error`` around its two numbers, for a store
  that builds the error in a statement or script;
- payloads: ``encode_payload`` (the queue's JSON checks; an outbox store's ``append`` runs
  them too), ``decode_payload``, ``check_name`` and the length limits of types and keys;
- job definitions: ``JobDefinition``, ``resolve_job`` (an ``append`` given a definition, or a
  type name that ``JobDefinitions`` knows) and ``UsesJobDefinitions`` (the registry's hand-over);
- time: ``Clock``/``ManualClock`` (a driver given a clock uses it in place of the store's),
  ``to_datetime``/``to_epoch_ms`` (epoch milliseconds <-> aware UTC datetimes);
- ``Retention``: how long finished jobs (and so their keys) are kept;
- ``Coalescer``: calls that arrive while one is in flight go to the store together, next;
- ``current_traceparent``: the W3C traceparent of the caller's span, for an outbox entry;
- ``new_action_id``: an audit entry's id (ties in one millisecond list in recording order);
- ``redact_url``: a URL as a message, a log line or a ``repr`` may show it (no password);
- the operations' argument checks and list cursors (``encode_cursor``/``decode_cursor``), so
  every driver pages the same way.
"""

from __future__ import annotations

from ..audit import new_action_id
from ..clock import Clock, ManualClock, to_datetime, to_epoch_ms
from ..coalescing import Coalescer
from ..definitions import JobDefinition, JobDefinitions, UsesJobDefinitions, resolve_job
from ..operations import (
    check_age,
    check_cursor,
    check_job_id,
    check_key,
    check_limit,
    check_purge_states,
    check_state,
    check_type,
    decode_cursor,
    encode_cursor,
)
from ..options import (
    DEFAULT_QUEUE,
    MAX_QUEUE_LENGTH,
    check_delay_ms,
    check_max_attempts,
    check_priority,
    check_queue,
    check_request,
    check_run_at,
    check_timeout_ms,
    check_workflow_jobs,
)
from ..payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH, check_name, decode_payload, encode_payload
from ..redaction import redact_url
from ..settings import Retention
from ..telemetry import current_traceparent
from .records import stalled_error as _stalled_error


def stalled_error_parts() -> tuple[str, str, str]:
    """``(head, middle, tail)`` with ``head + str(stalls) + middle + str(max_stalls) + tail ==
    stalled_error(stalls, max_stalls)``: a statement or script builds the text from its two
    numbers, and every store writes the same words."""
    marked = _stalled_error(-111, -222)
    head, _, rest = marked.partition("-111")
    middle, _, tail = rest.partition("-222")
    return head, middle, tail

__all__ = [
    # options
    "check_delay_ms",
    "check_run_at",
    "check_max_attempts",
    "check_priority",
    "check_queue",
    "DEFAULT_QUEUE",
    "MAX_QUEUE_LENGTH",
    "check_request",
    "check_workflow_jobs",
    "check_timeout_ms",
    # stalls
    "stalled_error_parts",
    # payloads and names
    "encode_payload",
    "decode_payload",
    "check_name",
    "MAX_TYPE_LENGTH",
    "MAX_KEY_LENGTH",
    "JobDefinition",
    "JobDefinitions",
    "UsesJobDefinitions",
    "resolve_job",
    # time
    "Clock",
    "ManualClock",
    "to_datetime",
    "to_epoch_ms",
    # keeping, batching, tracing
    "Retention",
    "new_action_id",
    "Coalescer",
    "current_traceparent",
    # messages
    "redact_url",
    # operations
    "encode_cursor",
    "decode_cursor",
    "check_age",
    "check_cursor",
    "check_job_id",
    "check_key",
    "check_limit",
    "check_purge_states",
    "check_state",
    "check_type",
]
