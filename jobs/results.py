"""A handler's return value as its job's result: JSON text, checked like a payload, bounded.

The runner encodes the value when the handler returns and hands the text to the store in the
completing write itself (``JobStore.complete(..., result)``, or one ``complete_many`` for a
coalesced batch): keeping a result costs no round trip of its own. A value that would not come
back as it went in, or is larger than ``JobsSettings.max_result_bytes``, fails the job for good
with ``ResultError`` naming what and where (``result["pages"][2]: set is not JSON``). A handler
that returns None keeps no result (``JobInfo.result`` None).
"""

from __future__ import annotations

from typing import Any

from .errors import PayloadError, PayloadTooLargeError, ResultError
from .payload import encode_payload

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "encode_result"]

DEFAULT_MAX_RESULT_BYTES = 64 * 1024
"""``JobsSettings.max_result_bytes`` unless set: a result is kept in the job's record, read with
every ``get_job`` and listing; larger outputs belong in the app's own storage."""


def encode_result(value: Any, max_bytes: int) -> str:
    """The JSON text of a handler's return value; ResultError if it cannot be kept."""
    try:
        return encode_payload(value, max_bytes=max_bytes)
    except PayloadTooLargeError as exc:
        raise ResultError(
            f"the handler's result is {exc.size} bytes of JSON, over max_result_bytes "
            f"({max_bytes}): keep large outputs in your own storage and return a reference"
        ) from None
    except PayloadError as exc:
        where = str(exc).replace("payload", "result", 1)
        raise ResultError(
            f"the handler's return value cannot be kept as the job's result: {where}; return "
            "plain JSON (dict, list, str, int, float, bool) or None"
        ) from None
