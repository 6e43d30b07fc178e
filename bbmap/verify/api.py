"""The Python face of ``bbmap verify``: for compiler test suites and the CLI.

``verify(path)`` runs the selected checks and returns a :class:`VerifyReport`;
``assert_valid_bb_map(path)`` raises ``AssertionError`` whose message lists each
finding on its own line, so a failing compiler test reads like a diagnostic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bbmap.errors import BBMapError
from bbmap.verify.checks import CHECKS
from bbmap.verify.context import Finding, VerifyContext
from bbmap.verify.coverage import Coverage

MAX_LISTED = 50  # findings per check shown by format(); JSON has them all


def select_checks(checks: Iterable[str] | None) -> list[str]:
    """Validate check names (order of the registry); None means all."""
    if checks is None:
        return list(CHECKS)
    names = [checks] if isinstance(checks, str) else list(checks)  # one name, not letters
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise BBMapError(f"unknown check {', '.join(unknown)}; known checks: "
                         f"{', '.join(CHECKS)}")
    return [n for n in CHECKS if n in names]


@dataclass
class VerifyReport:
    """What was checked in one binary, what failed, and the coverage of its code."""

    path: str
    checks: list[str]
    findings: list[Finding] = field(default_factory=list)
    coverage: Coverage | None = None
    stats: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why it could not run
    notes: list[str] = field(default_factory=list)  # what was not checked, and why

    explicit: bool = False  # the caller named the checks: one that cannot run is a failure

    @property
    def ok(self) -> bool:
        return not self.findings and not (self.explicit and self.skipped)

    @property
    def failed_checks(self) -> list[str]:
        seen = {f.check for f in self.findings}
        return [c for c in self.checks if c in seen]

    def by_check(self) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {c: [] for c in self.checks}
        for f in self.findings:
            out.setdefault(f.check, []).append(f)
        return out

    def format(self, *, max_listed: int = MAX_LISTED) -> str:
        """Readable multi-line summary: one line per finding, grouped by check."""
        s = self.stats
        ran = len(self.checks) - len(self.skipped)
        counted = f"{ran} of {len(self.checks)} checks run" if self.skipped else \
            f"{len(self.checks)} checks"
        head = (f"{self.path}: {'OK' if self.ok else 'FAILED'} "
                f"({s.get('functions', 0)} functions, {s.get('ranges', 0)} ranges, "
                f"{s.get('blocks', 0)} blocks; {counted}")
        if self.ok:
            head += ")"
        elif self.explicit and self.skipped:
            head += f", {len(self.failed_checks)} failed, {len(self.skipped)} could not run)"
        else:
            head += f", {len(self.failed_checks)} failed)"
        lines = [head]
        for name, found in self.by_check().items():
            if not found:
                continue
            lines.append(f"  {name}: {len(found)} finding(s) - {CHECKS[name].rule}")
            for f in found[:max_listed]:
                lines.append(f"    {f.where() or '-'}: {f.message}")
            if len(found) > max_listed:
                lines.append(f"    ... and {len(found) - max_listed} more")
        for name, why in self.skipped.items():
            lines.append(f"  {name}: not run - {why}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path, "ok": self.ok, "checks": self.checks, "explicit": self.explicit,
            "failed_checks": self.failed_checks, "stats": self.stats,
            "skipped": self.skipped, "notes": self.notes,
            "findings": [f.to_json() for f in self.findings],
            "coverage": self.coverage.to_json() if self.coverage is not None else None,
        }


def verify(path: str | os.PathLike, checks: Iterable[str] | None = None, *,
           debug_dirs: Iterable[str | os.PathLike] = (), binary: Any = None) -> VerifyReport:
    """Run the selected checks (all by default) on one ELF file.

    Raises :class:`BBMapError` when the file cannot be read as ELF at all; every
    problem in the block map itself becomes a finding.
    """
    names = select_checks(checks)
    if binary is None:
        from bbmap.binary import load_binary

        binary = load_binary(os.fspath(path), debug_dirs=tuple(debug_dirs))
    ctx = VerifyContext(binary)
    m = ctx.m
    report = VerifyReport(os.fspath(path), names, explicit=checks is not None)
    report.stats = {"functions": m.num_functions, "ranges": m.num_ranges,
                    "blocks": m.num_blocks, "symbols": len(binary.symbols),
                    "exec_sections": len(ctx.exec_sections)}
    for name in names:
        chk = CHECKS[name]
        try:
            report.findings.extend(chk.fn(ctx))
        except BBMapError as e:
            if chk.group != "instructions":
                raise
            report.skipped[name] = str(e)
    if "coverage" in names:
        report.coverage = ctx.cache.get("coverage")
    else:
        from bbmap.verify.coverage import compute_coverage

        try:
            report.coverage = compute_coverage(ctx)
        except BBMapError as e:
            report.skipped["coverage"] = str(e)
    report.notes.extend(ctx.notes)
    code = ctx.__dict__.get("code")  # only if an instruction check decoded it
    if code is not None:
        report.stats["instructions"] = len(code.start)
        no_code = int(m.num_ranges - code.decoded.sum())
        if no_code:
            report.notes.append(f"{no_code} range(s) have no code bytes in this file (NOBITS "
                                "or unknown section): instruction checks skipped them")
    return report


def assert_valid_bb_map(path: str | os.PathLike, checks: Iterable[str] | None = None, *,
                        debug_dirs: Iterable[str | os.PathLike] = ()) -> VerifyReport:
    """Raise AssertionError (with every finding listed) unless all selected checks pass."""
    report = verify(path, checks, debug_dirs=debug_dirs)
    if not report.ok:
        raise AssertionError("block map verification failed\n" + report.format())
    return report
