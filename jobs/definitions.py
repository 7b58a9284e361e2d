"""Job definitions: a job type with a pydantic schema, checked at enqueue and again at run."""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from .errors import PayloadValidationError
from .options import (
    check_max_attempts,
    check_max_stalls,
    check_priority,
    check_queue,
    check_timeout_ms,
)
from .payload import MAX_TYPE_LENGTH, check_name

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class JobDefinition(Generic[M]):
    """A job type bound to a schema; pass it in place of the type string."""

    type: str
    schema: builtins.type[M]
    max_attempts: int | None = None
    timeout_ms: int | None = None
    max_stalls: int | None = None
    priority: int | None = None
    queue: str | None = None

    def validate(self, payload: Any) -> M:
        """The payload as a model; PayloadValidationError names the type, schema and fields."""
        if isinstance(payload, self.schema):
            return payload
        try:
            return self.schema.model_validate(payload)
        except ValidationError as exc:
            raise PayloadValidationError(
                f"payload for job {self.type!r} does not fit {self.schema.__name__}: "
                + "; ".join(_describe(error) for error in exc.errors()),
                "payload",
            ) from None

    def to_json_value(self, payload: Any) -> Any:
        """Validate, then the JSON-ready value to store."""
        return self.validate(payload).model_dump(mode="json")


def define_job(
    type: str,
    schema: builtins.type[M],
    *,
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    max_stalls: int | None = None,
    priority: int | None = None,
    queue: str | None = None,
) -> JobDefinition[M]:
    """Declare a job type whose payload must fit ``schema`` (a pydantic model).

    ``max_attempts``, ``timeout_ms`` and ``max_stalls`` are the job's defaults (a handler's
    own options win); ``priority`` the default priority of its jobs (an enqueue's own wins,
    then a handler's); ``queue`` the named queue its jobs wait in (likewise; None: ``"default"``);
    JobOptionError here if one is not an int in its range (``jobs.options``).

    >>> SendReceipt = define_job("receipt.send", Receipt, max_attempts=5)
    >>> await queue.enqueue(SendReceipt, Receipt(invoice_id=7))
    """
    check_name("job type", type, MAX_TYPE_LENGTH)
    if not (isinstance(schema, builtins.type) and issubclass(schema, BaseModel)):
        raise TypeError(f"schema of job {type!r} must be a pydantic BaseModel, got {schema!r}")
    where = f"job {type!r}"
    if max_attempts is not None:
        max_attempts = check_max_attempts(max_attempts, where)
    if timeout_ms is not None:
        timeout_ms = check_timeout_ms(timeout_ms, where)
    if max_stalls is not None:
        max_stalls = check_max_stalls(max_stalls, where)
    if priority is not None:
        priority = check_priority(priority, where)
    if queue is not None:
        queue = check_queue(queue, where)
    return JobDefinition(type, schema, max_attempts, timeout_ms, max_stalls, priority, queue)


@runtime_checkable
class JobDefinitions(Protocol):
    """Where the job definitions of an application are found by type name: the handler
    registry (``JobHandlerRegistry``), whose handlers declared with a definition know it.

    A job enqueued or appended by type name whose type has a definition here is validated
    against that definition's model, exactly as if the definition had been given.
    """

    def definition_of(self, job_type: str) -> JobDefinition[Any] | None:
        """The definition registered for ``job_type``; None when there is none (no handler
        for the type in this application, or a handler that takes a plain payload)."""
        ...


@runtime_checkable
class UsesJobDefinitions(Protocol):
    """A bean that validates jobs given by type name (an outbox store): when the handler
    registry starts, it hands itself to every bean of the context with this method."""

    def use_definitions(self, definitions: JobDefinitions | None) -> None: ...


def resolve_job(
    type_or_definition: str | JobDefinition[Any],
    payload: Any,
    kind: str,
    definitions: JobDefinitions | None = None,
) -> tuple[str, Any]:
    """The job type and the JSON-ready payload: validated against the definition when one is
    given (PayloadValidationError), else against the definition ``definitions`` has for the
    type name (the same check), else the payload as it is; the type string is checked
    (JobTypeError naming ``kind``). Nothing is encoded yet: the caller applies its own size
    limit.

    The one implementation of "typed by name": the queue (``JobQueue``, so ``SyncJobQueue``
    and ``neverlost enqueue`` too) and the outbox stores' ``append``/``append_in`` call it.
    """
    if isinstance(type_or_definition, JobDefinition):
        return type_or_definition.type, type_or_definition.to_json_value(payload)
    job_type = check_name(kind, type_or_definition, MAX_TYPE_LENGTH)
    definition = definitions.definition_of(job_type) if definitions is not None else None
    if definition is None:
        return job_type, payload
    return job_type, definition.to_json_value(payload)


def _describe(error: Any) -> str:
    path = "payload" + "".join(f"[{json.dumps(part)}]" for part in error.get("loc", ()))
    return f"{path}: {error.get('msg', 'invalid')}"
