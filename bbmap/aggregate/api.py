"""``annotate(perf_paths, binary)``: the library call under ``bbmap annotate``.

:class:`Annotator` owns the aggregation state (per-block arrays, edges, accounting) and
takes sample batches from any number of profiles; :func:`annotate` feeds it from
perf.data files through the mapping and index layers, then diagnoses the result.
Memory is bounded by the binary's block count plus distinct edges, not by the profile.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.explain import Evidence, diagnose
from bbmap.aggregate.functions import FunctionTable
from bbmap.aggregate.lbr import BlockGeometry, BranchAggregator
from bbmap.aggregate.resolve import Resolver
from bbmap.aggregate.result import AnnotateResult, ProfileInfo
from bbmap.aggregate.samples import SampleAggregator
from bbmap.binary.types import FunctionSymbols
from bbmap.buckets import IN_FUNCTION_NO_BLOCK
from bbmap.errors import BBMapError, Diagnostic
from bbmap.model import BlockMap
from bbmap.perf.records import SampleBatch

MAX_BRANCH_SLICE = 1 << 18  # LBR entries resolved at once
ProgressFn = Callable[[str, int], None]  # (current file, samples read so far in all files)


class Annotator:
    """Aggregation state shared by every batch of every profile."""

    def __init__(self, block_map: BlockMap, symbols: FunctionSymbols | None, *,
                 demangle: bool = True, drop_duplicate_newest: bool | None = None,
                 sections: list | None = None, _tables: tuple | None = None,
                 cluster_stats: bool = False) -> None:
        self.block_map = block_map
        self.drop_duplicate_newest = drop_duplicate_newest
        if _tables is None:
            _tables = (FunctionTable.build(symbols, block_map, demangle=demangle,
                                           sections=sections), BlockGeometry.of(block_map))
        self.functions, self.geom = _tables
        self.acct = Accounting()
        self.samples = SampleAggregator(block_map.num_blocks, self.functions, self.acct)
        self.cluster_stats = cluster_stats
        self.branches = BranchAggregator(self.geom, self.acct,
                                         drop_duplicate_newest=drop_duplicate_newest,
                                         cluster_stats=cluster_stats)
        self.no_block_funcs = np.zeros(self.functions.num_keys, np.int64)

    def add_batch(self, batch: SampleBatch, resolver: Resolver) -> None:
        if len(batch):
            r = resolver.resolve(batch.ip, batch.pid, batch.seq, batch.cpumode, None,
                                 batch.time)
            self.samples.add(r, batch.period, resolver.dso_names)
            nb = np.flatnonzero(r.where == IN_FUNCTION_NO_BLOCK)
            if len(nb):
                k = self.functions.key_at(r.vaddr[nb], r.func[nb])
                k = k[k >= 0]
                self.no_block_funcs += np.bincount(k, minlength=len(self.no_block_funcs))
        if batch.has_branches:
            # slices of at most MAX_BRANCH_SLICE entries keep the per-entry temporaries
            # (resolved ends, keys) bounded whatever the stack depth
            ptr = batch.br_ptr
            i, n = 0, len(batch)
            while i < n:
                j = int(np.searchsorted(ptr, ptr[i] + MAX_BRANCH_SLICE, side="right")) - 1
                j = min(max(j, i + 1), n)
                lo, hi = int(ptr[i]), int(ptr[j])
                self.branches.add(ptr[i:j + 1] - lo, batch.br_from[lo:hi], batch.br_to[lo:hi],
                                  batch.br_flags[lo:hi], batch.pid[i:j], batch.seq[i:j],
                                  resolver, batch.time[i:j])
                i = j

    def fresh(self) -> Annotator:
        """An empty annotator sharing this one's tables (to aggregate one profile apart)."""
        return Annotator(self.block_map, None, drop_duplicate_newest=self.drop_duplicate_newest,
                         _tables=(self.functions, self.geom), cluster_stats=self.cluster_stats)

    def merge(self, other: Annotator) -> None:
        """Add the counts of an annotator made by :meth:`fresh`."""
        self.acct.merge(other.acct)
        s, o = self.samples, other.samples
        s.block_samples += o.block_samples
        s.block_period += o.block_period
        s.func_samples += o.func_samples
        s.func_period += o.func_period
        self.branches.merge(other.branches)
        self.no_block_funcs += other.no_block_funcs

    def hot_no_block(self, n: int = 5) -> list[tuple[str, int]]:
        top = np.argsort(-self.no_block_funcs, kind="stable")[:n]
        return [(self.functions.names[k], int(self.no_block_funcs[k])) for k in top.tolist()
                if self.no_block_funcs[k] > 0]

    def result(self, *, binary: str, build_id: str | None, profiles: list[ProfileInfo],
               evidence: Evidence | None = None, warnings: Sequence[Diagnostic] = ()
               ) -> AnnotateResult:
        self.acct.check()
        fb, tb, kind, cnt = self.branches.edges()
        res = AnnotateResult(
            binary=binary, build_id=build_id, block_map=self.block_map,
            functions=self.functions, accounting=self.acct, profiles=profiles,
            block_samples=self.samples.block_samples, block_period=self.samples.block_period,
            block_count=self.branches.block_counts(), func_samples=self.samples.func_samples,
            func_period=self.samples.func_period, edge_from=fb, edge_to=tb, edge_kind=kind,
            edge_count=cnt, has_lbr=self.acct.total_branches > 0,
            warnings=list(warnings), block_start=self.geom.start,
            cluster=self.branches.cluster_moments())
        res.count_source = "lbr" if res.has_lbr else "none"
        if evidence is not None:
            evidence.hot_no_block = self.hot_no_block()
            status, msgs = diagnose(self.acct, evidence)
            res.status = status
            res.warnings = msgs + res.warnings
        return res


# ----------------------------------------------------------------------------- inputs
def expand_inputs(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """Expand ``@listfile`` arguments (one path a line; ``#`` comments; relative paths
    are relative to the list file) and check every file exists."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    origin: dict[int, str] = {}  # index in out -> "listfile: line N" it came from
    for p in paths:
        p = os.fspath(p)
        if p.startswith("@"):
            lst = p[1:]
            try:
                # paths are bytes on Linux: undecodable ones come back via surrogateescape
                with open(lst, encoding="utf-8", errors="surrogateescape") as fh:
                    lines = fh.read().splitlines()
            except OSError as e:
                raise BBMapError(f"cannot read list file {p!r}: {e.strerror}",
                                 file=lst or None) from None
            base = os.path.dirname(os.path.abspath(lst))
            for n, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("@"):
                    raise BBMapError(f"line {n}: nested list files are not supported",
                                     file=lst)
                if "\0" in line:
                    raise BBMapError(f"line {n}: not a file name (a NUL byte); a list file "
                                     "holds one path a line", file=lst)
                origin[len(out)] = f"{lst}: line {n}: "
                out.append(line if os.path.isabs(line) else os.path.join(base, line))
        else:
            out.append(p)
    if not out:
        raise BBMapError("no perf.data files given")
    for i, p in enumerate(out):
        if p != "-" and not os.path.exists(p):  # "-": standard input
            raise BBMapError(f"{origin.get(i, '')}{p}: no such perf.data file")
    return out


# ----------------------------------------------------------------------------- annotate
def annotate(perf_paths: str | os.PathLike | Iterable[str | os.PathLike],
             binary: str | os.PathLike, *, name_override: str | None = None,
             pid: int | None = None, demangle: bool = True,
             debug_dirs: Sequence[str] = (), drop_duplicate_newest: bool | None = None,
             chunk_samples: int = 65536, progress: ProgressFn | None = None,
             inference: str = "auto", solver: str = "auto",
             cluster_stats: bool = False) -> AnnotateResult:
    """Map every sample and LBR record of ``perf_paths`` (files or ``@listfile``s, merged)
    onto the blocks of ``binary``.  Raises :class:`BBMapError` for unreadable inputs; a
    profile that maps nothing is *not* an exception: ``result.status`` and
    ``result.warnings`` say why, and ``result.failed`` is true.

    ``inference``: ``auto`` infers block and edge counts from the IP samples when the
    profiles have no branch stacks, ``on`` always, ``off`` never (:func:`apply_inference`).
    ``cluster_stats`` also fills ``result.cluster`` (per-stack moments of the LBR counts,
    which ``verify --profile`` turns into design effects; bbmap.aggregate.cluster).
    """
    from bbmap.aggregate.profile import read_profile
    from bbmap.binary import load_binary

    paths = expand_inputs(perf_paths)
    b = load_binary(binary, debug_dirs=debug_dirs, demangle=demangle)
    if getattr(b, "is_relocatable", False):
        raise BBMapError("a relocatable object (.o) is never mapped by a process, so no "
                         "sample can be in it; annotate the linked binary", file=os.fspath(binary))
    bm = b.block_map
    ann = Annotator(bm, b.symbols, demangle=demangle,
                    drop_duplicate_newest=drop_duplicate_newest, sections=b.sections,
                    cluster_stats=cluster_stats)
    from bbmap.index import BlockIndex

    index = BlockIndex(bm, b.symbols, b.sections)
    warnings: list[Diagnostic] = [d for d in b.diagnostics]
    evidence = Evidence(binary=os.fspath(binary), binary_build_id=b.build_id,
                        has_block_map=bm.num_blocks > 0, producer=producer_of(b),
                        name_override=name_override, pid=pid, go=b.go,
                        symbols_source=b.symbols_source)
    profiles: list[ProfileInfo] = []
    done = 0
    for path in paths:
        def prog(n: int, _path: str = path, _done: int = done) -> None:
            if progress is not None:
                progress(_path, _done + n)
        info = read_profile(path, b, index, ann, evidence, warnings, name_override=name_override,
                            pid=pid, chunk_samples=chunk_samples, progress=prog)
        profiles.append(info)
        done += info.samples
    from bbmap.aggregate.identity import resolve

    resolve(evidence.profiled, os.fspath(binary), debug_dirs)
    quirk = ann.branches.quirk_evidence
    if ann.branches.quirk_batches and quirk is not None:
        p0, deeper, n = quirk
        warnings.append(Diagnostic(
            f"LBR: entries 0 and 1 are equal in {100 * p0:.1f}% of {n} stacks but neighbours "
            f"deeper in the stacks only in {100 * deeper:.1f}%: the hardware's duplicated "
            f"newest entry; dropped entry 0 of those samples "
            f"({int(ann.acct.branch_buckets()['duplicate'])} records, --duplicate-lbr keep "
            "to keep them)"))
    res = ann.result(binary=os.fspath(binary), build_id=b.build_id, profiles=profiles,
                     evidence=evidence, warnings=warnings)
    res.go_build_id = b.go.build_id if b.go is not None else None
    apply_inference(res, b, inference, solver=solver)
    return res


INFERENCE_MODES = ("off", "auto", "on")


def apply_inference(res: AnnotateResult, binary, mode: str = "auto",  # noqa: ANN001
                    *, solver: str = "auto") -> AnnotateResult:
    """Fill ``block_count`` and the edge columns with counts inferred from the IP samples
    (``count_source = "inferred"``) when ``mode`` is ``on``, or ``auto`` and the result
    has no LBR counts.  Derived data: call it on merged raw counts, never store its output
    as raw counts.  ``binary`` is the :class:`~bbmap.binary.Binary` the result maps to."""
    if mode not in INFERENCE_MODES:
        raise BBMapError(f"--inference must be one of {', '.join(INFERENCE_MODES)}, "
                         f"not {mode!r}")
    if mode == "off" or (mode == "auto" and res.has_lbr):
        return res
    if not int(res.block_samples.sum()):
        res.inference = {"status": "skipped", "reason": "no IP sample in a block"}
        return res
    from bbmap.aggregate.lbr import K_BRANCH, K_FALLTHROUGH
    from bbmap.cfg import recover_cfg
    from bbmap.inference.counts import infer_counts

    try:
        cfg = recover_cfg(binary, res.block_map)
    except BBMapError as e:
        res.inference = {"status": "skipped", "reason": str(e)}
        res.warnings.append(Diagnostic(f"inference: {e}; counts not inferred",
                                       severity="warning"))
        return res
    inf = infer_counts(cfg, res.block_samples, solver=solver)
    res.block_count = inf.block_count
    res.edge_from, res.edge_to = inf.edge_from, inf.edge_to
    res.edge_kind = np.where(inf.edge_fallthrough, K_FALLTHROUGH, K_BRANCH).astype(np.int64)
    res.edge_count = inf.edge_count
    res.count_source = "inferred"
    res.inference = {"status": "ok", **inf.quality.to_json()}
    for attr in ("_cols",):
        if hasattr(res, attr):
            delattr(res, attr)
    return res


def producer_of(b) -> str | None:  # noqa: ANN001 - a bbmap.binary.Binary
    """The ``.comment`` producer string (which compiler built the binary), if any."""
    for s in getattr(b, "sections", []):
        if s.name == ".comment":
            try:
                raw = b.section_data(s.index)
            except (BBMapError, OSError, ValueError):
                return None
            parts = [p.decode("utf-8", "replace") for p in raw.split(b"\0") if p.strip()]
            clang = [p for p in parts if "clang version" in p]
            return (clang or parts or [None])[-1]
    return None
