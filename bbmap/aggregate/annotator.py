"""The aggregation state of one binary: :class:`Annotator`.

It owns the per-block arrays, edges and accounting and takes sample batches from any
number of profiles (the driver, ``bbmap/run.py``, feeds it from perf.data files through
the mapping and index layers), then makes the result and its diagnosis.  Memory is
bounded by the binary's block count plus distinct edges, not by the profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.addresses import AddressAggregator
from bbmap.aggregate.distinct import Distinct, distinct_samples
from bbmap.aggregate.explain import Evidence, diagnose
from bbmap.aggregate.fit import (
    FitCollector,
)
from bbmap.aggregate.functions import FunctionTable
from bbmap.aggregate.lbr import BlockGeometry, BranchAggregator
from bbmap.aggregate.resolve import Resolver
from bbmap.aggregate.result import AnnotateResult, ProfileInfo
from bbmap.aggregate.samples import SampleAggregator
from bbmap.binary.types import FunctionSymbols
from bbmap.buckets import IN_FUNCTION_NO_BLOCK
from bbmap.errors import Diagnostic
from bbmap.model import BlockMap
from bbmap.options import Status
from bbmap.perf.records import SampleBatch

MAX_BRANCH_SLICE = 1 << 18  # LBR entries resolved at once
# ... in address-only sessions (BOLT's formats): the slice is reduced on runtime addresses
# before mapping, so its temporaries are a few u8 columns; larger slices map and fold
# fewer rows (the distinct traces of a slice grow slower than the slice)
MAX_ADDRESS_SLICE = 1 << 20
ProgressFn = Callable[[str, int], None]  # (current file, samples read so far in all files);
# one with ``takes_fraction = True`` is called (file, samples, fraction of the current file
# read: 0..1, None for a pipe), for a percentage and time left


class Annotator:
    """Aggregation state shared by every batch of every profile."""

    def __init__(self, block_map: BlockMap, symbols: FunctionSymbols | None, *,
                 demangle: bool = True, drop_duplicate_newest: bool | None = None,
                 sections: list | None = None, _tables: tuple | None = None,
                 cluster_stats: bool = False, addresses: bool = False,
                 address_only: bool = False) -> None:
        self.block_map = block_map
        self.address_only = address_only
        self.drop_duplicate_newest = drop_duplicate_newest
        if _tables is None:
            _tables = (FunctionTable.build(symbols, block_map, demangle=demangle,
                                           sections=sections), BlockGeometry.of(block_map))
        self.functions, self.geom = _tables
        self.acct = Accounting()
        self.samples = SampleAggregator(block_map.num_blocks, self.functions, self.acct)
        self.cluster_stats = cluster_stats
        # instruction-address aggregates (BOLT's formats): opt-in, they cost about a
        # quarter of an LBR annotate
        self.addresses = AddressAggregator() if addresses or address_only else None
        self.branches = BranchAggregator(self.geom, self.acct,
                                         drop_duplicate_newest=drop_duplicate_newest,
                                         cluster_stats=cluster_stats,
                                         addresses=self.addresses)
        self.branches.address_only = address_only
        self.no_block_funcs = np.zeros(self.functions.num_keys, np.int64)
        self.fit = FitCollector()  # does the profile fit the binary (fit.py)
        # IP samples resolved once per distinct (pid, ip) where the mappings allow it
        # (distinct.py); False: each on its own (the reference the tests compare with)
        self.distinct = True
        self.branches.fit = self.fit

    def add_batch(self, batch: SampleBatch, resolver: Resolver) -> None:
        if self.address_only:  # BOLT's formats only: no block counts (spec/bolt.md)
            if len(batch) and self.addresses is not None:
                r = resolver.resolve_binary(batch.ip, batch.pid, batch.seq,  # type: ignore[attr-defined]
                                            batch.cpumode, batch.time)
                self.addresses.add_ips(r, batch.event)
        elif len(batch):
            d = distinct_samples(batch, resolver) if self.distinct else None
            if d is not None:
                self._add_distinct(batch, d, resolver)
            else:
                self._add_each(batch, resolver)
        if batch.has_branches:
            # slices of at most MAX_BRANCH_SLICE entries keep the per-entry temporaries
            # (resolved ends, keys) bounded whatever the stack depth
            ptr = batch.br_ptr
            most = MAX_ADDRESS_SLICE if self.address_only else MAX_BRANCH_SLICE
            i, n = 0, len(batch)
            while i < n:
                j = int(np.searchsorted(ptr, ptr[i] + most, side="right")) - 1
                j = min(max(j, i + 1), n)
                lo, hi = int(ptr[i]), int(ptr[j])
                self.branches.add(ptr[i:j + 1] - lo, batch.br_from[lo:hi], batch.br_to[lo:hi],
                                  batch.br_flags[lo:hi], batch.pid[i:j], batch.seq[i:j],
                                  resolver, batch.time[i:j])
                i = j

    def _add_each(self, batch: SampleBatch, resolver: Resolver) -> None:
        """The IP samples of a batch, each resolved on its own."""
        r = resolver.resolve(batch.ip, batch.pid, batch.seq, batch.cpumode, None, batch.time)
        self.samples.add(r, batch.period, resolver.dso_names)
        if self.addresses is not None:
            self.addresses.add_ips(r, batch.event)
        self.fit.add_ips(r)
        nb = np.flatnonzero(r.where == IN_FUNCTION_NO_BLOCK)
        if len(nb):
            k = self.functions.key_at(r.vaddr[nb], r.func[nb])
            k = k[k >= 0]
            self.no_block_funcs += np.bincount(k, minlength=len(self.no_block_funcs))

    def _add_distinct(self, batch: SampleBatch, d: Distinct, resolver: Resolver) -> None:
        """The IP samples of a batch, resolved once per distinct key (``distinct.py``) and
        added with their weights: the same counts and buckets as :meth:`_add_each`."""
        r = resolver.resolve(d.ip, d.pid, d.seq, None, None, d.time)
        self.samples.add_rows(r, d.count, d.period, resolver.dso_names)
        if self.addresses is not None:
            self.addresses.add_ips(r, d.event, d.count)
        if self.fit.wants_ips:  # the first in-block samples, in sample order
            self.fit.add_ips(d.expand(r))
        nb = np.flatnonzero(r.where == IN_FUNCTION_NO_BLOCK)
        if len(nb):
            k = self.functions.key_at(r.vaddr[nb], r.func[nb])
            ok = np.flatnonzero(k >= 0)
            np.add.at(self.no_block_funcs, k[ok], d.count[nb[ok]])

    def fresh(self) -> Annotator:
        """An empty annotator sharing this one's tables (to aggregate one profile apart)."""
        a = Annotator(self.block_map, None, drop_duplicate_newest=self.drop_duplicate_newest,
                      _tables=(self.functions, self.geom), cluster_stats=self.cluster_stats,
                      addresses=self.addresses is not None, address_only=self.address_only)
        a.distinct = self.distinct
        return a

    def merge(self, other: Annotator) -> None:
        """Add the counts of an annotator made by :meth:`fresh`."""
        self.acct.merge(other.acct)
        s, o = self.samples, other.samples
        s.block_samples += o.block_samples
        s.block_period += o.block_period
        s.func_samples += o.func_samples
        s.func_period += o.func_period
        self.branches.merge(other.branches)
        if self.addresses is not None and other.addresses is not None:
            self.addresses.merge(other.addresses)
        self.no_block_funcs += other.no_block_funcs
        self.fit.merge(other.fit)

    def hot_no_block(self, n: int = 5) -> list[tuple[str, int]]:
        top = np.argsort(-self.no_block_funcs, kind="stable")[:n]
        return [(self.functions.names[k], int(self.no_block_funcs[k])) for k in top.tolist()
                if self.no_block_funcs[k] > 0]

    def result(self, *, binary: str, build_id: str | None, profiles: list[ProfileInfo],
               evidence: Evidence | None = None, warnings: Sequence[Diagnostic] = (),
               go_build_id: str | None = None, loaded: Any = None) -> AnnotateResult:
        """The raw result of the counts so far, diagnosed against ``evidence`` (when
        given); ``loaded``: the Binary the run loaded, carried for the renderers."""
        self.acct.check()
        addresses = self.addresses.result() if self.addresses is not None else None
        if addresses is not None:
            addresses.check()
        has_lbr = self.acct.total_branches > 0
        count_source = "lbr" if has_lbr else "none"
        status = Status.OK
        msgs = list(warnings)
        if self.address_only and addresses is not None:
            # no block counts were made: the address aggregates say whether anything mapped
            has_lbr = addresses.entries + addresses.duplicate > 0
            if not int(addresses.ip_samples.sum()) and not int(addresses.trace_count.sum()):
                status = Status.NOTHING_MAPPED
                msgs.insert(0, Diagnostic(
                    f"no sample IP and no branch address of the {addresses.samples} samples "
                    f"lies in {binary}: the BOLT profile is empty (`bbmap annotate` with the "
                    "text format says why nothing maps)", severity="error"))
        elif evidence is not None:
            evidence.hot_no_block = self.hot_no_block()
            status, found = diagnose(self.acct, evidence)
            msgs = found + msgs
        fb, tb, kind, cnt = self.branches.edges()
        return AnnotateResult(
            binary=binary, build_id=build_id, block_map=self.block_map,
            functions=self.functions, accounting=self.acct, profiles=profiles,
            block_samples=self.samples.block_samples, block_period=self.samples.block_period,
            block_count=self.branches.block_counts(), func_samples=self.samples.func_samples,
            func_period=self.samples.func_period, edge_from=fb, edge_to=tb, edge_kind=kind,
            edge_count=cnt, has_lbr=has_lbr, warnings=msgs, status=status,
            block_start=self.geom.start, cluster=self.branches.cluster_moments(),
            addresses=addresses, count_source=count_source, go_build_id=go_build_id,
            loaded=loaded)
