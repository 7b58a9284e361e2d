"""jobs/_compat.py: the private attributes of OpenTelemetry's API and of loguru that jobs reads
are still there and still mean what jobs takes them to mean. If one goes upstream, jobs still
works (on the public path: slower, or our log patcher set alone): this test is how an upgrade
says so. Each check runs in a fresh interpreter: the providers are process-wide, set once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from jobs import _compat


def _run(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},  # no OTEL_* variables
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_opentelemetry_keeps_its_provider_globals() -> None:
    assert _compat.OTEL_TRACER_GLOBAL, (
        "opentelemetry.trace._TRACER_PROVIDER is gone: jobs.telemetry.tracing() now asks "
        "get_tracer_provider() on every enqueue and attempt (~1 us); see jobs/_compat.py"
    )
    assert _compat.OTEL_METER_GLOBAL, (
        "opentelemetry.metrics._internal._METER_PROVIDER is gone: every job now records its "
        "metrics through no-op instruments (~1 us); see jobs/_compat.py"
    )


def test_the_tracer_global_says_whether_a_provider_is_set() -> None:
    _run("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from jobs import _compat
        from jobs.telemetry import tracing
        assert _compat.tracer_provider_unset() and not tracing()
        trace.get_tracer_provider()  # the proxy is not a provider set
        assert _compat.tracer_provider_unset() and not tracing()
        trace.set_tracer_provider(TracerProvider())
        assert not _compat.tracer_provider_unset() and tracing()
    """)


def test_the_meter_global_says_whether_a_provider_is_set() -> None:
    _run("""
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from jobs import _compat
        from jobs.metrics import metering
        assert _compat.meter_provider_unset() and not metering()
        metrics.set_meter_provider(MeterProvider())
        assert not _compat.meter_provider_unset() and metering()
    """)


def test_loguru_keeps_the_configured_patcher_on_its_core() -> None:
    _run("""
        from loguru import logger
        from jobs import _compat
        def patcher(record):
            pass
        logger.configure(patcher=patcher)
        assert _compat.loguru_patcher(logger) is patcher, (
            "loguru no longer keeps its patcher at logger._core.patcher: enable_logging now "
            "replaces the application's patcher; see jobs/_compat.py"
        )
    """)


def test_loguru_keeps_the_context_variable_behind_contextualize() -> None:
    from loguru import logger

    context = _compat.loguru_context()
    assert context is not None, (
        "loguru no longer keeps contextualize's ContextVar at loguru._logger.context: job log "
        "lines lose their job id and type; see jobs/_compat.py"
    )
    with logger.contextualize(neverlost_probe=1):
        assert context.get().get("neverlost_probe") == 1
