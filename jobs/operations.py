"""Operating a queue: the argument checks of the operations and their list cursors.

``JobQueue`` validates every argument here before it reaches a driver, so a bad state, type,
limit or cursor fails with a ValueError naming it, on every driver alike, with nothing written.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from .payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH, check_name
from .spi.records import JOB_STATES, JobState

MAX_PAGE_LIMIT = 1_000
PURGEABLE_STATES: tuple[JobState, ...] = ("pending", "completed", "failed", "cancelled")


# -- cursors -------------------------------------------------------------------------------------


def encode_cursor(created_at_ms: int, job_id: str) -> str:
    """The cursor that resumes a newest-first listing strictly after (created_at_ms, job_id)."""
    raw = f"{created_at_ms}:{job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The (created_at_ms, job_id) a cursor names; ValueError for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, _, job_id = base64.urlsafe_b64decode(padded).decode().partition(":")
        if not job_id:
            raise ValueError("no job id")
        return int(created), job_id
    except (ValueError, TypeError, UnicodeDecodeError, binascii.Error):
        raise ValueError(
            f"cursor {cursor!r} is not a cursor from list_jobs; pass a page's next_cursor"
        ) from None


# -- argument checks -----------------------------------------------------------------------------


def check_state(state: object) -> JobState:
    if state not in JOB_STATES:
        raise ValueError(f"job state {state!r} is not one of {', '.join(JOB_STATES)}")
    return state


def check_type(job_type: object) -> str:
    return check_name("job type", job_type, MAX_TYPE_LENGTH)


def check_key(key: object) -> str:
    return check_name("key", key, MAX_KEY_LENGTH)


def check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise ValueError(f"limit must be an int from 1 to {MAX_PAGE_LIMIT}, got {limit!r}")
    return limit


def check_cursor(cursor: object) -> str:
    if not isinstance(cursor, str):
        raise ValueError(f"cursor must be a page's next_cursor (a str), got {cursor!r}")
    decode_cursor(cursor)
    return cursor


def check_purge_states(states: Iterable[object]) -> tuple[JobState, ...]:
    """The states to purge; ``active`` is refused: a running job would lose its record."""
    if isinstance(states, str):
        raise ValueError(f"states must be a collection of states, e.g. ({states!r},)")
    checked = tuple(dict.fromkeys(check_state(state) for state in states))
    if not checked:
        raise ValueError(f"purge needs at least one state, from {', '.join(PURGEABLE_STATES)}")
    if "active" in checked:
        raise ValueError(
            "purge refuses state 'active': a running job's worker still holds it; "
            "cancel it first, then purge 'cancelled'"
        )
    return checked


def check_age(older_than_ms: object) -> int:
    if not isinstance(older_than_ms, int) or isinstance(older_than_ms, bool) or older_than_ms < 0:
        raise ValueError(f"older_than_ms must be an int >= 0, got {older_than_ms!r}")
    return older_than_ms


def check_job_id(job_id: object) -> str:
    if not isinstance(job_id, str):
        raise ValueError(f"job id must be a str, got {type(job_id).__name__}")
    return job_id
