"""pytest plugin (``pytest11`` entry point): the ``bb_map_verifier`` fixture.

Kept import-light: it is loaded in every pytest run, so bbmap's heavy modules
(numpy, capstone, pyelftools) are imported only when a test uses the fixture::

    def test_emits_valid_map(bb_map_verifier, tmp_path):
        exe = build(tmp_path)                      # your compiler under test
        bb_map_verifier(exe)                       # fails the test with every finding
        bb_map_verifier(exe, checks=["md-return"]) # only some checks
        report = bb_map_verifier.report(exe)       # or inspect the VerifyReport
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pytest


class BBMapVerifier:
    """Callable: ``bb_map_verifier(path)`` asserts every selected check passes."""

    def __init__(self, debug_dirs: Iterable[str | os.PathLike] = ()) -> None:
        self.debug_dirs = tuple(debug_dirs)

    def __call__(self, path: str | os.PathLike, checks: Iterable[str] | None = None) -> Any:
        __tracebackhide__ = True
        from bbmap.errors import BBMapError
        from bbmap.verify.api import verify

        try:
            report = verify(path, checks, debug_dirs=self.debug_dirs)
        except BBMapError as e:  # not built, not ELF, unknown check: one line, no traceback
            pytest.fail(f"block map verification failed: {e}", pytrace=False)
        if not report.ok:
            pytest.fail("block map verification failed\n" + report.format(), pytrace=False)
        return report

    def report(self, path: str | os.PathLike, checks: Iterable[str] | None = None) -> Any:
        from bbmap.verify.api import verify

        return verify(path, checks, debug_dirs=self.debug_dirs)


@pytest.fixture
def bb_map_verifier() -> BBMapVerifier:
    """Verify block maps of binaries a test built (see this module's docstring)."""
    return BBMapVerifier()
