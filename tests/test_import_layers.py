"""The package map, checked (issue 29, item 6): the four packages' imports read with the stdlib
``ast`` (no import runs), every kind counted: module-level, ``if TYPE_CHECKING:`` and
function-local (lazy) imports.

Layers, bottom up: ``framework`` < ``jobs`` < {``orm_sqlalchemy``, ``redis_jobs``}.

- ``framework`` imports none of the other three.
- ``jobs`` imports ``framework`` and itself, never a driver package (the CLI and the chaos kit
  build stores through the ``neverlost.drivers`` entry points, ``jobs.drivers``).
- A driver package imports, of ``jobs``, only ``jobs.spi`` (and its modules) and ``jobs.errors``;
  never ``framework`` nor the other driver. ``jobs.testing`` (the conformance suite, the chaos kit)
  is for the test tree (``tests/``): a driver package itself imports none of it.
- ``jobs.errors`` imports nothing of ours at module level (every package stands on it).
  (``jobs.spi.support`` re-exports helpers that live in ``jobs``: the drivers' one door to them.)
- No circles between modules, type-only and lazy imports included, except the pairs in
  ``MUTUAL``, each there by design and said why (the test fails when one of them is no longer a
  circle, so the list cannot go stale).
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")
DRIVERS = ("orm_sqlalchemy", "redis_jobs")

MUTUAL: dict[frozenset[str], str] = {
    frozenset({"jobs.queue", "jobs.sync_queue"}): (
        "a facade and its sync twin: SyncJobQueue wraps a JobQueue, and JobQueue.sync() makes "
        "one (a lazy import; the return type is a type-only import)"
    ),
    frozenset({"jobs.errors", "jobs.options"}): (
        "RetryLater checks its delay_ms by the enqueue option's rule (options.check_delay_ms, "
        "imported when one is raised) so the rule is written once; jobs.errors imports nothing "
        "of ours at module level"
    ),
}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    kind: str  # "runtime" | "type" | "lazy"
    line: int


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Reader(ast.NodeVisitor):
    def __init__(self, name: str, is_package: bool, known: dict[str, pathlib.Path]) -> None:
        self.name, self.is_package, self.known = name, is_package, known
        self.kind = "runtime"
        self.found: list[Import] = []

    def _resolve(self, dotted: str) -> str | None:
        while dotted and dotted not in self.known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def _add(self, dotted: str, line: int) -> None:
        target = self._resolve(dotted)
        found = Import(self.name, target or "", self.kind, line)
        if target is not None and target != self.name and found not in self.found:
            self.found.append(found)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            self._add(submodule if submodule in self.known else module, node.lineno)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            outer, self.kind = self.kind, "type"
            for statement in node.body:
                self.visit(statement)
            self.kind = outer
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    def _in_function(self, node: ast.AST) -> None:
        outer = self.kind
        if outer == "runtime":
            self.kind = "lazy"
        self.generic_visit(node)
        self.kind = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _in_function


def imports() -> list[Import]:
    known = modules()
    found: list[Import] = []
    for name, path in known.items():
        reader = _Reader(name, path.name == "__init__.py", known)
        reader.visit(ast.parse(path.read_text(), str(path)))
        found.extend(reader.found)
    return found


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _package(module: str) -> str:
    return module.partition(".")[0]


def _within(module: str, parent: str) -> bool:
    return module == parent or module.startswith(f"{parent}.")


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return imports()


def _shown(found: list[Import]) -> str:
    return "\n".join(
        f"  {edge.source} -> {edge.target} ({edge.kind}, line {edge.line})" for edge in found
    )


def test_the_reading_sees_every_kind_of_import(graph: list[Import]) -> None:
    """The reader is not blind: known arrows of each kind are found."""
    seen = {(edge.source, edge.target, edge.kind) for edge in graph}
    assert ("orm_sqlalchemy.store", "jobs.errors", "runtime") in seen
    assert ("jobs.queue", "jobs.sync_queue", "type") in seen
    assert ("jobs.queue", "jobs.sync_queue", "lazy") in seen
    assert len({edge.source for edge in graph}) > 100


def test_framework_imports_none_of_the_packages_above_it(graph: list[Import]) -> None:
    wrong = [
        e for e in graph if _package(e.source) == "framework" and _package(e.target) != "framework"
    ]
    assert not wrong, "framework is the ground floor:\n" + _shown(wrong)


def test_jobs_imports_no_driver(graph: list[Import]) -> None:
    wrong = [e for e in graph if _package(e.source) == "jobs" and _package(e.target) in DRIVERS]
    assert not wrong, "jobs knows no driver (build stores through jobs.drivers):\n" + _shown(wrong)


def test_drivers_import_only_the_spi_and_errors_of_jobs(graph: list[Import]) -> None:
    wrong = [
        e
        for e in graph
        if _package(e.source) in DRIVERS
        and _package(e.target) != _package(e.source)
        and not (_within(e.target, "jobs.spi") or e.target == "jobs.errors")
    ]
    assert not wrong, "a driver imports jobs.spi and jobs.errors only:\n" + _shown(wrong)


def test_errors_import_nothing_of_ours_at_module_level(graph: list[Import]) -> None:
    wrong = [e for e in graph if e.source == "jobs.errors" and e.kind != "lazy"]
    assert not wrong, "every package stands on jobs.errors:\n" + _shown(wrong)


def test_no_circles(graph: list[Import]) -> None:
    found = cycles(graph)
    unexpected = [c for c in found if frozenset(c) not in MUTUAL]
    lines = []
    for component in unexpected:
        members = set(component)
        lines.append(" <-> ".join(component))
        lines.append(_shown([e for e in graph if e.source in members and e.target in members]))
    assert not unexpected, "import circles (type-only and lazy imports counted):\n" + "\n".join(
        lines
    )
    stale = set(MUTUAL) - {frozenset(c) for c in found}
    assert not stale, f"no longer circles: drop them from MUTUAL: {sorted(map(sorted, stale))}"
