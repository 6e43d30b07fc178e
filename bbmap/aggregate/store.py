"""Profile aggregates: everything ``annotate`` counts for one binary, as a mergeable value
and as an Apache Parquet file (spec/aggregate.md).

Why: fleets send thousands of short profiles.  Each one becomes a small aggregate on
whichever machine reads it, and aggregates merge *exactly*: every count is an integer sum,
the per-profile provenance is a list kept in one canonical order (path, size, sha256), so
``merge`` is associative and commutative and the merged file is byte-identical whatever
the order and grouping of its inputs.  Derived data (inferred counts, the diagnosis, the
JSON view) is never stored: it is computed from the merged raw counts when a result is
made (``bbmap.run.Session``), so a merged aggregate gives the same answer as one
``annotate`` of all the profiles.

pyarrow is imported only by :func:`write_aggregate` / :func:`read_aggregate` (the
``bbmap[fleet]`` extra); the in-memory :class:`Aggregate` and :func:`merge` need numpy only.

Parameters (their source: this file's format, spec/aggregate.md):

* ``FORMAT_VERSION``: bumped when a column's meaning changes; readers refuse newer files.
* ``PARQUET_OPTIONS``: fixed writer settings (zstd level 3, dictionary on, statistics on,
  data page v1, Parquet 2.6, one row group per ``ROW_GROUP_ROWS`` rows) so identical
  content gives identical bytes; pyarrow's ``created_by`` string names its version, so
  byte identity holds for one pyarrow version (the fleet extra pins its major).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field

import numpy as np

from bbmap.aggregate.accounting import RANGE_REASONS, Accounting
from bbmap.aggregate.addresses import AddressProfile
from bbmap.aggregate.cluster import ClusterMoments
from bbmap.aggregate.explain import ProfileEvidence
from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import ProfileInfo
from bbmap.buckets import BRANCH_BUCKETS, BUCKETS
from bbmap.errors import BBMapError, Diagnostic, UsageError

FORMAT_VERSION = 2  # 2: instruction-address sections (trace, ip, event); 1 is still read
PARQUET_MAGIC = b"PAR1"
META_PREFIX = "bbmap."
ROW_GROUP_ROWS = 1 << 20
PARQUET_OPTIONS = {"version": "2.6", "use_dictionary": True, "compression": "zstd",
                   "compression_level": 3, "write_statistics": True,
                   "data_page_version": "1.0", "store_schema": True,
                   "write_page_index": False, "write_page_checksum": False}
HASH_CHUNK = 1 << 20

# section names: one row per block / function / edge / ... (spec/aggregate.md)
SECTIONS = ("total", "bucket", "dso", "function", "block", "edge", "cluster_edge", "trace",
            "ip", "event", "profile")
ADDRESS_TOTALS = ("entries", "kernel", "external", "duplicate", "samples")  # AddressProfile
# tallies, "address_" rows (the last two absent from files written before them: 0)


# --------------------------------------------------------------------------- provenance
@dataclass
class ProfileRecord:
    """One source profile: what the JSON's ``profiles`` list shows, plus what a merged
    result needs to re-make the diagnosis exactly (its warnings and mapping evidence)."""

    info: ProfileInfo
    size: int = 0
    sha256: str = ""
    error: str | None = None  # unreadable: why (the profile counted nothing)
    warnings: list[Diagnostic] = field(default_factory=list)
    evidence: ProfileEvidence | None = None  # what it adds to the mapping evidence
    quirk_batches: int = 0  # batches with the duplicated-newest LBR entry
    quirk_evidence: tuple[float, float, int] | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        """The canonical order of profiles in every result and file."""
        return (self.info.path, self.size, self.sha256)

    def detail_json(self) -> str:
        return json.dumps({"events": self.info.events,
                           "warnings": [d.to_json() for d in self.warnings],
                           "evidence": self.evidence.to_json() if self.evidence else {},
                           "quirk": [self.quirk_batches, list(self.quirk_evidence)
                                     if self.quirk_evidence else None]},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_row(cls, path: str, size: int, sha256: str, mode: str, samples: int,
                 branches: int, build_id: str | None, binary_mmaps: int, error: str | None,
                 detail: str) -> ProfileRecord:
        d = json.loads(detail)
        q = d.get("quirk") or [0, None]
        return cls(info=ProfileInfo(path=path, mode=mode, events=list(d.get("events", [])),
                                    samples=samples, branches=branches, build_id=build_id,
                                    binary_mmaps=binary_mmaps, error=error),
                   size=size, sha256=sha256, error=error,
                   warnings=[Diagnostic(w["message"], w.get("file"), w.get("section"),
                                        w.get("offset"), w.get("severity", "warning"))
                             for w in d.get("warnings", [])],
                   evidence=ProfileEvidence.from_json(d.get("evidence", {})),
                   quirk_batches=int(q[0]),
                   quirk_evidence=tuple(q[1]) if q[1] else None)


def file_sha256(path: str) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in chunks."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n, h.hexdigest()


# --------------------------------------------------------------------------- the value
@dataclass
class Sparse:
    """Rows keyed by a sorted, unique int64 index; integer columns that add."""

    index: np.ndarray
    cols: dict[str, np.ndarray]

    @classmethod
    def of_dense(cls, cols: dict[str, np.ndarray]) -> Sparse:
        n = len(next(iter(cols.values())))
        nz = np.zeros(n, bool)
        for v in cols.values():
            nz |= v != 0
        idx = np.flatnonzero(nz).astype(np.int64)
        return cls(idx, {k: v[idx] for k, v in cols.items()})

    def dense(self, n: int) -> dict[str, np.ndarray]:
        out = {}
        for k, v in self.cols.items():
            d = np.zeros(n, v.dtype)
            d[self.index] = v
            out[k] = d
        return out

    @classmethod
    def sum(cls, parts: list[Sparse]) -> Sparse:
        """Exact sum (integers only): concatenate, sort by index, add equal indexes."""
        parts = [p for p in parts if len(p.index)] or parts[:1]
        if len(parts) == 1:
            return parts[0]
        idx = np.concatenate([p.index for p in parts])
        order = np.argsort(idx, kind="stable")
        idx = idx[order]
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        cols = {k: np.add.reduceat(np.concatenate([p.cols[k] for p in parts])[order], starts)
                for k in parts[0].cols}
        return cls(idx[starts], cols)


BLOCK_COLS = ("samples", "period", "count", "fallthrough")
CLUSTER_BLOCK_COLS = ("x2", "o2", "xe", "xE")
FUNC_COLS = ("samples", "period", "no_block_samples")
CLUSTER_EDGE_COLS = ("k2", "ko", "kx")


@dataclass
class Aggregate:
    """The raw, additive state of one or more profiles against one binary."""

    build_id: str | None
    binary_sha256: str  # identity of a binary without a build-id
    binary_name: str
    num_blocks: int
    num_functions: int  # function keys (bbmap.aggregate.functions.FunctionTable)
    options: dict  # the profile options that change counts (must agree to merge)
    cluster_stats: bool
    go_build_id: str | None
    blocks: Sparse  # BLOCK_COLS (+ CLUSTER_BLOCK_COLS when cluster_stats)
    functions: Sparse  # FUNC_COLS
    edges: Sparse  # index = (from * B + to) * 8 + kind; "count"
    cluster_edges: Sparse  # index = from * B + to; CLUSTER_EDGE_COLS
    totals: dict[str, int]  # samples, period, branches, ranges, cluster_E2
    buckets: dict[str, np.ndarray]  # samples, period, branches, ranges (Accounting order)
    dso_samples: dict[str, int]
    dso_branches: dict[str, int]
    profiles: list[ProfileRecord]
    # instruction-address traces and IP histogram (BOLT's formats, spec/bolt.md), or None when
    # not collected; additive (AddressProfile.merge sums equal keys, keys sorted)
    addresses: AddressProfile | None = None
    # the file's readable columns (names, block IDs, addresses): from the binary, for the
    # rows present; a merge unites them (one build: they agree)
    function_labels: dict[int, tuple[str, int]] = field(default_factory=dict)
    block_labels: Sparse | None = None  # index -> "block_id", "address"

    @property
    def identity(self) -> str:
        return f"build-id {self.build_id}" if self.build_id else (
            f"no build-id (sha256 {self.binary_sha256[:16]})")

    @property
    def incomplete(self) -> bool:
        """A profile was unreadable or damaged: the counts miss what it held."""
        return any(p.error or any(w.severity == "error" for w in p.warnings)
                   for p in self.profiles)


def same_binary(a: Aggregate, b: Aggregate) -> bool:
    if a.build_id or b.build_id:
        return a.build_id == b.build_id
    return a.binary_sha256 == b.binary_sha256


def check_mergeable(a: Aggregate, b: Aggregate, a_name: str, b_name: str, *,
                    shape: bool = True) -> None:
    """Refuse (UsageError, exit 2) aggregates of different binaries or options (``shape``:
    also different block and function counts)."""
    if not same_binary(a, b):
        raise UsageError(f"aggregates of different binaries: {a_name} is of {a.identity} "
                         f"({a.binary_name}), {b_name} is of {b.identity} ({b.binary_name})")
    if shape and (a.num_blocks, a.num_functions) != (b.num_blocks, b.num_functions):
        raise UsageError(f"{a_name} and {b_name} name one build but count "
                         f"{a.num_blocks}/{b.num_blocks} blocks and {a.num_functions}/"
                         f"{b.num_functions} functions: one was written by another bbmap")
    if a.options != b.options:
        raise UsageError(f"aggregates made with different profile options: {a_name} "
                         f"{json.dumps(a.options, sort_keys=True)}, {b_name} "
                         f"{json.dumps(b.options, sort_keys=True)}")


def merge(aggs: list[Aggregate], names: list[str] | None = None) -> Aggregate:
    """The exact sum of ``aggs`` (same binary and options); associative and commutative:
    integer sums, and the profile list sorted into its canonical order."""
    if not aggs:
        raise BBMapError("nothing to merge")
    names = names or [f"aggregate #{i + 1}" for i in range(len(aggs))]
    first = aggs[0]
    for a, n in zip(aggs[1:], names[1:]):
        check_mergeable(first, a, names[0], n)
    if len(aggs) == 1:
        return first
    cluster = all(a.cluster_stats for a in aggs)

    def blocks(a: Aggregate) -> Sparse:
        if cluster or not a.cluster_stats:
            return a.blocks
        return Sparse(a.blocks.index, {k: a.blocks.cols[k] for k in BLOCK_COLS})

    def dsum(ds: list[dict[str, int]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in ds:
            for k, v in d.items():
                out[k] = out.get(k, 0) + v
        return dict(sorted(out.items()))

    bl = Sparse.sum([blocks(a) for a in aggs])
    if not cluster:
        bl = _drop_zero_rows(bl)
    flabels: dict[int, tuple[str, int]] = {}
    for a in aggs:
        flabels.update(a.function_labels)
    addrs = None
    if all(a.addresses is not None for a in aggs):
        addrs = aggs[0].addresses
        for a in aggs[1:]:
            addrs = addrs.merge(a.addresses)
    return Aggregate(
        build_id=first.build_id, binary_sha256=min(a.binary_sha256 for a in aggs),
        binary_name=min(a.binary_name for a in aggs), num_blocks=first.num_blocks,
        num_functions=first.num_functions, options=first.options, cluster_stats=cluster,
        go_build_id=first.go_build_id, blocks=bl,
        functions=Sparse.sum([a.functions for a in aggs]),
        edges=Sparse.sum([a.edges for a in aggs]),
        cluster_edges=Sparse.sum([a.cluster_edges for a in aggs]) if cluster else
        _empty_cluster_edges(),
        totals={k: sum(a.totals.get(k, 0) for a in aggs) for k in _TOTALS
                if cluster or k != "cluster_E2"},
        buckets={k: np.sum([a.buckets[k] for a in aggs], axis=0, dtype=first.buckets[k].dtype)
                 for k in first.buckets},
        dso_samples=dsum([a.dso_samples for a in aggs]),
        dso_branches=dsum([a.dso_branches for a in aggs]),
        profiles=sorted((p for a in aggs for p in a.profiles), key=lambda p: p.key),
        addresses=addrs, function_labels=dict(sorted(flabels.items())),
        block_labels=_unite_labels([a.block_labels for a in aggs]))


def _unite_labels(parts: list[Sparse | None]) -> Sparse | None:
    parts = [p for p in parts if p is not None and len(p.index)]
    if not parts:
        return None
    idx = np.concatenate([p.index for p in parts])
    u, first = np.unique(idx, return_index=True)
    return Sparse(u, {k: np.concatenate([p.cols[k] for p in parts])[first]
                      for k in parts[0].cols})


_TOTALS = ("samples", "period", "branches", "ranges", "cluster_E2")


def _drop_zero_rows(s: Sparse) -> Sparse:
    if not len(s.index):
        return s
    nz = np.zeros(len(s.index), bool)
    for v in s.cols.values():
        nz |= v != 0
    return Sparse(s.index[nz], {k: v[nz] for k, v in s.cols.items()})


def _empty_cluster_edges() -> Sparse:
    return Sparse(np.zeros(0, np.int64), {k: np.zeros(0, np.int64) for k in CLUSTER_EDGE_COLS})


# ------------------------------------------------------------- annotator <-> aggregate
def from_annotator(ann, records: list[ProfileRecord], *, build_id: str | None,  # noqa: ANN001
                   binary_sha256: str, binary_name: str, options: dict,
                   go_build_id: str | None) -> Aggregate:
    """The additive state of a :class:`bbmap.aggregate.annotator.Annotator` as an Aggregate."""
    s, a = ann.samples, ann.acct
    count, ft, ekeys, ecounts = ann.branches.raw_counts()
    cols = {"samples": s.block_samples.astype(np.int64),
            "period": s.block_period.astype(np.uint64),
            "count": count.astype(np.int64), "fallthrough": ft.astype(np.int64)}
    cluster = ann.branches.cluster is not None
    ce = _empty_cluster_edges()
    e2 = 0
    if cluster:
        m = ann.branches.cluster_moments()
        for k in CLUSTER_BLOCK_COLS:
            cols[k] = _exact_int(getattr(m, k), k)
        ce = Sparse(m.edge_key.astype(np.int64), {k: _exact_int(getattr(m, k), k)
                                                  for k in CLUSTER_EDGE_COLS})
        ce = _drop_zero_rows(ce)
        e2 = int(_exact_int(np.array([m.E2]), "E2")[0])
    totals = {"samples": int(a.total_samples), "period": int(a.total_period),
              "branches": int(a.total_branches), "ranges": int(a.total_ranges)}
    if cluster:
        totals["cluster_E2"] = e2
    ft_ = ann.functions
    blocks = Sparse.of_dense(cols)
    fsp = Sparse.of_dense({"samples": s.func_samples.astype(np.int64),
                           "period": s.func_period.astype(np.uint64),
                           "no_block_samples": ann.no_block_funcs.astype(np.int64)})
    return Aggregate(
        build_id=build_id, binary_sha256=binary_sha256, binary_name=binary_name,
        num_blocks=ann.block_map.num_blocks, num_functions=ft_.num_keys, options=options,
        cluster_stats=cluster, go_build_id=go_build_id, blocks=blocks, functions=fsp,
        edges=Sparse(ekeys.astype(np.int64), {"count": ecounts.astype(np.int64)}),
        cluster_edges=ce, totals=totals,
        buckets={"samples": a.samples.astype(np.int64), "period": a.period.astype(np.uint64),
                 "branches": a.branches.astype(np.int64), "ranges": a.ranges.astype(np.int64)},
        dso_samples=dict(sorted(a.dso_samples.items())),
        dso_branches=dict(sorted(a.dso_branches.items())),
        profiles=sorted(records, key=lambda p: p.key),
        addresses=_copy_addresses(ann.addresses.result()) if getattr(
            ann, "addresses", None) is not None else None,
        function_labels={k: (ft_.names[k], int(ft_.address[k])) for k in fsp.index.tolist()},
        block_labels=Sparse(blocks.index, {
            "block_id": ann.block_map.block_id[blocks.index].astype(np.int64),
            "address": ann.geom.start[blocks.index].astype(np.uint64)}))


def _copy_addresses(p: AddressProfile) -> AddressProfile:
    return dataclasses.replace(p, **{f.name: getattr(p, f.name).copy()
                                     for f in dataclasses.fields(p)
                                     if isinstance(getattr(p, f.name), np.ndarray)},
                               events=list(p.events))


def _exact_int(v: np.ndarray, what: str) -> np.ndarray:
    """Moments are sums of products of integer counts: exact in float64 below 2**53."""
    out = np.rint(v).astype(np.int64)
    if len(v) and (np.abs(v).max() >= 2.0 ** 53 or not np.array_equal(out, v)):
        raise BBMapError(f"cluster moment {what} is not an exact integer; cannot store it")
    return out


def add_to_annotator(agg: Aggregate, ann) -> None:  # noqa: ANN001
    """Add an aggregate's counts to an Annotator of the same binary."""
    B, K = agg.num_blocks, agg.num_functions
    if (ann.block_map.num_blocks, ann.functions.num_keys) != (B, K):
        raise UsageError(f"the aggregate counts {B} blocks and {K} functions, the binary "
                         f"{ann.block_map.num_blocks} and {ann.functions.num_keys}: "
                         "another build, or another bbmap version wrote it")
    d = agg.blocks.dense(B)
    s = ann.samples
    s.block_samples += d["samples"]
    s.block_period += d["period"]
    f = agg.functions.dense(K)
    s.func_samples += f["samples"]
    s.func_period += f["period"]
    ann.no_block_funcs += f["no_block_samples"]
    ann.branches.add_raw(d["count"], d["fallthrough"], agg.edges.index,
                         agg.edges.cols["count"])
    if ann.branches.cluster is not None and not agg.cluster_stats:
        ann.branches.cluster = None  # moments of part of the profiles would mislead
    if ann.branches.cluster is not None:
        ann.branches.cluster.add_moments(ClusterMoments(
            *(d[k].astype(np.float64) for k in CLUSTER_BLOCK_COLS),
            E2=float(agg.totals.get("cluster_E2", 0)),
            edge_key=agg.cluster_edges.index,
            **{k: agg.cluster_edges.cols[k].astype(np.float64) for k in CLUSTER_EDGE_COLS}))
    if getattr(ann, "addresses", None) is not None:
        if agg.addresses is None:
            raise BBMapError("this aggregate was made without the instruction-address "
                             "aggregates BOLT's formats are written from")
        ann.addresses.profile = ann.addresses.result().merge(agg.addresses)
    acct = Accounting(total_samples=agg.totals["samples"], total_period=agg.totals["period"],
                      total_branches=agg.totals["branches"], total_ranges=agg.totals["ranges"],
                      samples=agg.buckets["samples"].copy(),
                      period=agg.buckets["period"].copy(),
                      branches=agg.buckets["branches"].copy(),
                      ranges=agg.buckets["ranges"].copy(),
                      dso_samples=dict(agg.dso_samples), dso_branches=dict(agg.dso_branches))
    ann.acct.merge(acct)


# --------------------------------------------------------------------------- Parquet
def is_aggregate(path: str) -> bool:
    """A Parquet file (its magic), so commands taking perf.data take aggregates too.
    Only regular files are looked at: reading a pipe (``/dev/stdin``) would eat its bytes,
    and Parquet needs a seekable file anyway."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def _schema():  # noqa: ANN202
    import pyarrow as pa

    i8, u8, s = pa.int64(), pa.uint64(), pa.string()
    return pa.schema([
        ("section", pa.dictionary(pa.int32(), s)), ("index", i8), ("to_index", i8),
        ("kind", s), ("name", s), ("block_id", i8), ("address", u8),
        ("samples", i8), ("period", u8), ("count", i8), ("fallthrough", i8),
        ("no_block_samples", i8),
        ("x2", i8), ("o2", i8), ("xe", i8), ("xE", i8), ("k2", i8), ("ko", i8), ("kx", i8),
        ("to_address", u8), ("end_address", u8), ("mispred", i8),
        ("size", i8), ("sha256", s), ("mode", s), ("branches", i8), ("build_id", s),
        ("binary_mmaps", i8), ("error", s), ("detail", s)])


def _metadata(agg: Aggregate) -> dict[bytes, bytes]:
    meta = {"format_version": str(FORMAT_VERSION), "build_id": agg.build_id or "",
            "binary_sha256": agg.binary_sha256, "binary_name": agg.binary_name,
            "go_build_id": agg.go_build_id or "", "num_blocks": str(agg.num_blocks),
            "num_functions": str(agg.num_functions),
            "options": json.dumps(agg.options, sort_keys=True),
            "cluster_stats": "1" if agg.cluster_stats else "0",
            "addresses": "1" if agg.addresses is not None else "0",
            "profiles": str(len(agg.profiles)),
            "incomplete": "1" if agg.incomplete else "0"}
    return {(META_PREFIX + k).encode(): v.encode() for k, v in meta.items()}


def to_table(agg: Aggregate):  # noqa: ANN201 - a pyarrow.Table
    """The aggregate as one Arrow table (sections in SECTIONS order, rows sorted)."""
    import pyarrow as pa

    schema = _schema()
    B = max(agg.num_blocks, 1)
    cols: dict[str, list] = {f.name: [] for f in schema}
    n_rows = 0

    def add(section: str, n: int, **values) -> None:  # noqa: ANN003
        nonlocal n_rows
        if not n:
            return
        for name in cols:
            if name == "section":
                cols[name].append(pa.array([section] * n, pa.string()))
            elif name in values:
                v = values[name]
                cols[name].append(pa.array(v, schema.field(name).type))
            else:
                cols[name].append(pa.nulls(n, schema.field(name).type))
        n_rows += n

    tot = list(agg.totals.items())
    ap = agg.addresses
    if ap is not None:
        tot += [(f"address_{k}", int(getattr(ap, k))) for k in ADDRESS_TOTALS]
    add("total", len(tot), name=[k for k, _ in tot],
        count=[v if k != "period" else None for k, v in tot],
        period=[v if k == "period" else None for k, v in tot])
    names = {"samples": BUCKETS, "period": BUCKETS, "branches": BRANCH_BUCKETS,
             "ranges": RANGE_REASONS}
    for kind, arr in agg.buckets.items():
        col = "period" if kind == "period" else "count"
        add("bucket", len(arr), kind=[kind] * len(arr), name=list(names[kind]),
            index=np.arange(len(arr), dtype=np.int64), **{col: arr})
    for kind, d in (("samples", agg.dso_samples), ("branches", agg.dso_branches)):
        add("dso", len(d), kind=[kind] * len(d), name=list(d), count=list(d.values()))
    f = agg.functions
    fl = [agg.function_labels.get(i, ("", 0)) for i in f.index.tolist()]
    add("function", len(f.index), index=f.index, name=[n for n, _ in fl],
        address=[a for _, a in fl], **f.cols)
    b = agg.blocks
    extra = {}
    lab = agg.block_labels
    if lab is not None and len(b.index):
        pos = np.clip(np.searchsorted(lab.index, b.index), 0, len(lab.index) - 1)
        if np.array_equal(lab.index[pos], b.index):
            extra = {k: lab.cols[k][pos] for k in ("block_id", "address")}
    add("block", len(b.index), index=b.index, **extra, **b.cols)
    e = agg.edges
    kind = e.index % 8
    pair = e.index // 8
    add("edge", len(e.index), index=pair // B, to_index=pair % B,
        kind=[EDGE_KINDS[k] for k in kind.tolist()], count=e.cols["count"])
    ce = agg.cluster_edges
    add("cluster_edge", len(ce.index), index=ce.index // B, to_index=ce.index % B, **ce.cols)
    if ap is not None:
        add("trace", len(ap.trace_count), address=ap.trace_from, to_address=ap.trace_to,
            end_address=ap.trace_end, count=ap.trace_count, mispred=ap.trace_mispred)
        add("ip", len(ap.ip_addr), address=ap.ip_addr, samples=ap.ip_samples)
        add("event", len(ap.events), name=list(ap.events))
    ps = agg.profiles
    add("profile", len(ps), name=[p.info.path for p in ps], size=[p.size for p in ps],
        sha256=[p.sha256 for p in ps], mode=[p.info.mode for p in ps],
        samples=[p.info.samples for p in ps], branches=[p.info.branches for p in ps],
        build_id=[p.info.build_id for p in ps], binary_mmaps=[p.info.binary_mmaps for p in ps],
        error=[p.error for p in ps], detail=[p.detail_json() for p in ps])
    arrays = []
    for name in cols:
        typ = pa.string() if name == "section" else schema.field(name).type
        parts = cols[name]
        arr = pa.concat_arrays(parts) if parts else pa.array([], typ)
        if name == "section":
            arr = arr.dictionary_encode()
            arr = arr.cast(schema.field(name).type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema.with_metadata(_metadata(agg)))


def _parquet():  # noqa: ANN202 - the pyarrow.parquet module
    """pyarrow, or a one-line error saying how to get it (the extra)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BBMapError("aggregate files need pyarrow: pip install 'bbmap[fleet]'"
                         ) from None
    return pq


def write_aggregate(agg: Aggregate, path: str) -> None:
    """Write ``agg`` atomically; identical content gives identical bytes."""
    pq = _parquet()

    from bbmap.atomic import atomic_open

    table = to_table(agg)
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)


def aggregate_bytes(agg: Aggregate) -> bytes:
    """The file's bytes in memory (what tests and benches compare)."""
    pq = _parquet()
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    pq.write_table(to_table(agg), sink, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


def read_aggregate(path: str) -> Aggregate:
    """Read an aggregate file; BBMapError naming the file for anything it cannot trust."""
    pq = _parquet()
    try:
        table = pq.read_table(path)
    except FileNotFoundError as e:
        raise BBMapError(f"not a readable Parquet aggregate: {e}", file=path) from None
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid & co on bad bytes
        section, offset, what = parquet_fault(path)
        raise BBMapError(f"not a readable Parquet aggregate: {what}: {type(e).__name__}: {e}",
                         file=path, section=section, offset=offset) from None
    return from_table(table, path)


PARQUET_MAGIC = b"PAR1"  # at the start and at the end of every Parquet file
PARQUET_TAIL = 8  # the footer's length (u32 little endian) and the closing magic


def parquet_fault(path: str) -> tuple[str, int, str]:
    """(section, byte offset, what) of the first part of a Parquet file that does not
    read: its size, the closing magic, the footer length, else the footer (file
    metadata), which says where every page is.  pyarrow's own errors name no offset;
    this reads the file's frame as the format declares it."""
    import struct

    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            size = fh.seek(0, 2)
            fh.seek(max(size - PARQUET_TAIL, 0))
            tail = fh.read(PARQUET_TAIL)
    except OSError as e:
        return "file", 0, f"unreadable ({e.strerror})"
    if size < len(PARQUET_MAGIC) + PARQUET_TAIL:
        return "file", size, f"{size} bytes, shorter than Parquet's magic and footer"
    if head != PARQUET_MAGIC:
        return "Parquet header", 0, "no PAR1 magic"
    if tail[4:] != PARQUET_MAGIC:
        return "Parquet footer", size - 4, "no closing PAR1 magic"
    footer_len = struct.unpack("<I", tail[:4])[0]
    footer = size - PARQUET_TAIL - footer_len
    if footer < len(PARQUET_MAGIC):
        return "Parquet footer", size - PARQUET_TAIL, \
            f"footer length {footer_len} runs past the start of the file"
    # past the frame, pyarrow's own reading is the only decoder; its metadata accessors
    # abort the process on some damaged footers (a C++ assertion, seen on fuzzed files),
    # so the footer is named, not walked: it is where the file says its pages are
    return "Parquet footer (file metadata)", footer, \
        "the footer, or a page it points to, does not decode"


def from_table(table, path: str = "<aggregate>") -> Aggregate:  # noqa: ANN001
    meta = {k.decode()[len(META_PREFIX):]: v.decode()
            for k, v in (table.schema.metadata or {}).items()
            if k.decode().startswith(META_PREFIX)}
    try:
        version = int(meta["format_version"])
    except (KeyError, ValueError):
        raise BBMapError("a Parquet file, but not a bbmap aggregate (no "
                         f"{META_PREFIX}format_version in its metadata)", file=path) from None
    if version > FORMAT_VERSION:
        raise BBMapError(f"aggregate format version {version} is newer than this bbmap's "
                         f"({FORMAT_VERSION}); upgrade bbmap", file=path)
    try:
        return _from_table(table, meta)
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise BBMapError(f"damaged aggregate: {_damage(e)}", file=path) from None


def _damage(e: Exception) -> str:
    """What a decoding exception of ``_from_table`` means, in bbmap's words (not pyarrow's
    ``KeyError: 'Field "block_id" does not exist in schema'`` or list.index's)."""
    import re

    from bbmap.errors import library_words

    if isinstance(e, _Damage):
        return str(e)
    m = re.search(r'Field "([^"]+)"|\'([^\']+)\' is not in list', str(e))
    if isinstance(e, KeyError) and not m and e.args:
        return f"{e.args[0]!s} is missing"
    if m:
        return f"column or key {m.group(1) or m.group(2)} is missing or misnamed"
    return library_words(e)


class _Damage(ValueError):
    """Damage described in bbmap's own words (``_damage`` passes them on as they are)."""


def _check_types(table) -> None:  # noqa: ANN001
    """Every column bbmap writes has the type ``_schema`` gives it: a damaged footer can
    turn a string column into bytes (Parquet's BINARY without its UTF-8 annotation),
    which would otherwise surface later as a comparison of str with bytes."""
    import pyarrow as pa

    for want in _schema():
        if want.name not in table.schema.names:
            continue  # a missing column is named where it is read
        got = table.schema.field(want.name).type
        ok = got == want.type
        if want.name == "section":  # any string encoding of the section names
            ok = ok or pa.types.is_string(got) or pa.types.is_large_string(got) or (
                pa.types.is_dictionary(got) and pa.types.is_string(got.value_type))
        if not ok:
            raise _Damage(f"column {want.name} holds {got}, not {want.type}")


def _from_table(table, meta: dict[str, str]) -> Aggregate:  # noqa: ANN001
    import pyarrow.compute as pc

    _check_types(table)
    B = int(meta["num_blocks"])
    K = int(meta["num_functions"])
    cluster = meta.get("cluster_stats") == "1"
    # rows are written grouped by section (SECTIONS order): slice the runs, no filtering
    sec = pc.cast(table.column("section"), "string").to_pylist()
    runs: dict[str, tuple[int, int]] = {}
    i = 0
    while i < len(sec):
        j = i
        while j < len(sec) and sec[j] == sec[i]:
            j += 1
        if sec[i] in runs or sec[i] not in SECTIONS:
            raise ValueError(f"section {sec[i]!r} unknown or not in one run of rows")
        runs[sec[i]] = (i, j)
        i = j
    parts = {name: table.slice(*_span(runs.get(name))) for name in SECTIONS}

    def col(t, name: str, dtype) -> np.ndarray:  # noqa: ANN001
        c = t.column(name)
        if c.null_count:
            raise ValueError(f"column {name!r} has empty cells in its section")
        return np.asarray(c.to_numpy(zero_copy_only=False), dtype=dtype)

    def sparse(t, names: tuple[str, ...], key) -> Sparse:  # noqa: ANN001
        idx = key(t)
        cs = {n: col(t, n, np.uint64 if n == "period" else np.int64) for n in names}
        if len(idx) > 1 and not (np.diff(idx) > 0).all():
            raise ValueError("rows not sorted by index")
        return Sparse(idx, cs)

    bt = parts["block"]
    blocks = sparse(bt, BLOCK_COLS + (CLUSTER_BLOCK_COLS if cluster else ()),
                    lambda t: col(t, "index", np.int64))
    if len(blocks.index) and (blocks.index[0] < 0 or blocks.index[-1] >= B):
        raise ValueError("a block index outside the binary")
    ft = parts["function"]
    functions = sparse(ft, FUNC_COLS, lambda t: col(t, "index", np.int64))
    if len(functions.index) and (functions.index[0] < 0 or functions.index[-1] >= K):
        raise ValueError("a function index outside the binary")
    et = parts["edge"]
    kinds = et.column("kind").to_pylist()
    kind_code = {k: i for i, k in enumerate(EDGE_KINDS)}
    ekey = ((col(et, "index", np.int64) * max(B, 1) + col(et, "to_index", np.int64)) * 8
            + np.array([kind_code[k] for k in kinds], np.int64))
    edges = Sparse(ekey, {"count": col(et, "count", np.int64)})
    if len(ekey) > 1 and not (np.diff(ekey) > 0).all():
        raise ValueError("edge rows not sorted")
    ct = parts["cluster_edge"]
    cedges = sparse(ct, CLUSTER_EDGE_COLS, lambda t: col(t, "index", np.int64) * max(B, 1)
                    + col(t, "to_index", np.int64)) if cluster else _empty_cluster_edges()
    tt = parts["total"]
    totals = {}
    for name, c, p in zip(tt.column("name").to_pylist(), tt.column("count").to_pylist(),
                          tt.column("period").to_pylist()):
        totals[name] = int(p if name == "period" else c)
    addresses = None
    if meta.get("addresses") == "1":
        tr, ip = parts["trace"], parts["ip"]
        addresses = AddressProfile(
            trace_from=col(tr, "address", np.uint64), trace_to=col(tr, "to_address", np.uint64),
            trace_end=col(tr, "end_address", np.uint64), trace_count=col(tr, "count", np.int64),
            trace_mispred=col(tr, "mispred", np.int64), ip_addr=col(ip, "address", np.uint64),
            ip_samples=col(ip, "samples", np.int64),
            events=[str(x) for x in parts["event"].column("name").to_pylist()],
            **{k: totals.pop(f"address_{k}", 0) for k in ADDRESS_TOTALS})
    for k in ("samples", "period", "branches", "ranges"):
        totals.setdefault(k, 0)
    ut = parts["bucket"]
    buckets = {"samples": np.zeros(len(BUCKETS), np.int64),
               "period": np.zeros(len(BUCKETS), np.uint64),
               "branches": np.zeros(len(BRANCH_BUCKETS), np.int64),
               "ranges": np.zeros(len(RANGE_REASONS), np.int64)}
    names = {"samples": BUCKETS, "period": BUCKETS, "branches": BRANCH_BUCKETS,
             "ranges": RANGE_REASONS}
    for kind, name, c, p in zip(ut.column("kind").to_pylist(), ut.column("name").to_pylist(),
                                ut.column("count").to_pylist(), ut.column("period").to_pylist()):
        buckets[kind][list(names[kind]).index(name)] = p if kind == "period" else c
    dt = parts["dso"]
    dso = {"samples": {}, "branches": {}}
    for kind, name, c in zip(dt.column("kind").to_pylist(), dt.column("name").to_pylist(),
                             dt.column("count").to_pylist()):
        dso[kind][name] = int(c)
    pt = parts["profile"]
    cl = {n: pt.column(n).to_pylist() for n in ("name", "size", "sha256", "mode", "samples",
                                                 "branches", "build_id", "binary_mmaps",
                                                 "error", "detail")}
    profiles = [ProfileRecord.from_row(*row) for row in zip(*cl.values())]
    flabels = {i: (n or "", int(a or 0)) for i, n, a in zip(
        functions.index.tolist(), ft.column("name").to_pylist(),
        ft.column("address").to_pylist())}
    blabels = None
    if len(bt) and not bt.column("block_id").null_count:
        blabels = Sparse(blocks.index, {"block_id": col(bt, "block_id", np.int64),
                                        "address": col(bt, "address", np.uint64)})
    return Aggregate(
        build_id=meta.get("build_id") or None, binary_sha256=meta.get("binary_sha256", ""),
        binary_name=meta.get("binary_name", ""), num_blocks=B, num_functions=K,
        options=json.loads(meta.get("options", "{}")), cluster_stats=cluster,
        go_build_id=meta.get("go_build_id") or None, blocks=blocks, functions=functions,
        edges=edges, cluster_edges=cedges, totals=totals, buckets=buckets,
        dso_samples=dict(sorted(dso["samples"].items())),
        dso_branches=dict(sorted(dso["branches"].items())), profiles=profiles,
        addresses=addresses, function_labels=flabels, block_labels=blabels)


def _span(run: tuple[int, int] | None) -> tuple[int, int]:
    return (0, 0) if run is None else (run[0], run[1] - run[0])


def merge_files(paths: list[str], *, group: int = 256) -> Aggregate:
    """Read and merge aggregate files, ``group`` at a time (memory: one group plus the
    running sum); refuses (UsageError) files of different binaries, naming both."""
    total: Aggregate | None = None
    first_name = ""
    for i in range(0, len(paths), group):
        chunk = paths[i:i + group]
        aggs = [read_aggregate(p) for p in chunk]
        names = list(chunk)
        if total is not None:
            aggs.insert(0, total)
            names.insert(0, first_name)
        else:
            first_name = chunk[0]
        total = merge(aggs, names)
    assert total is not None
    return total
