"""Reads of another library's private attributes live in each package's ``_compat.py`` (issue
29, item 5), where each says why and ``tests/unit/*/test_compat.py`` fails when one disappears
upstream. This test finds, with the stdlib ``ast``, the two shapes such a read takes elsewhere:

- ``module._name`` where ``module`` is a name this file imported from outside the project
  (``from opentelemetry.metrics import _internal``; ``trace._TRACER_PROVIDER``);
- ``getattr(thing, "_name", ...)`` with a literal private name (``getattr(loop, "_ready")``).

Our own private names (``self._x``, a sibling's ``store._closed``) are not third-party reads;
``OURS`` lists the ``getattr`` reads of our own objects' private names, each said why.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")
OURS = {
    "jobs/runner.py": {"_clock"},  # a driver's own clock (tests' ManualClock), not a library's
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _foreign_names(tree: ast.Module) -> set[str]:
    """Names bound by imports of modules outside the four packages."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] not in PACKAGES:
                    names.add(alias.asname or alias.name.partition(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and (node.module or "").partition(".")[0] not in PACKAGES
        ):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def private_reads(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    foreign = _foreign_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module.partition(".")[0] not in PACKAGES:
                hidden = [a.name for a in node.names if _private(a.name)]
                hidden += [part for part in module.split(".") if _private(part)]
                found += [f"{node.lineno}: from {module} import {name}" for name in hidden]
        elif (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in foreign
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_private_reads_of_other_libraries_live_in_compat_modules() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "_compat.py":
                continue
            name = str(path.relative_to(ROOT))
            allowed = OURS.get(name, set())
            found += [
                f"{name}:{read}"
                for read in private_reads(path)
                if not any(f"'{attribute}'" in read for attribute in allowed)
            ]
    assert not found, (
        "move these into the package's _compat.py (why, the public fallback, and a test in "
        "tests/unit/*/test_compat.py that fails when the attribute goes):\n" + "\n".join(found)
    )


def test_the_reading_finds_each_shape(tmp_path: pathlib.Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from opentelemetry import trace\n"
        "from opentelemetry.metrics import _internal\n"
        "import asyncio\n"
        "trace._TRACER_PROVIDER\n"
        "getattr(loop, '_ready', None)\n"
        "self._mine\n"
        "asyncio.__name__\n"
    )
    assert private_reads(sample) == [
        "2: from opentelemetry.metrics import _internal",
        "4: trace._TRACER_PROVIDER",
        "5: getattr(..., '_ready')",
    ]
