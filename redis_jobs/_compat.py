"""Every read of a private attribute of another library (redis-py, asyncio) in ``redis_jobs``.

Both are there for speed, measured with callgrind on the enqueue-to-handler path; both fall
back to the public way when the attribute is absent, so only the saving is lost.
``tests/unit/redis/test_compat.py`` fails loudly when one disappears upstream.

- ``stream_writer``: a redis-py connection's ``asyncio.StreamWriter`` (``connection._writer``).
  On Python 3.11 ``send_packed_command`` with a socket timeout runs the send in a task of its
  own (``asyncio.wait_for``): 2.5 event-loop callbacks and ~65k instructions a round trip.
  ``wire.send`` writes to the writer directly there, bounded as redis-py bounds it.
- ``ready_queue_empty``: whether asyncio's ready queue (``loop._ready``) is empty, so no call
  can join a per-tick batch and waiting the pass would be spent for nothing (~20k of ~340k
  client instructions a one-by-one enqueue; ``scripts.Coalescer``'s lead decision). A loop
  without it (uvloop) always waits the pass.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio.connection import AbstractConnection

__all__ = ["ready_queue_empty", "stream_writer"]


def stream_writer(connection: AbstractConnection) -> asyncio.StreamWriter | None:
    """``connection``'s stream writer: None while it is not connected, or on a redis-py whose
    connections keep none under that name (then send through ``send_packed_command``)."""
    writer: Any = getattr(connection, "_writer", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None


def ready_queue_empty(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether no callback is queued in ``loop`` (asyncio's ready queue, ``_ready``, empty):
    then none runs before the running task's next step (I/O and timer callbacks of the next
    pass are queued after it). False on a loop without that attribute (uvloop)."""
    ready = getattr(loop, "_ready", None)
    return ready is not None and not ready
