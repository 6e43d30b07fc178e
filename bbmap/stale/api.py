"""The commands' entry points: annotate a profile of one build onto another, and check a
cluster file against a binary (spec/stale.md)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import Diagnostic, UsageError
from bbmap.options import FAILED_STATUSES, Status
from bbmap.stale.carry import MIN_CARRIED, CarryReport, carry


def annotate_stale(perf_paths: Iterable[str | os.PathLike], profiled_binary: str,
                   binary: str, *, inference: str = "auto", solver: str = "auto",
                   sample_model: str = "auto", force: bool = False,
                   disasm_cache: bool = False, threshold: float = MIN_CARRIED,
                   **kw: Any) -> tuple[AnnotateResult, CarryReport]:
    """The profiles (of ``profiled_binary``) annotated, then carried onto ``binary``.
    ``kw``: :func:`bbmap.aggregate.annotate`'s reading options (name, pid, debug
    directories, event...).  Too little carried (below ``threshold`` of the block samples)
    refuses the result (``status = "refused"``, the share as the first error) unless
    ``force``, which keeps it with the share as a warning."""
    from bbmap.binary import load_binary
    from bbmap.run import annotate

    if os.path.realpath(profiled_binary) == os.path.realpath(binary):
        raise UsageError(f"--profiled-binary {profiled_binary} is the binary itself: annotate "
                         "it without --profiled-binary")
    dirs = kw.get("debug_dirs", ())
    new = load_binary(binary, debug_dirs=dirs)
    new.refuse_relocatable()
    old_res = annotate(perf_paths, profiled_binary, inference="off", addresses=True,
                       force=force, **kw)
    # the run's own load of OLD (decoding a block map twice is a tenth of a carry)
    old = old_res.loaded if old_res.loaded is not None else \
        load_binary(profiled_binary, debug_dirs=dirs)
    old.refuse_relocatable()
    if old_res.status in FAILED_STATUSES:
        return old_res, CarryReport(profiled_binary, binary, threshold=threshold)
    res, rep = carry(old_res, old, new, inference=inference, solver=solver,
                     disasm_cache=disasm_cache, sample_model=sample_model,
                     demangle=kw.get("demangle", True), threshold=threshold)
    rep.forced = force
    if rep.too_little:
        short = [w for w in res.warnings if w.message.startswith("only ")]
        if force:
            for w in short:
                res.warnings.remove(w)
                res.warnings.append(Diagnostic(w.message, severity="warning"))
        else:
            for w in short:
                res.warnings.remove(w)
                res.warnings.insert(0, w)
            res = replace(res, status=Status.REFUSED)
    return res, rep
