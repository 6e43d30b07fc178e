"""pytest plugin (``pytest11`` entry point): the ``bb_map_verifier`` fixture.

Kept import-light: it is loaded in every pytest run, so bbmap's heavy modules
(numpy, capstone, pyelftools) are imported only when a test uses the fixture::

    def test_emits_valid_map(bb_map_verifier, tmp_path):
        exe = build(tmp_path)                      # your compiler under test
        bb_map_verifier(exe)                       # fails the test with every finding,
                                                   # and when a check could not run
        bb_map_verifier(exe, allow_partial=True)   # ...unless that is acceptable
        bb_map_verifier(exe, checks=["md-return"]) # only some checks
        report = bb_map_verifier.report(exe)       # or inspect the VerifyReport

    def test_pgo_map_holds(bb_map_verifier):       # the PGO analysis map against a run
        bb_map_verifier.profile(exe, "perf.data", functions=["hot_loop"], threshold=0.1)
        rep = bb_map_verifier.profile_report(exe, "perf.data")  # a ProfileReport

``profile`` fails the test when any branch of the named functions (default: all) is
mismatched - its measured probability lies, with the stated confidence, further than
``threshold`` from the map's - listing each with its block IDs; branches with too few
samples (unknown) do not fail it, a profile that cannot be judged does, and so does an
IP-only profile (inferred counts) unless ``allow_inferred=True``.
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

    def __call__(self, path: str | os.PathLike, checks: Iterable[str] | None = None, *,
                 allow_partial: bool = False) -> Any:
        """Fail the test unless every selected check ran and passed (a check that could
        not run fails it too, unless ``allow_partial``)."""
        __tracebackhide__ = True
        from bbmap.errors import BBMapError
        from bbmap.verify.api import verify

        try:
            report = verify(path, checks, debug_dirs=self.debug_dirs,
                            allow_partial=allow_partial)
        except BBMapError as e:  # not built, not ELF, unknown check: one line, no traceback
            pytest.fail(f"block map verification failed: {e}", pytrace=False)
        if not report.ok:
            pytest.fail("block map verification failed\n" + report.format(), pytrace=False)
        return report

    def report(self, path: str | os.PathLike, checks: Iterable[str] | None = None, *,
               allow_partial: bool = False) -> Any:
        from bbmap.verify.api import verify

        return verify(path, checks, debug_dirs=self.debug_dirs, allow_partial=allow_partial)

    def profile(self, path: str | os.PathLike,
                perf_paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                functions: Iterable[str] | str | None = None, threshold: float | None = None,
                confidence: float | None = None, allow_inferred: bool = False,
                **annotate_kwargs: Any) -> Any:
        """Fail unless no branch (of ``functions``) is off by more than ``threshold``."""
        __tracebackhide__ = True
        from bbmap.errors import BBMapError
        from bbmap.verify.api import profile_problems

        try:
            rep = self.profile_report(path, perf_paths, functions=functions,
                                      threshold=threshold, confidence=confidence,
                                      **annotate_kwargs)
        except BBMapError as e:
            pytest.fail(f"PGO map verification failed: {e}", pytrace=False)
        problems = profile_problems(rep, allow_inferred=allow_inferred)
        if problems:
            pytest.fail("PGO map does not match the profile\n" + "\n".join(problems)
                        + "\n" + rep.format(top=10), pytrace=False)
        return rep

    def profile_report(self, path: str | os.PathLike,
                       perf_paths: str | os.PathLike | Iterable[str | os.PathLike],
                       **kwargs: Any) -> Any:
        from bbmap.verify.api import verify_profile

        kwargs.setdefault("debug_dirs", self.debug_dirs)
        return verify_profile(path, perf_paths, **kwargs)


@pytest.fixture
def bb_map_verifier() -> BBMapVerifier:
    """Verify block maps of binaries a test built (see this module's docstring)."""
    return BBMapVerifier()
