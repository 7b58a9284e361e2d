"""Fixed sizes and spans of the Redis driver's keys, shared by the driver and its operations."""

EXPIRY_MARGIN_MS = 60_000
"""Real time a finished record outlives its retention, for clocks that differ from Redis's."""
SIGNAL_CAP = 16
"""Wake-up signals a type's list holds at most (one wakes one blocked waiter)."""
SIGNAL_TTL_MS = 60_000
"""How long a signal list nobody waited on is kept."""
