"""The shape of the package: no import cycles between modules, and no module too long to read
unless it says why.

import-linter checks the layers between packages, but lets the modules of one package
import each other in a circle. Such a cycle still ties them together (none can be read,
moved or tested alone, and which one Python finishes first depends on who imports first),
so this test reads every import from the source, wherever it sits: at the top, inside a
function or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ragcli"
MAX_LINES = 500
# A longer module gives its reason in its docstring: "This module is long because ...".
LONG_REASON = re.compile(r"\blong\b[^.]*\bbecause\b", re.IGNORECASE)


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source: at the top, in
    functions, under ``TYPE_CHECKING``; relative imports resolved, and ``from . import x``
    taken as the submodule ``x`` when there is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base_parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            # `import ragcli.a.b.name` names the module ragcli.a.b when name is not one.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    names = set(files)
    return {name: imported_modules(name, path, names) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None (depth-first)."""
    finished: set[str] = set()
    for start in sorted(graph):
        if start in finished:
            continue
        path = [start]
        pending = [iter(sorted(graph[start]))]
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                pending.pop()
                finished.add(path.pop())
            elif nxt in path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in finished:
                path.append(nxt)
                pending.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_every_kind_of_import_is_seen(tmp_path):
    modules = {"ragcli", "ragcli.a", "ragcli.a.b", "ragcli.c", "ragcli.e"}
    modules |= {"ragcli.p", "ragcli.p.mod", "ragcli.p.d", "ragcli.p.f"}
    module = tmp_path / "mod.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "import ragcli.a.b.name\n"
        "from .. import c\n"
        "from ..c import name\n"
        "from . import d, name\n"
        "if TYPE_CHECKING:\n"
        "    from ragcli.e import T\n"
        "def f():\n"
        "    from .f import g\n"
    )
    found = imported_modules("ragcli.p.mod", module, modules)
    assert found == {"ragcli.a.b", "ragcli.c", "ragcli.p.d", "ragcli.p", "ragcli.e", "ragcli.p.f"}
    package = tmp_path / "__init__.py"
    package.write_text("from . import mod\nfrom .d import name\nfrom . import name\n")
    assert imported_modules("ragcli.p", package, modules) == {"ragcli.p.mod", "ragcli.p.d"}


def test_find_cycle_reports_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"b", "c"}, "c": set()}) == ["b", "b"]


def test_no_import_cycles_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_long_modules_say_why():
    unexplained = []
    for name, path in module_files().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_LINES and not LONG_REASON.search(ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{name} ({lines} lines)")
    assert not unexplained, (
        f"over {MAX_LINES} lines with no reason in the module docstring "
        '("This module is long because ..."): ' + ", ".join(unexplained)
    )


def test_the_reason_must_be_given():
    assert LONG_REASON.search("This module is long because it is a table.")
    assert not LONG_REASON.search("Long prompts cost more. It is slow because of attention.")


# One role in parallel packages may share a name: each subsystem's protocol and its factory.
PARALLEL_ROLES = {"base.py", "factory.py"}
LAB = PACKAGE.parent / "benchmarks"
MAX_BENCH_SHARE = 0.15  # of the installed package's lines: the reports users run, no more


def test_module_names_are_not_shared_but_by_parallel_roles():
    seen: dict[str, list[str]] = {}
    for name, path in module_files().items():
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(name)
    shared = {base: names for base, names in seen.items() if len(names) > 1}
    assert set(shared) <= PARALLEL_ROLES, shared


def test_benchmarks_are_a_small_part_of_what_users_install():
    lines = {
        name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in module_files().items()
    }
    bench = sum(n for name, n in lines.items() if ".bench" in f".{name}")
    assert bench / sum(lines.values()) <= MAX_BENCH_SHARE, (bench, sum(lines.values()))


def test_the_lab_uses_public_names_only():
    """The lab (benchmarks/) reaches ragcli through public modules and names: a private
    one may change under it without notice."""
    private = []
    for path in sorted(LAB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ragcli"):
                names = [*node.module.split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [
                    p for a in node.names if a.name.startswith("ragcli") for p in a.name.split(".")
                ]
            else:
                continue
            private += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("_")]
    assert not private, private
