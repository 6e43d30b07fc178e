"""Call-chain clustering (C3): an order of functions for the linker.

Ottoni & Maher, "Optimizing Function Placement for Large-Scale Data-Center Applications"
(CGO 2017), as google/llvm-propeller runs it (``propeller/chain_cluster_builder.cc``):

1. every function starts as its own cluster; a function's *weight* is the sum of the
   calls into it from other functions (returns excluded);
2. functions are visited by weight, heaviest first (ties: lower index).  A function whose
   execution density (count per byte) is below ``MIN_DENSITY`` is left alone.  Otherwise its
   cluster is appended to the cluster of its heaviest caller cluster -- "heaviest" summing
   the calls into the function's entry from each other cluster -- skipping
   * calls lighter than a tenth of the function's entry count (``HOT_EDGE_RATIO``),
   * caller clusters bigger than ``merge_size_limit`` bytes (and nothing is appended to
     from a cluster that is itself over the limit),
   * merges that would cut the caller cluster's density by more than an eighth
     (``DENSITY_DEGRADATION``);
   ties between caller clusters go to the larger cluster id, as Propeller's ``max_element``
   over ``(weight, id)`` does;
3. clusters are finally ordered by density, densest first (ties: lower id).

A cluster's id is the id of its first function; ids are the functions' indexes in address
order.  Arrays in, a list of function indexes out; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# propeller/chain_cluster_builder.cc constants and propeller_options.proto default
HOT_EDGE_RATIO = 10  # kHotEdgeRelativeFrequencyThreshold
DENSITY_DEGRADATION = 8  # kExecutionDensityDegradationThreshold
MIN_DENSITY = 0.005  # kChainExecutionDensityThreshold
MERGE_SIZE_LIMIT = 2 * 1024 * 1024  # cluster_merge_size_threshold (2 MiB)


def call_chain_order(sizes: Sequence[int], freqs: Sequence[float],
                     entry_freqs: Sequence[float], calls: Sequence | np.ndarray,
                     merge_size_limit: int = MERGE_SIZE_LIMIT) -> list[int]:
    """Order functions by call-chain clustering.

    ``sizes``: bytes laid out per function (its hot part); ``freqs``: its execution count
    (sum of its blocks' counts); ``entry_freqs``: its entry block's count; ``calls``:
    (caller, callee, count) rows for calls into the callee's entry."""
    n = len(sizes)
    size = [int(s) for s in sizes]
    freq = [float(f) for f in freqs]
    entry = [float(f) for f in entry_freqs]
    c = np.asarray(calls, dtype=np.float64).reshape(-1, 3) if len(calls) else np.zeros((0, 3))
    src, dst, w = c[:, 0].astype(np.int64), c[:, 1].astype(np.int64), c[:, 2]
    keep = (src != dst) & (w > 0)
    src, dst, w = src[keep], dst[keep], w[keep]
    # the calls into each function, caller and count, in a fixed order
    into: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, x in sorted(zip(src.tolist(), dst.tolist(), w.tolist())):
        into[b].append((a, x))
    weight_to = [sum(x for _, x in into[i]) for i in range(n)]
    cluster_of = list(range(n))  # function -> cluster id
    members: dict[int, list[int]] = {i: [i] for i in range(n)}
    csize = {i: size[i] for i in range(n)}
    cfreq = {i: freq[i] for i in range(n)}

    def density(f: float, s: int) -> float:
        return f / max(s, 1)

    for fn in sorted((i for i in range(n) if weight_to[i] > 0),
                     key=lambda i: (-weight_to[i], i)):
        if density(freq[fn], size[fn]) < MIN_DENSITY:
            continue
        cl = cluster_of[fn]
        if csize[cl] > merge_size_limit:
            continue
        weight_from: dict[int, float] = {}
        for caller, x in into[fn]:
            if x * HOT_EDGE_RATIO < entry[fn]:
                continue  # cold relative to the function's entry
            pc = cluster_of[caller]
            if pc == cl or csize[pc] > merge_size_limit:
                continue
            if (DENSITY_DEGRADATION * csize[pc] * (cfreq[cl] + cfreq[pc])
                    < cfreq[pc] * (csize[cl] + csize[pc])):
                continue  # the caller cluster would lose too much density
            weight_from[pc] = weight_from.get(pc, 0.0) + x
        if not weight_from:
            continue
        best = max(weight_from, key=lambda k: (weight_from[k], k))
        for f in members[cl]:
            cluster_of[f] = best
        members[best].extend(members.pop(cl))
        csize[best] += csize.pop(cl)
        cfreq[best] += cfreq.pop(cl)
    order = sorted(members, key=lambda k: (-density(cfreq[k], csize[k]), k))
    return [f for k in order for f in members[k]]


def hottest_first(freqs: Sequence[float], samples: Sequence[int] | None = None) -> list[int]:
    """Functions by execution count, then IP samples, descending (ties: lower index) --
    the order when the profile has no calls to cluster by."""
    s = list(samples) if samples is not None else [0] * len(freqs)
    return sorted(range(len(freqs)), key=lambda i: (-float(freqs[i]), -int(s[i]), i))
