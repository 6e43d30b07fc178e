"""Why little or nothing mapped: the evidence and the one thing to try.

Users of every peer tool ask for this first (anchors.md §10.1): an empty profile with
"-nan%" tells them nothing.  :func:`diagnose` turns the accounting plus what was seen in
the profiles (build-ids, mapped file names) and in the binary (block map, producer) into
messages that show the evidence, and decides whether the output is usable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.identity import ProfiledFile, go_ids_text
from bbmap.buckets import (
    IN_BLOCK,
    IN_FUNCTION_NO_BLOCK,
    KERNEL,
    OTHER_DSO,
    OTHER_PID,
    OUTSIDE_FUNCTION,
)
from bbmap.buildid import build_ids_match
from bbmap.errors import Diagnostic
from bbmap.options import Status

STATUS_OK, STATUS_PARTIAL, STATUS_NOTHING = Status.OK, Status.PARTIAL, Status.NOTHING_MAPPED


@dataclass
class ProfileEvidence:
    """What one profile adds to the mapping evidence.  A run keeps it as it is (one
    object per profile, merged in canonical order by :meth:`Evidence.absorb`); only an
    aggregate file holds it as JSON (:meth:`to_json`, read back by :meth:`from_json`)."""

    # (filename, build-id) pairs from HEADER_BUILD_ID and MMAP2 records
    profile_build_ids: list[tuple[str, str]] = field(default_factory=list)
    matched_by: set[str] = field(default_factory=set)  # how its mappings matched
    profiled: list[ProfiledFile] = field(default_factory=list)  # files mapped as the binary
    binary_mmaps: int = 0  # executable mappings attributed to the binary
    undecoded_samples: int = 0  # SAMPLE records the reader had to drop
    undecoded_at: tuple[str, str | None, int] | None = None  # where it first said so
    mapping_notes: list[str] = field(default_factory=list)  # the mapping layer's words

    def to_json(self) -> dict:
        return {"profile_build_ids": [list(x) for x in self.profile_build_ids],
                "matched_by": sorted(self.matched_by),
                "profiled": [[p.filename, p.recorded_build_id,
                              list(p.inode) if p.inode is not None else None]
                             for p in self.profiled],
                "binary_mmaps": self.binary_mmaps,
                "undecoded_samples": self.undecoded_samples,
                "mapping_notes": list(self.mapping_notes),
                **({"undecoded_at": list(self.undecoded_at)} if self.undecoded_at else {})}

    @classmethod
    def from_json(cls, d: dict) -> ProfileEvidence | None:
        """The evidence :meth:`to_json` wrote (None for ``{}``: a profile that could not
        be read, or an aggregate written before the evidence was kept)."""
        if not d:
            return None
        return cls(profile_build_ids=[tuple(x) for x in d["profile_build_ids"]],
                   matched_by=set(d["matched_by"]),
                   profiled=[ProfiledFile(fn, bid, tuple(inode) if inode else None)
                             for fn, bid, inode in d["profiled"]],
                   binary_mmaps=d["binary_mmaps"], undecoded_samples=d["undecoded_samples"],
                   undecoded_at=tuple(d["undecoded_at"]) if d.get("undecoded_at") else None,
                   mapping_notes=list(d["mapping_notes"]))


@dataclass
class Evidence:
    binary: str
    binary_build_id: str | None
    has_block_map: bool
    producer: str | None  # .comment text, e.g. "clang version 22.1.8"
    # per profile, (filename, build-id) pairs from HEADER_BUILD_ID and MMAP2 records
    profile_build_ids: list[tuple[str, str]] = field(default_factory=list)
    binary_mmaps: int = 0  # executable mappings attributed to the binary
    name_override: str | None = None
    pid: int | None = None
    hot_no_block: list[tuple[str, int]] = field(default_factory=list)  # functions w/o blocks
    mapping_notes: list[str] = field(default_factory=list)  # the mapping layer's explanation
    undecoded_samples: int = 0  # SAMPLE records the reader had to drop (see its warnings)
    # where the reader first said so: (profile, section, offset)
    undecoded_at: tuple[str, str | None, int] | None = None
    go: Any = None  # the binary's GoInfo (bbmap.binary.go): a Go binary's own identity
    symbols_source: str | None = None  # "symbol table" | ".gopclntab" (a stripped Go binary)
    matched_by: set[str] = field(default_factory=set)  # how the profiles' mappings matched
    # the files the profiles mapped as the binary, and what was found of their build
    profiled: list[ProfiledFile] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)  # the profiles' paths (for messages)
    stripped: str | None = None  # how the binary shows it was stripped (Binary.stripped)
    debug_file: str | None = None  # the debug file found for it (--debug-dir)
    unnamed_functions: int = 0  # functions of the block map no symbol names (fn@ADDRESS)
    functions: int = 0  # functions of the block map

    def absorb(self, pe: ProfileEvidence) -> None:
        """Add one profile's evidence, as reading the profiles in turn would: a file
        mapped as the binary is listed once (its first profile's record of it)."""
        self.profile_build_ids.extend(pe.profile_build_ids)
        self.matched_by.update(pe.matched_by)
        known = {p.filename for p in self.profiled}
        for p in pe.profiled:
            if p.filename not in known:
                known.add(p.filename)
                self.profiled.append(ProfiledFile(p.filename, p.recorded_build_id, p.inode))
        self.binary_mmaps += pe.binary_mmaps
        self.undecoded_samples += pe.undecoded_samples
        if pe.undecoded_at and self.undecoded_at is None:
            self.undecoded_at = pe.undecoded_at
        self.mapping_notes.extend(pe.mapping_notes)


def restore_advice(build_id: str | None) -> str:
    """How to give bbmap back what a strip took: the debug file or the unstripped binary."""
    where = (f" (DIR/.build-id/{build_id[:2]}/{build_id[2:]}.debug, as objcopy "
             "--only-keep-debug writes it before the strip)" if build_id and
             len(build_id) > 2 else "")
    return f"pass --debug-dir DIR with its debug file{where}, or the unstripped binary"


def flag_advice(producer: str | None) -> str:
    """The compiler flag that makes the binary's producer emit a block map."""
    p = producer or ""
    m = re.search(r"clang version (\d+)", p)
    if m:
        v = int(m.group(1))
        if v >= 19:
            return f"rebuild with clang {v} -fbasic-block-address-map"
        if v >= 12:
            return f"rebuild with clang {v} -fbasic-block-sections=labels"
        return f"clang {v} predates the block map; use clang >= 12 (-fbasic-block-sections=labels)"
    if "GCC" in p:
        return ("GCC does not emit .llvm_bb_addr_map; rebuild with clang >= 19 "
                "-fbasic-block-address-map (clang 12-18: -fbasic-block-sections=labels)")
    return ("rebuild with clang >= 19 -fbasic-block-address-map "
            "(clang 12-18: -fbasic-block-sections=labels)")


def _top(d: dict[str, int], n: int = 5) -> str:
    items = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    s = ", ".join(f"{k} ({v})" for k, v in items)
    return s + (f", and {len(d) - n} more" if len(d) > n else "")


def diagnose(acct: Accounting, ev: Evidence) -> tuple[str, list[Diagnostic]]:
    """Return (status, messages).  ``nothing_mapped`` means the per-block output is empty.
    Besides what :func:`_diagnose` finds, the identity of the profiled build where
    build-ids cannot tell it (:func:`identity_findings`)."""
    status, out = _diagnose(acct, ev)
    found = identity_findings(ev) if acct.total_samples or acct.total_branches else []
    if any(d.severity == "error" for d in found) and status == STATUS_OK:
        status = STATUS_PARTIAL
    return status, found + out


def _go_ids(ev: Evidence, filename: str, name: str) -> str:
    """``; Go build ids: ...`` for a mismatch message about ``filename``."""
    if ev.go is None:
        return ""
    pf = next((p for p in ev.profiled if p.filename == filename), ProfiledFile(filename))
    text = go_ids_text(pf, name, ev.go.build_id)
    return f"; {text}" if text else ""


def _compare_go(a: str | None, b: str | None) -> str:
    """What two Go build ids say about the builds (bbmap.binary.go's words, whose module
    is imported only when a Go build id is there to compare)."""
    from bbmap.binary.go import compare_go_build_ids

    return compare_go_build_ids(a, b)


def identity_findings(ev: Evidence) -> list[Diagnostic]:
    """Without GNU build-ids (a plain ``go build``): whether the binary given is the build
    the profile mapped, from the file at the recorded path, the inode MMAP2 recorded and
    both Go build ids; and, when matching went by path only, the flag that makes it exact."""
    out: list[Diagnostic] = []
    name = os.path.basename(ev.binary)
    go_id = ev.go.build_id if ev.go is not None else None
    for pf in ev.profiled:
        if pf.recorded_build_id or pf.binary_is_mapped_file:
            continue  # build-ids decide (see _diagnose), or it is the very file mapped
        p = pf.filename
        if pf.found_at and not pf.path_is_the_binary and (
                pf.go_build_id != go_id or pf.build_id != ev.binary_build_id):
            what = (f"Go build id {pf.go_build_id or '(none)'} there, {go_id or '(none)'} in "
                    f"{name}: {_compare_go(pf.go_build_id, go_id)}"
                    if pf.go_build_id or go_id else "another file")
            out.append(Diagnostic(
                f"{name} is not the build that was profiled: the profile mapped {p}, which is "
                f"still that file (the inode the MMAP2 record holds), and it is another build "
                f"({what}); samples were mapped by path, so their functions are wrong; pass "
                f"{p} instead", severity="error"))
        elif pf.inode_now == "replaced" and pf.path_is_the_binary:
            out.append(Diagnostic(
                f"{p} was replaced after the profile was recorded (its inode differs from the "
                f"one the MMAP2 record holds): if it was rebuilt, the samples belong to the "
                f"earlier build, whose identity the profile does not hold"
                + (f" (Go build ids never reach perf.data; {name} is now {go_id})"
                   if go_id else ""), severity="warning"))
        elif (not pf.path_is_the_binary and pf.inode_now is None
              and (pf.path_go_build_id or pf.path_build_id)
              and (pf.path_go_build_id, pf.path_build_id) != (go_id, ev.binary_build_id)):
            ids = (f"Go build id {pf.path_go_build_id or '(none)'} there, {go_id or '(none)'} "
                   f"in {name}: {_compare_go(pf.path_go_build_id, go_id)}"
                   if pf.path_go_build_id or go_id else
                   f"build-id {pf.path_build_id or '(none)'} there")
            out.append(Diagnostic(
                f"the profile mapped {p}, which on disk is now another build than {name} "
                f"({ids}): either {p} was rebuilt after recording, or {name} is not the "
                "profiled build", severity="warning"))
    by_path = ev.matched_by & {"path", "basename"}
    unrecorded = [pf for pf in ev.profiled if not pf.recorded_build_id]
    if by_path and unrecorded and not ev.binary_build_id:
        from bbmap.binary.go import exact_match_flag

        flag = exact_match_flag(ev.go) if ev.go is not None else \
            "-Wl,--build-id (GNU ld, lld)"
        ident = f" (Go build id {go_id})" if go_id else ""
        out.append(Diagnostic(
            f"{name}{ident} matched the profile by {'/'.join(sorted(by_path))} only: neither "
            f"has a GNU build-id, the only identity perf records, so any other build "
            f"{'at the same path' if by_path == {'path'} else f'named {name}'} would match "
            f"too; link with {flag} to make matching exact",
            severity="warning"))
    return out


class _Findings:
    """What one diagnosis has found so far: the figures every check reads, and the
    messages in the order the checks made them."""

    def __init__(self, acct: Accounting, ev: Evidence) -> None:
        self.acct, self.ev = acct, ev
        self.out: list[Diagnostic] = []
        self.name = os.path.basename(ev.binary)
        self.total = acct.total_samples
        self.in_block = int(acct.samples[IN_BLOCK])
        self.in_binary = int(acct.samples[:OUTSIDE_FUNCTION + 1].sum())
        self.kernel = int(acct.samples[KERNEL])
        # LBR records in blocks are a result even when no IP sample is (e.g. every sample
        # interrupted the kernel): then the IP-only verdicts are warnings, not failures
        self.lbr_used = int(acct.branches[IN_BLOCK]) if acct.total_branches else 0
        names = {self.name} | ({os.path.basename(ev.name_override)} if ev.name_override
                               else set())
        self.names = names
        self.mismatched = [(f, b) for f, b in ev.profile_build_ids
                           if os.path.basename(f) in names and ev.binary_build_id
                           and not build_ids_match(b, ev.binary_build_id)]

    def err(self, msg: str) -> bool:
        """Record a fatal finding (naming the binary unless the message does already)."""
        self.out.append(Diagnostic(msg, severity="error",
                                   file=None if self.ev.binary in msg else self.ev.binary))
        return True

    def warn(self, msg: str) -> None:
        self.out.append(Diagnostic(msg, severity="warning"))

    def hot_no_block(self, none: str = "none") -> str:
        return _top(dict(self.ev.hot_no_block)) if self.ev.hot_no_block else none


def _empty_profile(f: _Findings) -> bool:
    """Nothing decoded, no samples, or only kernel samples: a fatal finding (True)."""
    acct, ev = f.acct, f.ev
    if f.total == 0 and acct.total_branches == 0 and ev.undecoded_samples:
        where = ev.undecoded_at or (", ".join(ev.profiles) or None, None, None)
        f.out.append(Diagnostic(
            f"none of the {ev.undecoded_samples} SAMPLE records could be decoded: they do "
            "not fit the event attrs the header declares (a damaged header?); the reader's "
            "warnings say which" + (" (the first fault is here)" if ev.undecoded_at else ""),
            severity="error", file=where[0], section=where[1], offset=where[2]))
        return True
    if f.total == 0 and acct.total_branches == 0:
        f.out.append(Diagnostic("the profile has no samples", severity="error",
                                file=", ".join(ev.profiles) or None))
        return True
    if f.lbr_used and f.in_block == 0 and f.total:
        f.warn(f"none of the {f.total} IP samples is in a basic block of {f.name} (kernel "
               f"{f.kernel}, other DSOs {int(acct.samples[OTHER_DSO])}); "
               f"the block counts come from the {f.lbr_used} LBR records that are")
    if f.total and f.kernel == f.total and not f.lbr_used:
        return f.err(f"all {f.total} samples are kernel samples: nothing ran in user space "
                     "while recording; record user code, e.g. 'perf record -e cpu-clock:u "
                     "-- ./prog'")
    return False


def _wrong_process_or_build(f: _Findings) -> bool:
    """Build-id mismatches, an unchecked build, a --pid that leaves nothing."""
    ev, name = f.ev, f.name
    if f.mismatched and f.in_binary == 0 and not f.lbr_used:
        fn, b = f.mismatched[0]
        return f.err(f"build-id mismatch: the profile recorded {fn} with build-id {b}, but "
                     f"{ev.binary} has build-id {ev.binary_build_id}{_go_ids(ev, fn, name)}; "
                     "profile the same build (or pass the binary that was profiled)")
    if f.mismatched:
        fn, b = f.mismatched[0]
        f.warn(f"build-id mismatch for {fn}: profile {b}, binary {ev.binary_build_id}"
               f"{_go_ids(ev, fn, name)}; samples were mapped by name and may land in the "
               "wrong blocks")
    unchecked = [(fn, b) for fn, b in ev.profile_build_ids
                 if os.path.basename(fn) in f.names and not ev.binary_build_id]
    if unchecked and f.in_binary:
        fn, b = unchecked[0]
        f.warn(f"{ev.binary} has no build-id, so it cannot be checked against the build-id "
               f"{b} the profile recorded for {fn}; samples were mapped by name")
    other_pid = int(f.acct.samples[OTHER_PID])
    if f.in_binary == 0 and ev.pid is not None and other_pid and not f.lbr_used:
        pids = "; ".join(ev.mapping_notes) or f"drop --pid to see the pids that map {name}"
        return f.err(f"--pid {ev.pid} leaves nothing: no sample of pid {ev.pid} is in "
                     f"{name}, and {other_pid} samples of other processes were excluded "
                     f"({pids})")
    return False


def _binary_not_mapped(f: _Findings) -> bool:
    """The binary never mapped: name the DSOs that got samples."""
    ev = f.ev
    if f.in_binary or ev.binary_mmaps or f.lbr_used:
        return False
    seen = _top(f.acct.dso_samples) if f.acct.dso_samples else "none"
    hint = (f"pass --name with the mapped file's name if {f.name} was renamed"
            if not ev.name_override else f"--name {ev.name_override} matched nothing")
    if ev.pid is not None:
        hint += f"; --pid {ev.pid} may exclude it"
    notes = f" [{'; '.join(ev.mapping_notes)}]" if ev.mapping_notes else ""
    return f.err(f"{f.name} never appears in the profile's mmaps; DSOs that got samples: "
                 f"{seen} (kernel {f.kernel}); {hint}{notes}")


def _no_block_map(f: _Findings) -> bool:
    """No .llvm_bb_addr_map (Go, stripped, or built without it); unnamed functions."""
    ev, name, in_binary = f.ev, f.name, f.in_binary
    if not ev.has_block_map and ev.go is not None:
        how = ("from .gopclntab, the Go runtime's function table (the binary is stripped)"
               if ev.symbols_source == ".gopclntab" else "by symbol, as perf report does")
        from bbmap.binary.go import no_block_map_reason

        return f.err(f"{name} has no basic-block address map (.llvm_bb_addr_map): "
                     f"{no_block_map_reason(ev.go)}; the {in_binary} samples in {name} are "
                     f"counted per function ({how}) and those counts are valid: "
                     f"{f.hot_no_block()}")
    if not ev.has_block_map and ev.stripped:
        prod = f", built by {ev.producer}" if ev.producer else ""
        dbg = (f"; its debug file {ev.debug_file} has no map either" if ev.debug_file
               else "")
        return f.err(f"{name} was stripped ({ev.stripped}{prod}) and has no basic-block "
                     f"address map (.llvm_bb_addr_map): {in_binary} samples landed in the "
                     f"binary but none can be put in a block; llvm-strip removes the map with "
                     f"the symbols: {restore_advice(ev.binary_build_id)}{dbg}; if it was "
                     f"built without a map, {flag_advice(ev.producer)}")
    if not ev.has_block_map:
        prod = f" (built by {ev.producer})" if ev.producer else ""
        return f.err(f"{name} has no basic-block address map (.llvm_bb_addr_map){prod}: "
                     f"{in_binary} samples landed in the binary but none can be put in a "
                     f"block; {flag_advice(ev.producer)}")
    if ev.stripped and ev.unnamed_functions and not ev.debug_file:
        f.warn(f"{name} was stripped ({ev.stripped}): {ev.unnamed_functions} of "
               f"{ev.functions} functions of its block map have no name and show as "
               f"fn@ADDRESS; to name them, {restore_advice(ev.binary_build_id)}")
    return False


def _none_in_blocks(f: _Findings) -> bool:
    """Samples in the binary, none in a block (or none in the binary at all)."""
    if f.lbr_used:
        return False
    acct, name, in_binary = f.acct, f.name, f.in_binary
    if in_binary == 0:
        return f.err(f"none of the {f.total} samples landed in {name} (other DSOs: "
                     f"{_top(acct.dso_samples) or 'none'}; kernel {f.kernel})")
    nb = int(acct.samples[IN_FUNCTION_NO_BLOCK])
    if f.in_block == 0 and nb == 0:
        why = ("the build-id mismatch says this is not the binary that was profiled"
               if f.mismatched else "the mapping of the binary is probably wrong (is this "
               "the build that was profiled?)")
        return f.err(f"all {in_binary} samples that landed in {name} are outside every "
                     f"function (PLT, stubs, gaps), none in a basic block: {why}")
    if f.in_block == 0:
        return f.err(f"{in_binary} samples landed in {name} but none in a basic block "
                     f"({nb} in functions without block-map entries: {f.hot_no_block()}); "
                     f"those functions need "
                     f"{flag_advice(f.ev.producer).replace('rebuild with ', '')}")
    return False


def _usable_status(f: _Findings) -> Status:
    """OK or PARTIAL, with the warnings that make a usable result partial."""
    acct, name, in_binary = f.acct, f.name, f.in_binary
    status = STATUS_PARTIAL if f.mismatched or (f.lbr_used and f.in_block == 0) else STATUS_OK
    nb = int(acct.samples[IN_FUNCTION_NO_BLOCK])
    if nb and nb * 10 >= in_binary:
        fns = f.hot_no_block("")
        f.warn(f"{nb} of {in_binary} samples in {name} are in functions without block-map "
               f"entries{': ' + fns if fns else ''}")
        status = STATUS_PARTIAL
    if acct.total_branches:
        if int(acct.branches[IN_BLOCK]) == 0:
            f.warn(f"none of the {acct.total_branches} LBR records has both ends in blocks "
                   f"of {name}; block counts come from IP samples only")
            status = STATUS_PARTIAL
        ranges = acct.range_reasons()
        if acct.total_ranges and ranges["valid"] * 2 < acct.total_ranges:
            bad = {k: v for k, v in ranges.items() if k != "valid" and v}
            f.warn(f"only {ranges['valid']} of {acct.total_ranges} fall-through ranges are "
                   f"valid ({_top(bad)})")
    if int(acct.samples[OTHER_DSO]) > in_binary:
        f.warn(f"most samples are in other DSOs: {_top(acct.dso_samples)}")
    for note in f.ev.mapping_notes:  # merged profiles: one holding no mapping of the binary
        f.warn(f"{note} (none of this profile's samples can be in {name})")
        status = STATUS_PARTIAL
    return status


# the fatal checks, in the order a user would want them answered
_CHECKS = (_empty_profile, _wrong_process_or_build, _binary_not_mapped, _no_block_map,
           _none_in_blocks)


def _diagnose(acct: Accounting, ev: Evidence) -> tuple[Status, list[Diagnostic]]:
    """The diagnosis proper (see :func:`diagnose`): the first check that finds nothing
    usable decides; otherwise the result is OK or partial."""
    f = _Findings(acct, ev)
    for check in _CHECKS:
        if check(f):
            return STATUS_NOTHING, f.out
    return _usable_status(f), f.out
