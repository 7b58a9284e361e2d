"""The orders example: orders placed in transactions, an outbox, a relay, a runner, emails.

Run: ``make run`` (or ``python -m examples.orders``; ``--redis URL`` or ``JOBS_REDIS_URL`` puts the
jobs on Redis while orders and the outbox stay in the database).
"""
