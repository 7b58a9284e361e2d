"""The public names of each package, listed here: a name added to or dropped from an ``__all__``
fails this test until the list (and so the review of the API) is changed with it.

``jobs`` is the user API; ``jobs.spi`` and ``jobs.spi.support`` are what driver and outbox-store
authors use; the drivers export their own user API.
"""

from __future__ import annotations

import importlib
import types

import pytest

EXPORTED = {
    "framework": [
        "ApplicationBuilder",
        "start_lifecycles",
        "ApplicationContext",
        "Lifecycle",
        "Token",
        "auto_configuration",
        "configuration",
        "entry",
        "BeanCreationError",
        "BeanDefinitionError",
        "BeanNotFoundError",
        "CircularDependencyError",
        "BeanCloseError",
        "ContextClosedError",
        "DuplicateBeanError",
        "FrameworkError",
        "LifecycleError",
        "MissingDependencyError",
    ],
    "jobs": [
        "JOB_DRIVER",
        "JOB_HANDLER_REGISTRY",
        "JOB_QUEUE",
        "JOB_RUNNER",
        "JOB_SCHEDULER",
        "JOBS_SETTINGS",
        "OUTBOX_RELAY",
        "OUTBOX_STORE",
        "JobsAutoConfiguration",
        "JobsSettings",
        "JobQueue",
        "SyncJobQueue",
        "NewJob",
        "JobDefinition",
        "define_job",
        "job_handler",
        "JobHandlerRegistry",
        "JobContext",
        "AbortSignal",
        "JobRunner",
        "Worker",
        "Backoff",
        "exponential_backoff",
        "Health",
        "LoopHealth",
        "Schedule",
        "JobScheduler",
        "JobInfo",
        "JobState",
        "JobPage",
        "JobTypeStats",
        "WorkerInfo",
        "JobDriver",
        "InProcessJobDriver",
        "redact_url",
        "Clock",
        "ManualClock",
        "SystemClock",
        "OutboxStore",
        "OutboxRelay",
        "JobOutboxPublisher",
        "enable_logging",
        "JobsError",
        "DriverError",
        "DuplicateHandlerError",
        "JobTimeoutError",
        "JobTypeError",
        "JobOptionError",
        "LeaseExpiredError",
        "StalledTooOftenError",
        "PayloadError",
        "PayloadTooLargeError",
        "PayloadValidationError",
        "PermanentError",
        "ResultError",
        "RetryLater",
        "ScheduleError",
        "StoreSchemaError",
        "StoreUnavailableError",
    ],
    "jobs.spi": [
        "JobDriver",
        "JobStore",
        "JobOperations",
        "WorkerRegistry",
        "AuditTrail",
        "OutcomeCounters",
        "ProgressReports",
        "WorkflowStore",
        "ClockedDriver",
        "JobRequest",
        "ClaimedJob",
        "JobInfo",
        "JobProgress",
        "FailedAttempt",
        "JobState",
        "JOB_STATES",
        "FINISHED_STATES",
        "JobStateCounts",
        "DEFAULT_MAX_STALLS",
        "MAX_ERRORS_KEPT",
        "stalled_error",
        "workflow_cancelled_error",
        "WorkflowJob",
        "WorkflowInfo",
        "JobPage",
        "JobTypeStats",
        "WorkerRegistration",
        "WorkerInfo",
        "AuditEntry",
        "AuditPage",
        "AUDIT_KEEP_MS",
        "AUDIT_MAX_ENTRIES",
        "OutcomeCount",
        "COUNTERS_KEEP_MS",
        "DURATION_BOUNDS_MS",
        "COUNTED_OUTCOMES",
        "OutboxStore",
        "OutboxPublisher",
        "OutboxEntry",
        "OutboxAuditReads",
        "OverdueEntry",
        "PublishedEntry",
        "WORKFLOW_ENTRY_TYPE",
        "outbox_workflow_id",
        "OutboxOperations",
        "OutboxStats",
        "RelayRegistration",
        "RelayInfo",
        "OutboxEntryInfo",
        "OutboxEntryPage",
        "OUTBOX_ENTRY_STATES",
        "JobInbox",
        "SyncJobInbox",
        "InboxJob",
        "AttemptSettlement",
        "CompletesInTransaction",
        "DRIVERS_GROUP",
        "DriverFactory",
        "SQLOutboxSite",
    ],
    "jobs.spi.support": [
        "check_delay_ms",
        "check_run_at",
        "check_max_attempts",
        "check_priority",
        "check_request",
        "check_timeout_ms",
        "stalled_error_parts",
        "encode_payload",
        "decode_payload",
        "check_name",
        "MAX_TYPE_LENGTH",
        "MAX_KEY_LENGTH",
        "JobDefinition",
        "JobDefinitions",
        "UsesJobDefinitions",
        "resolve_job",
        "Clock",
        "ManualClock",
        "to_datetime",
        "to_epoch_ms",
        "Retention",
        "Coalescer",
        "current_traceparent",
        "redact_url",
        "new_action_id",
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
    ],
    "orm_sqlalchemy": [
        "NoTransactionError",
        "SQLAlchemyJobsError",
        "TransactionRolledBackError",
        "SQLAlchemyTransactionManager",
        "transactional",
        "current_session",
        "SQLAlchemyOutboxStore",
        "SQLAlchemyJobStore",
        "JobSchema",
        "job_schema",
        "OutboxSchema",
        "outbox_schema",
        "SQLAlchemyInbox",
        "InboxSchema",
        "inbox_schema",
        "create_engine",
        "create_sync_engine",
        "configure_sqlite",
        "is_sqlite",
        "pooler_connect_args",
        "normalize_url",
    ],
    "redis_jobs": [
        "RedisJobDriver",
        "Keys",
        "RedisJobsError",
        "RedisScriptError",
        "RedisReplicaError",
        "RedisOutOfMemoryError",
        "ReplicationTimeoutError",
        "RedisClient",
        "client_from_url",
        "delete_namespace",
    ],
}


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_all_lists_exactly_the_exported_names(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(EXPORTED[package])
    assert len(set(module.__all__)) == len(module.__all__), f"{package}.__all__ repeats a name"


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_every_exported_name_is_importable(package: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {package} import {', '.join(EXPORTED[package])}", namespace)
    missing = [name for name in EXPORTED[package] if namespace.get(name) is None]
    assert not missing, f"{package} does not define {missing}"


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_no_public_name_is_left_out_of_all(package: str) -> None:
    """A public attribute of the package that is not a submodule is listed in ``__all__``."""
    module = importlib.import_module(package)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert public <= set(module.__all__), sorted(public - set(module.__all__))
