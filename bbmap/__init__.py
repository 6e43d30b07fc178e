"""bbmap: map sampled program counters to compiler basic blocks.

The library API the CLI is a thin shell over (imported lazily so ``import bbmap``
stays cheap for the pytest plugin and for scripts that need one layer only)::

    import bbmap
    binary = bbmap.load_binary("a.out")          # ELF + every block map it carries
    perf = bbmap.PerfData("perf.data")           # streamed perf.data reader
    result = bbmap.annotate(["perf.data"], "a.out")   # per-block counts, edges, accounting
    from bbmap.verify import verify; verify("a.out")   # compiler-metadata checks
    bbmap.assert_valid_bb_map("a.out")           # for compiler test suites
    rep = bbmap.verify_profile("a.out", ["perf.data"])  # PGO analysis map vs the run
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"



def lazy_exports(package: str, exports: dict[str, str]):  # noqa: ANN201 - (getattr, all)
    """A package's ``__getattr__`` importing each name's module on first use, and its
    ``__all__``: ``import bbmap`` (loaded by the pytest plugin in every pytest run) then
    costs nothing until a name is used."""

    def __getattr__(name: str) -> object:  # (no typing import: --version loads this)
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__, sorted(exports)


__getattr__, __all__ = lazy_exports(__name__, {
    "load_binary": "bbmap.binary",
    "Binary": "bbmap.binary",
    "BlockMap": "bbmap.model",
    "PerfData": "bbmap.perf",
    "annotate": "bbmap.run",
    "AnnotateOptions": "bbmap.options",
    "AnnotateResult": "bbmap.aggregate",
    "assert_valid_bb_map": "bbmap.verify",
    "verify_profile": "bbmap.verify",
    "assert_pgo_map_matches": "bbmap.verify",
    "BBMapError": "bbmap.errors",
})
