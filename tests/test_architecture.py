"""The layer table of spec/architecture.md holds for the code, read from the spec itself.

Every module of ``bbmap/`` is in a row; every import (module level, inside functions, and
under ``TYPE_CHECKING`` alike) goes to the importer's row or a row above it; and no two
modules import each other, directly or around a cycle (``binary/elf.py`` and
``binary/labels.py`` once did).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO

import bbmap

PACKAGE = Path(bbmap.__file__).parent
SPEC = REPO / "spec" / "architecture.md"


def _rows() -> list[tuple[str, list[str]]]:
    """(layer, [paths]) in table order, from the first table of the spec."""
    rows = []
    in_table = False
    for line in SPEC.read_text().splitlines():
        if line.startswith("| layer |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            paths = re.findall(r"`(bbmap/[^`]*)`", cells[1])
            rows.append((cells[0], paths))
    return rows


ROWS = _rows()


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    name = ".".join(rel.parts)
    return name.removesuffix(".__init__")


def _row_of(rel: str) -> int | None:
    """The row whose path is the longest prefix of ``rel`` (``bbmap/x/y.py``)."""
    best, best_len = None, -1
    for i, (_, paths) in enumerate(ROWS):
        for p in paths:
            hit = rel == p or (p.endswith("/") and rel.startswith(p))
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    return best


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _row_of_module(name: str) -> int | None:
    path = MODULES.get(name)
    if path is None:  # a package imported by its name: its __init__.py
        path = MODULES.get(name + ".__init__") or (PACKAGE.parent / name.replace(".", "/")
                                                   / "__init__.py")
    return _row_of(str(path.relative_to(PACKAGE.parent)))


def _imports(path: Path) -> set[str]:
    """Every bbmap module ``path`` imports, wherever the import statement is."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module \
                and n.module.split(".")[0] == "bbmap":
            for a in n.names:  # ``from bbmap.binary import disasm`` imports a module
                sub = f"{n.module}.{a.name}"
                out.add(sub if sub in MODULES else n.module)
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.split(".")[0] == "bbmap"}
    return {m for m in out if m in MODULES or m + ".__init__" in MODULES}


def test_the_table_is_read():
    assert len(ROWS) >= 8 and ROWS[0][0].startswith("0")
    assert all(paths for _, paths in ROWS)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_has_a_row(name):
    assert _row_of(str(MODULES[name].relative_to(PACKAGE.parent))) is not None, \
        f"{name}: add it to the layer table of spec/architecture.md"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_up_the_table_only(name):
    mine = _row_of(str(MODULES[name].relative_to(PACKAGE.parent)))
    later = sorted(f"{m} ({ROWS[r][0]})" for m in _imports(MODULES[name])
                   if (r := _row_of_module(m)) is not None and mine is not None and r > mine)
    assert later == [], f"{name} ({ROWS[mine][0]}) imports a later layer"


@pytest.mark.slow
def test_no_import_cycles():
    graph = {name: {m for m in _imports(path) if m != name} for name, path in MODULES.items()}
    # a package's __init__ re-exporting its modules is not a cycle with them
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert cycles == []


FUNCTION_LINES = 120  # a function longer than this is several steps: name each one


def test_no_function_is_longer_than_the_limit():
    """Every function of the package, nested ones too, fits in FUNCTION_LINES lines
    (decorators and docstring counted): the offenders are listed by path and line."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = n.end_lineno - n.lineno + 1
                if lines > FUNCTION_LINES:
                    rel = path.relative_to(PACKAGE.parent)
                    long.append(f"{rel}:{n.lineno} {n.name} ({lines} lines)")
    assert long == [], "split into named steps:\n" + "\n".join(long)
