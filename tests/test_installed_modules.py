"""``pip install .`` ships only what bbmap runs: every module of ``bbmap/`` is reached by
an import from an entry point (the ``bbmap`` command and its subcommands, the names
``import bbmap`` exports lazily, the pytest plugin).  Oracles and fixtures that only
tests, benches or corpus tooling use live under ``tests/`` (``tests/oracles/``)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from helpers import REPO

import bbmap

PACKAGE = Path(bbmap.__file__).parent
# still installed though only tests, benches and corpus tooling import them: the writers
# of test inputs, which corpus/build imports from the installed package (moving them
# out means giving corpus/build and corpus/tools a path to tests/)
STILL_SHIPPED = {"bbmap.binary.writer", "bbmap.perf.writer"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The bbmap modules ``path`` imports, wherever the statement is, plus modules named
    by a string (the lazy export tables of ``bbmap/__init__.py`` and the packages)."""
    found = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module \
                and n.module.startswith("bbmap"):
            found |= {f"{n.module}.{a.name}" for a in n.names} | {n.module}
        elif isinstance(n, ast.Import):
            found |= {a.name for a in n.names}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            found.add(n.value)
    out = set()
    for m in found:
        parts = m.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)
                if ".".join(parts[:i]) in MODULES}
    return out


def _entry_points() -> set[str]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    roots = {"bbmap"}
    roots |= {v.split(":")[0] for v in meta.get("scripts", {}).values()}
    for group in meta.get("entry-points", {}).values():
        roots |= {v.split(":")[0] for v in group.values()}
    return roots | {m for m in MODULES if m.startswith("bbmap.cli.")}


def test_every_installed_module_is_reached_from_an_entry_point():
    seen: set[str] = set()
    todo = sorted(_entry_points())
    while todo:
        m = todo.pop()
        if m in seen or m not in MODULES:
            continue
        seen.add(m)
        todo += sorted(_imports(MODULES[m]) - seen)
    unreached = sorted(set(MODULES) - seen - STILL_SHIPPED)
    assert unreached == [], ("installed but imported only by tests, benches or corpus "
                             f"tooling (move them under tests/): {unreached}")


def test_no_testing_package_ships():
    assert not (PACKAGE / "testing").exists()
    assert (REPO / "tests" / "oracles" / "perf_oracle.py").exists()
