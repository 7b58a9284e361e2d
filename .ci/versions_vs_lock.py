"""Print how an environment's versions differ from uv.lock (``make test-latest`` shows it).

Usage: ``python .ci/versions_vs_lock.py uv.lock FREEZE_FILE`` (``uv pip freeze`` output).
"""

from __future__ import annotations

import re
import sys
import tomllib


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def main(lock_path: str, freeze_path: str) -> None:
    with open(lock_path, "rb") as lock_file:
        locked = {_name(p["name"]): p["version"] for p in tomllib.load(lock_file)["package"]}
    changes = []
    with open(freeze_path) as freeze:
        for line in freeze:
            name, sep, version = line.strip().partition("==")
            if not sep:
                continue
            before = locked.get(_name(name))
            if before != version:
                changes.append(f"  {name}: {before or 'not in the lock'} -> {version}")
    print("versions beside uv.lock:", *(changes or ["  the same as uv.lock"]), sep="\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
