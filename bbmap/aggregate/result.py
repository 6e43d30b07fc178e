"""What ``annotate`` returns: counts, edges, accounting and diagnosis, plus the JSON view.

Per-block columns are kept as numpy arrays over the whole block map; the JSON/CSV/text
views list only functions that got samples, LBR counts or edges (a cold function has
nothing to say), but list *all* blocks of those functions so layout tools see every ID.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.addresses import AddressProfile
from bbmap.aggregate.cluster import ClusterMoments
from bbmap.aggregate.functions import FunctionTable
from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.errors import Diagnostic
from bbmap.formats.bbaddrmap import MD_NAMES
from bbmap.model import BlockMap
from bbmap.options import FAILED_STATUSES, Status

JSON_FORMAT_VERSION = 1


@dataclass
class ProfileInfo:
    """One perf.data input, as the report names it."""

    path: str
    mode: str
    events: list[str]
    samples: int
    branches: int
    build_id: str | None  # the binary's build-id as this profile recorded it (if any)
    binary_mmaps: int  # executable mappings of the binary found
    error: str | None = None  # unreadable (annotate keep_going, fleet): why; nothing counted

    def to_json(self) -> dict:
        return {"path": self.path, "mode": self.mode, "events": self.events,
                "samples": self.samples, "branches": self.branches,
                "binary_build_id": self.build_id, "binary_mmaps": self.binary_mmaps,
                **({"error": self.error} if self.error is not None else {})}


@dataclass
class FunctionView:
    """One reported function (a key of the FunctionTable) with its blocks and edges."""

    key: int
    name: str
    address: int
    samples: int
    period: int
    count: int  # LBR: executions of its entry block(s) (0 without LBR)
    blocks: np.ndarray  # global block indexes, in map order
    edges: np.ndarray  # indexes into AnnotateResult edge columns (from-block in this fn)


@dataclass(frozen=True)
class AnnotateResult:
    """One run's result, built once by the driver's phases and never changed after:
    a phase that adds to it (fit, inference, a carry) makes a new one
    (``dataclasses.replace``), so a result handed out is the one that was rendered.
    The lists it holds (warnings, notices) are its own copies."""

    binary: str
    build_id: str | None
    block_map: BlockMap
    functions: FunctionTable
    accounting: Accounting
    profiles: list[ProfileInfo]
    block_samples: np.ndarray  # i8 per block
    block_period: np.ndarray  # u8 per block
    block_count: np.ndarray  # i8 per block: LBR execution estimate
    func_samples: np.ndarray  # i8 per function key
    func_period: np.ndarray  # u8 per function key
    edge_from: np.ndarray  # i8 global block
    edge_to: np.ndarray
    edge_kind: np.ndarray  # index into EDGE_KINDS
    edge_count: np.ndarray
    has_lbr: bool
    warnings: list[Diagnostic] = field(default_factory=list)
    status: Status = Status.OK
    block_start: np.ndarray | None = None  # u8 absolute block addresses
    cluster: ClusterMoments | None = None  # per-stack moments (annotate(cluster_stats=True))
    # instruction-address traces and the IP histogram (BOLT's formats; spec/bolt.md)
    # (annotate(addresses=True); None otherwise)
    addresses: AddressProfile | None = None
    # where block_count and the edge columns come from: "lbr" (branch stacks), "inferred"
    # (min-cost flow over the recovered CFG from IP samples, spec/inference.md) or "none"
    count_source: str = "none"
    go_build_id: str | None = None  # a Go binary's .note.go.buildid (bbmap.binary.go)
    fit: dict | None = None  # does the profile fit the binary (aggregate/fit.py)
    inference: dict | None = None  # the inference quality report when count_source is
    # "inferred" (or why inference did not run)
    # inferred counts: the sample model and the event it was chosen for
    # (bbmap.inference.events.EventModel.to_json() plus confidence and spread), and each
    # block's and edge's interval at that confidence (high -1: unbounded); None otherwise
    sample_model: dict | None = None
    block_low: np.ndarray | None = None
    block_high: np.ndarray | None = None
    edge_low: np.ndarray | None = None
    edge_high: np.ndarray | None = None
    # about this machine, not the inputs (a damaged disassembly cache): said on stderr by
    # the CLI, never written into a report (outputs depend on the inputs only)
    notices: list[str] = field(default_factory=list)
    # carried from a profile of another build (bbmap.stale.carry.CarryReport), else None
    carried: Any = None
    # carried: bool per block, the blocks no block of the profiled build matched -- their
    # zero samples are no evidence, so they are not known to be cold (the layout keeps
    # them in the hot part of a hot function); None otherwise
    unknown_blocks: np.ndarray | None = None
    # the bbmap.binary.Binary the run loaded (bbmap.run.Session): renderers that read the
    # file's bytes take it from here instead of opening the file again; None for a result
    # built by hand
    loaded: Any = field(default=None, repr=False, compare=False)
    # inferred counts: a call that infers them again from each half of the samples
    # (bbmap.inference.replicates; made once, on the first call), which the layout asks
    # before it reorders a function on inferred counts; None otherwise
    replicates: Any = field(default=None, repr=False, compare=False)

    @property
    def has_counts(self) -> bool:
        """block_count and the edges hold execution estimates (LBR or inferred)."""
        return self.count_source in ("lbr", "inferred")

    @property
    def has_intervals(self) -> bool:
        """Counts carry intervals (inferred counts)."""
        return self.block_low is not None and self.edge_low is not None

    # ------------------------------------------------------------- helpers
    @property
    def failed(self) -> bool:
        """True when the output would be wrong, incomplete or empty (the CLI exits 1):
        nothing mapped, or an input had an error (a damaged profile or block map)."""
        return self.status in FAILED_STATUSES or any(d.severity == "error"
                                                     for d in self.warnings)

    def block_flags(self, b: int) -> list[str]:
        md = int(self.block_map.block_md[b])
        return [n for n, bit in MD_NAMES.items() if md & bit]

    @functools.cached_property
    def _block_key(self) -> np.ndarray:
        """Each block's function key (computed once; a cache, not a field)."""
        m = self.block_map
        if not m.num_blocks:
            return np.zeros(0, np.int32)
        rng = np.searchsorted(m.range_block_ptr, np.arange(m.num_blocks), "right") - 1
        fn = np.searchsorted(m.func_range_ptr, rng, "right") - 1
        return self.functions.key_of_bmfunc[fn]

    def hot_keys(self, top: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The keys of the functions with samples, counts or edges, hottest first (by
        samples, then count, then key), the first ``top`` of them; and each edge's key
        (the function of its from-block).  The one selection rule of every report."""
        ft = self.functions
        nk = ft.num_keys
        bk = self._block_key
        count_by_key = np.zeros(nk, np.int64)
        if len(bk):
            count_by_key = np.bincount(bk, weights=self.block_count, minlength=nk
                                       ).astype(np.int64)
        edge_key = bk[self.edge_from] if len(self.edge_from) else np.zeros(0, np.int32)
        has_edge = np.zeros(nk, bool)
        has_edge[edge_key] = True
        hot = np.flatnonzero((self.func_samples > 0) | (count_by_key > 0) | has_edge)
        order = np.lexsort((hot, -count_by_key[hot], -self.func_samples[hot]))
        hot = hot[order]
        if top is not None:
            hot = hot[:top]
        return hot, edge_key

    def hot_functions(self, top: int | None = None) -> list[FunctionView]:
        """Functions with samples, LBR counts or edges, hottest first."""
        ft = self.functions
        hot, edge_key = self.hot_keys(top)
        edge_order = np.argsort(edge_key, kind="stable")
        sorted_keys = edge_key[edge_order]
        out = []
        m = self.block_map
        for k in hot.tolist():
            blocks = [np.arange(*_span(m, f)) for f in ft.bmfuncs[k]]
            blk = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
            lo, hi = np.searchsorted(sorted_keys, [k, k + 1])
            ent = int(self.block_count[blk[0]]) if len(blk) else 0
            out.append(FunctionView(
                key=k, name=ft.names[k], address=int(ft.address[k]),
                samples=int(self.func_samples[k]), period=int(self.func_period[k]),
                count=ent, blocks=blk, edges=edge_order[lo:hi]))
        return out

    def _ranges_json(self, fv: FunctionView) -> list[dict]:
        """Per range (hot part, ``.cold`` part, ...): address, blocks and summed samples."""
        m = self.block_map
        out = []
        for f in self.functions.bmfuncs[fv.key]:
            for r in m.function_ranges(f):
                lo, hi = int(m.range_block_ptr[r]), int(m.range_block_ptr[r + 1])
                out.append({"address": int(m.range_base[r]), "blocks": hi - lo,
                            "samples": int(self.block_samples[lo:hi].sum()),
                            "period": int(self.block_period[lo:hi].sum())})
        return out

    # ---------------------------------------------------------------- JSON
    def columns(self) -> dict[str, list]:
        """Per-block and per-edge columns as Python lists, converted once (JSON/CSV loop
        over slices of these instead of converting numpy scalars one by one)."""
        return self._columns

    @functools.cached_property
    def _columns(self) -> dict[str, list]:
        m = self.block_map
        flag_names = [[n for n, bit in MD_NAMES.items() if md & bit] for md in range(256)]
        cols = {
            "id": m.block_id.tolist(), "address": self.block_start.tolist(),
            "size": m.block_size.tolist(),
            "flags": [flag_names[md] for md in m.block_md.tolist()],
            "samples": self.block_samples.tolist(), "period": self.block_period.tolist(),
            "count": self.block_count.tolist(), "key": self._block_key.tolist(),
            "e_from": self.edge_from.tolist(), "e_to": self.edge_to.tolist(),
            "e_count": self.edge_count.tolist(), "e_kind": self.edge_kind.tolist()}
        if self.has_intervals:
            cols.update(low=self.block_low.tolist(), high=self.block_high.tolist(),
                        e_low=self.edge_low.tolist(), e_high=self.edge_high.tolist())
        return cols

    def function_json(self, fv: FunctionView) -> dict:
        """One entry of the JSON ``functions`` list (spec/annotate-json.md)."""
        c = self.columns()
        names = self.functions.names
        ids, keys = c["id"], c["key"]
        blocks = [{"id": ids[b], "address": c["address"][b], "size": c["size"][b],
                   "flags": c["flags"][b], "samples": c["samples"][b],
                   "period": c["period"][b], "count": c["count"][b]}
                  for b in fv.blocks.tolist()]
        iv = self.has_intervals
        if iv:
            for d, b in zip(blocks, fv.blocks.tolist()):
                d["interval"] = [c["low"][b], c["high"][b] if c["high"][b] >= 0 else None]

        def end(b: int) -> int | str:
            return ids[b] if keys[b] == fv.key else f"{names[keys[b]]}:{ids[b]}"

        edges = [{"from": end(c["e_from"][e]), "to": end(c["e_to"][e]),
                  "count": c["e_count"][e], "kind": EDGE_KINDS[c["e_kind"][e]],
                  **({"interval": [c["e_low"][e], c["e_high"][e] if c["e_high"][e] >= 0
                                   else None]} if iv else {})}
                 for e in fv.edges.tolist()]
        edges.sort(key=lambda d: (-d["count"], str(d["from"]), str(d["to"]), d["kind"]))
        return {"name": fv.name, "address": fv.address, "samples": fv.samples,
                "period": fv.period, "count": fv.count, "ranges": self._ranges_json(fv),
                "blocks": blocks, "edges": edges}

    def header_json(self) -> dict:
        """Everything of the JSON document except ``functions`` and ``warnings``."""
        return {
            "format_version": JSON_FORMAT_VERSION,
            "binary": self.binary,
            "build_id": self.build_id,
            "go_build_id": self.go_build_id,
            "status": self.status,
            "profiles": [p.to_json() for p in self.profiles],
            "totals": self.accounting.to_json(),
            "count_source": self.count_source,
            **({"inference": self.inference} if self.inference is not None else {}),
            **({"sample_model": self.sample_model} if self.sample_model is not None else {}),
            **({"fit": self.fit} if self.fit and self.fit.get("mismatch") else {}),
        }

    def to_json(self, top: int | None = None) -> dict:
        return {**self.header_json(),
                "functions": [self.function_json(fv) for fv in self.hot_functions(top)],
                "warnings": [d.to_json() for d in self.warnings]}


def _span(m: BlockMap, f: int) -> tuple[int, int]:
    r0, r1 = int(m.func_range_ptr[f]), int(m.func_range_ptr[f + 1])
    return int(m.range_block_ptr[r0]), int(m.range_block_ptr[r1])
