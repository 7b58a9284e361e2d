"""An append-only ledger that a SIGKILL cannot take back: one fsynced JSON line per event.

Every process of a chaos run (workers, relays, the harness) appends to one file. Lines are short
and written with a single ``write`` on an ``O_APPEND`` descriptor, so lines of concurrent writers
never interleave; ``fsync`` before returning means an event the process reported did happen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Ledger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "pid": os.getpid(), **fields}, separators=(",", ":"))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every complete line; a line torn by a kill mid-write (no newline yet) is skipped."""
        if not self.path.exists():
            return []
        text = self.path.read_text()
        lines = text.split("\n")
        return [json.loads(line) for line in lines[:-1] if line.strip()]
