"""What is installed, read without importing it: versions for cache keys, and whether the
compiled kernels (numba: the built-in solver, Ext-TSP's big-function merger) may run.

Importing a package to ask its version costs its whole import (capstone ~16 ms, OR-Tools
~100 ms), and ``importlib.metadata`` ~40 ms of its own; the ``<name>-<version>.dist-info``
directory pip leaves beside the package says the same for the price of one ``listdir``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os


def dist_info_versions(package: str) -> list[str] | None:
    """The versions named by ``<package>-<version>.dist-info`` directories beside the
    importable ``package``, sorted (empty when there is none to read); None when the
    package is not importable."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    with contextlib.suppress(OSError):
        return sorted(n[len(package) + 1:-len(".dist-info")] for n in os.listdir(site)
                      if n.startswith(package + "-") and n.endswith(".dist-info"))
    return []


ENV_NO_NUMBA = "BBMAP_NO_NUMBA"  # set to 1: never use numba (the reference paths only)


def numba_available() -> bool:
    """numba is installed and not switched off by ``$BBMAP_NO_NUMBA`` (nothing imported):
    the one rule the solver and the layout both follow."""
    if os.environ.get(ENV_NO_NUMBA, "").strip() not in ("", "0"):
        return False
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False
