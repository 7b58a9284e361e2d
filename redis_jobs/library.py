"""The package's Lua scripts as one Redis Functions library, versioned by its content.

Each transition is a file in ``redis_jobs/lua/`` written as a script body (it reads ``KEYS``
and ``ARGV``); ``common.lua`` holds the helpers they share. Run as EVALSHA scripts, every call
re-ran ``common.lua`` (some 40 closures and tables built, then collected: measured ~37k
instructions of the ~300k of an enqueue, plus Lua GC). As a library loaded once per server
(``FUNCTION LOAD``), the helpers are built once and each call (``FCALL``) runs only its body.

The library text is fixed: built at import from the package's files, never from input. Each
body becomes the callback of one function; ``begin(keys, args)`` (in ``common.lua``) first
points the shared ``KEYS``/``ARGV`` upvalues at the call's and clears the helpers' per-call
state, so a call sees nothing of the one before it. A script file may start with definitions
made once, when the library loads (its constant tables and local functions), ended by a
``PER_CALL`` line: a function or table made by every call costs it some 2k instructions of
allocation and collection (measured under callgrind; a one-job enqueue made 17 such). They go
in a ``do`` block of their own, so the scripts' names do not meet; any state they keep between
calls must be set afresh by every call's body.

Versioning: the library and its functions are named after a digest of the text
(``neverlost_jobs_<digest>``, ``nlj_<digest>_<script>``), so a package upgrade calls its own
functions and never an older library's; two versions side by side on one server (a rolling
upgrade) do not clash. Loading is ``FUNCTION LOAD REPLACE``: idempotent, so two processes that
find the library missing at once both succeed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType

SCRIPT_NAMES = (
    *("enqueue", "claim", "heartbeat", "finish", "retry", "get", "counts", "peek"),
    *("cancel", "requeue", "purge", "list", "stats", "workers", "progress"),
    *("enqueue_workflow", "workflow_jobs"),
)
READ_ONLY = frozenset({"get", "counts", "list", "stats", "workflow_jobs"})
"""Functions flagged ``no-writes``: Redis lets them run when it is out of memory."""
LIBRARY_PREFIX = "neverlost_jobs_"
PER_CALL = "-- per call\n"
"""The line of a script file after its load-time definitions, before its body (optional)."""


@dataclass(frozen=True, slots=True)
class Library:
    """A library's name, its ``FUNCTION LOAD`` text and the function name of each script."""

    name: str
    code: str
    functions: Mapping[str, str]

    @classmethod
    def build(
        cls, common: str, bodies: Mapping[str, str], *, version: str | None = None
    ) -> Library:
        """The library of ``bodies`` (script name -> script text) after ``common``.

        ``version`` defaults to a digest of the text; tests pass their own to load a library
        of their own.
        """
        if version is None:
            text = "\0".join([common, *(f"{name}\0{bodies[name]}" for name in sorted(bodies))])
            version = hashlib.sha1(text.encode()).hexdigest()[:16]
        name = LIBRARY_PREFIX + version
        functions = {script: f"nlj_{version}_{script}" for script in bodies}
        parts = [f"#!lua name={name}\n", common, "\n"]
        for script, text in bodies.items():
            flags = "{'no-writes'}" if script in READ_ONLY else "{}"
            setup, _, body = text.rpartition(PER_CALL)
            parts.append(
                f"do\n{setup}\nredis.register_function{{function_name = '{functions[script]}', "
                f"flags = {flags}, callback = function(keys, args)\nbegin(keys, args)\n{body}\n"
                "end}\nend\n"
            )
        return cls(name, "".join(parts), MappingProxyType(functions))


def package_library(version: str | None = None) -> Library:
    """The library of the package's ``lua/`` files (``version``: see ``Library.build``)."""
    package = files("redis_jobs") / "lua"
    common = (package / "common.lua").read_text(encoding="utf-8")
    bodies = {name: (package / f"{name}.lua").read_text(encoding="utf-8") for name in SCRIPT_NAMES}
    return Library.build(common, bodies, version=version)


LIBRARY: Library = package_library()
"""The package's library, read once at import."""
