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

from bbmap.aggregate.accounting import Accounting
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

STATUS_OK = "ok"
STATUS_PARTIAL = "partial"
STATUS_NOTHING = "nothing_mapped"


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
    """Return (status, messages).  ``nothing_mapped`` means the per-block output is empty."""
    out: list[Diagnostic] = []
    name = os.path.basename(ev.binary)
    total = acct.total_samples
    in_block = int(acct.samples[IN_BLOCK])
    in_binary = int(acct.samples[:OUTSIDE_FUNCTION + 1].sum())

    def err(msg: str) -> None:
        out.append(Diagnostic(msg, severity="error"))

    def warn(msg: str) -> None:
        out.append(Diagnostic(msg, severity="warning"))

    if total == 0 and acct.total_branches == 0 and ev.undecoded_samples:
        err(f"none of the {ev.undecoded_samples} SAMPLE records could be decoded: they do "
            "not fit the event attrs the header declares (a damaged header?); the reader's "
            "warnings say which and where")
        return STATUS_NOTHING, out
    if total == 0 and acct.total_branches == 0:
        err("the profile has no samples")
        return STATUS_NOTHING, out

    # LBR records in blocks are a result even when no IP sample is (e.g. every sample
    # interrupted the kernel): then the IP-only verdicts below are warnings, not failures
    lbr_used = int(acct.branches[IN_BLOCK]) if acct.total_branches else 0
    if lbr_used and in_block == 0 and total:
        warn(f"none of the {total} IP samples is in a basic block of {name} (kernel "
             f"{int(acct.samples[KERNEL])}, other DSOs {int(acct.samples[OTHER_DSO])}); "
             f"the block counts come from the {lbr_used} LBR records that are")

    if total and int(acct.samples[KERNEL]) == total and not lbr_used:
        err(f"all {total} samples are kernel samples: nothing ran in user space while "
            "recording; record user code, e.g. 'perf record -e cpu-clock:u -- ./prog'")
        return STATUS_NOTHING, out

    names = {name} | ({os.path.basename(ev.name_override)} if ev.name_override else set())
    mismatched = [(f, b) for f, b in ev.profile_build_ids
                  if os.path.basename(f) in names and ev.binary_build_id
                  and not build_ids_match(b, ev.binary_build_id)]
    if mismatched and in_binary == 0 and not lbr_used:
        f, b = mismatched[0]
        err(f"build-id mismatch: the profile recorded {f} with build-id {b}, but "
            f"{ev.binary} has build-id {ev.binary_build_id}; profile the same build "
            "(or pass the binary that was profiled)")
        return STATUS_NOTHING, out
    if mismatched:
        f, b = mismatched[0]
        warn(f"build-id mismatch for {f}: profile {b}, binary {ev.binary_build_id}; "
             "samples were mapped by name and may land in the wrong blocks")
    unchecked = [(f, b) for f, b in ev.profile_build_ids
                 if os.path.basename(f) in names and not ev.binary_build_id]
    if unchecked and in_binary:
        f, b = unchecked[0]
        warn(f"{ev.binary} has no build-id, so it cannot be checked against the build-id "
             f"{b} the profile recorded for {f}; samples were mapped by name")

    other_pid = int(acct.samples[OTHER_PID])
    if in_binary == 0 and ev.pid is not None and other_pid and not lbr_used:
        pids = "; ".join(ev.mapping_notes) or f"drop --pid to see the pids that map {name}"
        err(f"--pid {ev.pid} leaves nothing: no sample of pid {ev.pid} is in {name}, and "
            f"{other_pid} samples of other processes were excluded ({pids})")
        return STATUS_NOTHING, out

    if in_binary == 0 and ev.binary_mmaps == 0 and not lbr_used:
        seen = _top(acct.dso_samples) if acct.dso_samples else "none"
        hint = (f"pass --name with the mapped file's name if {name} was renamed"
                if not ev.name_override else f"--name {ev.name_override} matched nothing")
        if ev.pid is not None:
            hint += f"; --pid {ev.pid} may exclude it"
        notes = f" [{'; '.join(ev.mapping_notes)}]" if ev.mapping_notes else ""
        err(f"{name} never appears in the profile's mmaps; DSOs that got samples: {seen} "
            f"(kernel {int(acct.samples[KERNEL])}); {hint}{notes}")
        return STATUS_NOTHING, out

    if not ev.has_block_map:
        prod = f" (built by {ev.producer})" if ev.producer else ""
        err(f"{name} has no basic-block address map (.llvm_bb_addr_map){prod}: "
            f"{in_binary} samples landed in the binary but none can be put in a block; "
            f"{flag_advice(ev.producer)}")
        return STATUS_NOTHING, out

    if in_binary == 0 and not lbr_used:
        err(f"none of the {total} samples landed in {name} (other DSOs: "
            f"{_top(acct.dso_samples) or 'none'}; kernel {int(acct.samples[KERNEL])})")
        return STATUS_NOTHING, out

    if in_block == 0 and int(acct.samples[IN_FUNCTION_NO_BLOCK]) == 0 and not lbr_used:
        why = ("the build-id mismatch says this is not the binary that was profiled"
               if mismatched else "the mapping of the binary is probably wrong (is this "
               "the build that was profiled?)")
        err(f"all {in_binary} samples that landed in {name} are outside every function "
            f"(PLT, stubs, gaps), none in a basic block: {why}")
        return STATUS_NOTHING, out

    if in_block == 0 and not lbr_used:
        nb = int(acct.samples[IN_FUNCTION_NO_BLOCK])
        fns = _top(dict(ev.hot_no_block)) if ev.hot_no_block else "none"
        err(f"{in_binary} samples landed in {name} but none in a basic block "
            f"({nb} in functions without block-map entries: {fns}); "
            f"those functions need {flag_advice(ev.producer).replace('rebuild with ', '')}")
        return STATUS_NOTHING, out

    status = STATUS_PARTIAL if mismatched or (lbr_used and in_block == 0) else STATUS_OK
    nb = int(acct.samples[IN_FUNCTION_NO_BLOCK])
    if nb and nb * 10 >= in_binary:
        fns = _top(dict(ev.hot_no_block)) if ev.hot_no_block else ""
        warn(f"{nb} of {in_binary} samples in {name} are in functions without block-map "
             f"entries{': ' + fns if fns else ''}")
        status = STATUS_PARTIAL
    if acct.total_branches:
        used = int(acct.branches[IN_BLOCK])
        if used == 0:
            warn(f"none of the {acct.total_branches} LBR records has both ends in blocks of "
                 f"{name}; block counts come from IP samples only")
            status = STATUS_PARTIAL
        ranges = acct.range_reasons()
        if acct.total_ranges and ranges["valid"] * 2 < acct.total_ranges:
            bad = {k: v for k, v in ranges.items() if k != "valid" and v}
            warn(f"only {ranges['valid']} of {acct.total_ranges} fall-through ranges are valid "
                 f"({_top(bad)})")
    if int(acct.samples[OTHER_DSO]) > in_binary:
        warn(f"most samples are in other DSOs: {_top(acct.dso_samples)}")
    for note in ev.mapping_notes:  # merged profiles: one that holds no mapping of the binary
        warn(f"{note} (none of this profile's samples can be in {name})")
        status = STATUS_PARTIAL
    return status, out
