"""The plugin's former home: an install made when the ``pytest11`` entry point named this
module still loads the fixtures (reinstall to load ``jobs.pytest_plugin`` directly)."""

from jobs.pytest_plugin import jobs_clock, jobs_configurations, jobs_context, jobs_queue

__all__ = ["jobs_clock", "jobs_configurations", "jobs_context", "jobs_queue"]
