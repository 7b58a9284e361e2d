"""Requests for the conformance suites."""

from __future__ import annotations

import json
import uuid
from typing import Any

from jobs.spi import JobRequest


def new_request(
    job_type: str = "t", payload: Any = None, *, payload_json: str | None = None, **fields: Any
) -> JobRequest:
    """A JobRequest with a fresh id and ``max_attempts=3`` unless given."""
    fields.setdefault("max_attempts", 3)
    text = payload_json if payload_json is not None else json.dumps(payload)
    return JobRequest(id=uuid.uuid4().hex, type=job_type, payload=text, **fields)
