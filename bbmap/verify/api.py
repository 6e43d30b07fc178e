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

from bbmap.errors import BBMapError, UsageError
from bbmap.options import Status
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
    stripped: str | None = None  # the binary has no symbol table: what to pass instead

    explicit: bool = False  # the caller named the checks
    # A check that could not run checked nothing: the report is not OK (a gate must not
    # pass what it did not check) unless the caller accepts a partial verification.
    allow_partial: bool = False

    @property
    def not_run(self) -> list[str]:
        """Selected checks that could not run (a damaged section, another machine)."""
        return [c for c in self.checks if c in self.skipped]

    @property
    def ok(self) -> bool:
        return not self.findings and (self.allow_partial or not self.not_run)

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
        elif self.not_run:
            head += f", {len(self.failed_checks)} failed, {len(self.not_run)} could not run)"
        else:
            head += f", {len(self.failed_checks)} failed)"
        lines = [head]
        if self.stripped:
            lines.append(f"  stripped: {self.stripped}")
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
            "allow_partial": self.allow_partial, "not_run": self.not_run,
            "failed_checks": self.failed_checks, "stats": self.stats,
            "skipped": self.skipped, "notes": self.notes,
            **({"stripped": self.stripped} if self.stripped else {}),
            "findings": [f.to_json() for f in self.findings],
            "coverage": self.coverage.to_json() if self.coverage is not None else None,
        }


def stripped_note(binary: Any) -> str | None:
    """What to say when ``binary`` has no ``.symtab`` and no debug file was found for it:
    every function-symbol finding follows from that, and ``--debug-dir`` fixes it."""
    from bbmap.formats.elf import SHT_SYMTAB

    if any(s.sh_type == SHT_SYMTAB for s in getattr(binary, "sections", [])):
        return None
    try:
        found = binary.debug_file() is not None
    except BBMapError:
        found = False
    if found:
        return None
    bid = getattr(binary, "build_id", None)
    where = (f" (looked up by build-id {bid} as .build-id/{bid[:2]}/{bid[2:]}.debug)"
             if bid else " (it has no build-id, so name the debug file's directory)")
    return (f"{os.path.basename(str(binary.path))} is stripped: no .symtab and no debug "
            f"file found{where}; function checks need its symbols: pass --debug-dir DIR "
            "holding its debug file (objcopy --only-keep-debug), or verify the unstripped "
            "build")


def verify(path: str | os.PathLike, checks: Iterable[str] | None = None, *,
           debug_dirs: Iterable[str | os.PathLike] = (), binary: Any = None,
           allow_partial: bool = False) -> VerifyReport:
    """Run the selected checks (all by default) on one ELF file.

    Raises :class:`BBMapError` when the file cannot be read as ELF at all; every
    problem in the block map itself becomes a finding.  A selected check that cannot run
    (its section damaged, instructions of a machine bbmap does not decode) makes the
    report not OK unless ``allow_partial``.
    """
    names = select_checks(checks)
    if binary is None:
        from bbmap.binary import load_binary

        binary = load_binary(os.fspath(path), debug_dirs=tuple(debug_dirs))
    ctx = VerifyContext(binary)
    m = ctx.m
    report = VerifyReport(os.fspath(path), names, explicit=checks is not None,
                          allow_partial=allow_partial)
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
    report.stripped = stripped_note(binary)
    code = ctx.__dict__.get("code")  # only if an instruction check decoded it
    if code is not None:
        report.stats["instructions"] = len(code.start)
        no_code = int(m.num_ranges - code.decoded.sum())
        if no_code:
            report.notes.append(f"{no_code} range(s) have no code bytes in this file (NOBITS "
                                "or unknown section): instruction checks skipped them")
    return report


def assert_valid_bb_map(path: str | os.PathLike, checks: Iterable[str] | None = None, *,
                        debug_dirs: Iterable[str | os.PathLike] = (),
                        allow_partial: bool = False) -> VerifyReport:
    """Raise AssertionError (with every finding listed) unless all selected checks pass;
    a check that could not run fails it too, unless ``allow_partial``."""
    report = verify(path, checks, debug_dirs=debug_dirs, allow_partial=allow_partial)
    if not report.ok:
        raise AssertionError("block map verification failed\n" + report.format())
    return report


# ---------------------------------------------------------------- verify --profile
def judge_profile(measured: Any, *, binary: str = "", profiles: Iterable[str] = (),
                  threshold: float | None = None, freq_factor: float | None = None,
                  confidence: float | None = None, functions: Iterable[str] | None = None,
                  scale_lbr: bool = True) -> Any:
    """Hold the PGO analysis map against already-measured counts.

    ``measured`` is an ``AnnotateResult`` (or anything with its block map, ``block_count``
    and edge columns: merged aggregates need no perf.data).  Its ``count_source``
    (``"lbr"``, ``"inferred"``, ``"none"``) says where the counts came from; results
    without it are taken as LBR when ``has_lbr`` is set.  Returns a
    :class:`bbmap.verify.profile_report.ProfileReport`.
    """
    from bbmap.verify.profile import Options, compare, lbr_range_scale
    from bbmap.verify.profile_report import ProfileReport

    opt = _options(Options, threshold, freq_factor, confidence)
    source = getattr(measured, "count_source", None)
    if source is None:
        source = "lbr" if getattr(measured, "has_lbr", False) else "none"
    acct = getattr(measured, "accounting", None)
    infos = getattr(measured, "profiles", []) or []
    rep = ProfileReport(
        binary=binary or str(getattr(measured, "binary", "")),
        profiles=sorted(profiles) or sorted(str(getattr(p, "path", p)) for p in infos),
        count_source=source, options=opt, comparison=None,
        profile_samples=int(getattr(acct, "total_samples", 0) or 0),
        branch_records=int(getattr(acct, "total_branches", 0) or 0),
        functions=None if functions is None else (
            [functions] if isinstance(functions, str) else list(functions)))
    for d in getattr(measured, "warnings", []) or []:
        if getattr(d, "severity", "") == "error":
            rep.errors.append(str(d))
    m = measured.block_map
    from bbmap.formats.bbaddrmap import FEAT_BB_FREQ, FEAT_BR_PROB, FEAT_FUNC_ENTRY_COUNT

    pgo = FEAT_BB_FREQ | FEAT_BR_PROB | FEAT_FUNC_ENTRY_COUNT
    if not m.num_functions or not (m.func_feature & pgo).any():
        rep.errors.append(f"{rep.binary}: the block map has no PGO analysis map (build with "
                          "-mllvm -pgo-analysis-map=func-entry-count,bb-freq,br-prob)")
        return rep
    if source == "none":
        rep.errors.append(f"{', '.join(rep.profiles)}: the profile has no branch stacks "
                          "(LBR) and no inferred counts: "
                          "branch ratios and block counts cannot be measured (record with "
                          "perf record -b, or use IP-only inference)")
        return rep
    if getattr(measured, "status", Status.OK) == Status.NOTHING_MAPPED:
        rep.errors.append(f"{rep.binary}: no sample of the profile(s) mapped to a block "
                          "of the binary")
        return rep
    scale = lbr_range_scale(acct) if (scale_lbr and source == "lbr" and acct) else 1.0
    rep.lbr_scale = scale
    rep.comparison = compare(measured, opt, count_source=source, lbr_scale=scale)
    rep.notes.extend(rep.comparison.notes)
    if source == "inferred":
        rep.notes.append("counts are INFERRED from IP samples (no branch stacks): intervals "
                         "count the IP samples behind each estimate but not the errors of "
                         "the inference's cost model, so verdicts are indicative only "
                         "(spec/verify.md); record with LBR (perf record -b) to be sure")
    if rep.functions is not None:
        known = set(rep._names()) | {n for n in (m.func_name or []) if n}
        missing = [f for f in rep.functions if f not in known]
        if missing:
            rep.errors.append(f"no function named {', '.join(missing)} in the block map")
    return rep


def verify_profile(binary: str | os.PathLike, perf_paths: Iterable[str | os.PathLike] | str,
                   *, threshold: float | None = None, freq_factor: float | None = None,
                   confidence: float | None = None, functions: Iterable[str] | None = None,
                   **annotate_kwargs: Any) -> Any:
    """``bbmap verify BINARY --profile PERF_DATA...``: annotate the profiles, then judge
    every PGO belief of the binary's map (:func:`judge_profile`)."""
    from bbmap.run import annotate

    paths = [os.fspath(perf_paths)] if isinstance(perf_paths, (str, os.PathLike)) else [
        os.fspath(p) for p in perf_paths]
    annotate_kwargs.setdefault("cluster_stats", True)
    result = annotate(paths, os.fspath(binary), **annotate_kwargs)
    return judge_profile(result, binary=os.fspath(binary), profiles=paths,
                         threshold=threshold, freq_factor=freq_factor,
                         confidence=confidence, functions=functions)


def assert_pgo_map_matches(binary: str | os.PathLike,
                           perf_paths: Iterable[str | os.PathLike] | str, *,
                           functions: Iterable[str] | None = None,
                           threshold: float | None = None, confidence: float | None = None,
                           allow_inferred: bool = False, **annotate_kwargs: Any) -> Any:
    """Raise AssertionError unless no branch (of ``functions``, default all) is off by more
    than ``threshold``: every mismatched branch is listed with its block IDs and numbers.
    Unknown branches (too few samples) do not fail; inputs that cannot be judged do, and so
    do IP-only profiles unless ``allow_inferred`` (their counts are inferred, indicative)."""
    rep = verify_profile(binary, perf_paths, threshold=threshold, confidence=confidence,
                         functions=functions, **annotate_kwargs)
    problems = profile_problems(rep, allow_inferred=allow_inferred)
    if problems:
        raise AssertionError("PGO map does not match the profile\n" + "\n".join(problems))
    return rep


def profile_problems(rep: Any, *, allow_inferred: bool = False) -> list[str]:
    """The lines an assertion prints: errors, then each mismatched branch."""
    out = [f"  error: {e}" for e in rep.errors]
    if rep.count_source == "inferred" and not allow_inferred:
        out.append("  error: the profile has no branch stacks; its counts are inferred from "
                   "IP samples and too inexact to assert on (record with perf record -b, or "
                   "pass allow_inferred=True)")
    if rep.comparison is None and not out:
        out.append("  error: nothing was judged")
    for r in rep.mismatched_branches():
        worst = max(r["successors"], key=lambda x: abs((x["measured"] or 0) - x["believed"]))
        out.append(f"  {r['function']} block {r['block']} -> {worst['id']}: believed "
                   f"{worst['believed']:.3f}, measured {worst['measured']:.3f} "
                   f"[{worst['interval'][0]:.3f}, {worst['interval'][1]:.3f}] over "
                   f"{r['executions']:.0f} executions"
                   + (" (post-link CFG)" if r["source"] == "postlink" else ""))
    return out


def _options(cls: Any, threshold: float | None, freq_factor: float | None,
             confidence: float | None) -> Any:
    kw = {k: v for k, v in (("threshold", threshold), ("freq_factor", freq_factor),
                            ("confidence", confidence)) if v is not None}
    try:
        return cls(**kw)
    except ValueError as e:
        raise UsageError(str(e)) from None
