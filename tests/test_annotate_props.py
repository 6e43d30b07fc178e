"""Property test: the vectorized LBR aggregation equals a plain per-range reference.

The reference below walks every stack and every range with Python loops over a literal
block table, applying the rules of spec/annotate.md directly; the code under test uses
bulk lookups and difference arrays.  Random stacks mix block starts, block middles, a
map-less function, the binary outside functions, libc, the kernel and unmapped addresses.
"""

from __future__ import annotations

import pytest
from helpers import KADDR, LIBC, batch, block_map, resolver, rt, symbols
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.aggregate.annotator import Annotator

# (start, end, function, range, can_fall_through) per global block, as in the helpers
BLOCKS = [(0x1000, 0x1010, 0, 0, True), (0x1010, 0x1018, 0, 0, True),
          (0x1018, 0x1020, 0, 0, False), (0x2000, 0x2010, 1, 1, True),
          (0x2010, 0x2018, 1, 1, False), (0x2018, 0x2020, 1, 1, True),
          (0x3000, 0x3010, 1, 2, False)]
POINTS = ([rt(a) for b in BLOCKS for a in (b[0], b[0] + 2, b[1] - 1)]
          + [rt(0x4010), rt(0x4800), LIBC + 0x40, KADDR, 0x10])


def where(addr: int) -> tuple[str, int]:
    for i, (s, e, *_rest) in enumerate(BLOCKS):
        if rt(s) <= addr < rt(e):
            return "in_block", i
    if rt(0x4000) <= addr < rt(0x4100):
        return "in_function_no_block", -1
    if rt(0x1000) <= addr < rt(0x5000):
        return "outside_function", -1
    if LIBC <= addr < LIBC + 0x100000:
        return "other_dso", -1
    if addr >= 0xFFFF_8000_0000_0000:
        return "kernel", -1
    return "unmapped", -1


def reference(stacks):
    counts = [0] * len(BLOCKS)
    edges: dict[tuple[int, int], int] = {}
    buckets: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for stack in stacks:
        stack = list(stack)
        if len(stack) >= 2 and stack[0] == stack[1]:
            buckets["duplicate"] = buckets.get("duplicate", 0) + 1
            stack = stack[1:]
        for f, t in stack:
            wf, _ = where(f)
            wt, _ = where(t)
            b = wf if wf != "in_block" else wt
            buckets[b] = buckets.get(b, 0) + 1
            if b == "in_block":
                key = (where(f)[1], where(t)[1])
                edges[key] = edges.get(key, 0) + 1
        for i in range(len(stack) - 1):
            start, end = stack[i + 1][1], stack[i][0]
            (ws, s), (we, e) = where(start), where(end)
            if ws != "in_block" or we != "in_block":
                r = "not_in_block"
            elif start > end or s > e:
                r = "reversed"
            elif BLOCKS[s][2] != BLOCKS[e][2]:
                r = "cross_function"
            elif BLOCKS[s][3] != BLOCKS[e][3]:
                r = "cross_range"
            elif not all(BLOCKS[k][4] for k in range(s, e)):
                r = "no_fall_through"
            else:
                r = "valid"
                first = s if start == rt(BLOCKS[s][0]) else s + 1
                for k in range(first, e + 1):
                    counts[k] += 1
            reasons[r] = reasons.get(r, 0) + 1
    return counts, edges, buckets, reasons


entry = st.tuples(st.sampled_from(POINTS), st.sampled_from(POINTS))
stacks = st.lists(st.lists(entry, min_size=0, max_size=6), min_size=1, max_size=12)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(stacks=stacks, dup=st.lists(st.booleans(), min_size=12, max_size=12))
def test_vectorized_equals_reference(stacks, dup):
    stacks = [([s[0]] + s) if d and s else s for s, d in zip(stacks, dup)]
    a = Annotator(block_map(), symbols(), drop_duplicate_newest=True)  # the rule, forced
    a.add_batch(batch([rt(0x1004)] * len(stacks), stacks=stacks), resolver())
    res = a.result(binary="t", build_id=None, profiles=[])
    counts, edges, buckets, reasons = reference(stacks)
    assert res.block_count.tolist() == counts
    taken: dict[tuple[int, int], int] = {}
    for f, t, k, n in zip(res.edge_from.tolist(), res.edge_to.tolist(),
                          res.edge_kind.tolist(), res.edge_count.tolist()):
        if k != 4:  # fall-through edges come from ranges, not records
            taken[(f, t)] = taken.get((f, t), 0) + n
    assert taken == edges
    got_b = {k: v for k, v in res.accounting.branch_buckets().items() if v}
    assert got_b == buckets
    got_r = {k: v for k, v in res.accounting.range_reasons().items() if v}
    assert got_r == reasons
    res.accounting.check()
