"""Aggregation rules on a hand-built binary; expected values are derived by hand in the
comments (the layout is in tests/helpers.py, "a hand-built binary")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import LIBC, batch, block_map, resolver, rt, symbols

from bbmap.aggregate import AnnotateResult
from bbmap.aggregate.accounting import Accounting, AccountingError
from bbmap.aggregate.annotator import Annotator

L = LIBC + 0x1000


def run(*batches, **kw) -> AnnotateResult:
    a = Annotator(block_map(), symbols(), **kw)
    r = resolver()
    for b in batches:
        a.add_batch(b, r)
    return a.result(binary="t", build_id=None, profiles=[])


def test_ip_samples_buckets_blocks_functions():
    ips = [rt(0x1004), rt(0x1004), rt(0x1012), rt(0x201F), rt(0x3004), rt(0x4010),
           rt(0x4500), LIBC + 0x10, 0xFFFF_FFFF_8100_0000, 0x10]
    per = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    res = run(batch(ips, per))
    a = res.accounting
    assert a.sample_buckets() == {"in_block": 5, "in_function_no_block": 1,
                                  "outside_function": 1, "other_dso": 1, "kernel": 1,
                                  "unmapped": 1, "other_pid": 0}
    assert a.period_buckets()["in_block"] == 10 + 20 + 30 + 40 + 50
    assert a.total_samples == 10 and a.total_period == 550
    assert a.dso_samples == {"/usr/lib/libc.so.6": 1}
    # blocks: alpha bb0 x2, bb1 x1; beta bb3 (0x2018..) x1; beta.cold bb2 x1
    assert res.block_samples.tolist() == [2, 1, 0, 0, 0, 1, 1]
    assert res.block_period.tolist() == [30, 30, 0, 0, 0, 40, 50]
    names = res.functions.names
    by = {names[k]: int(res.func_samples[k]) for k in range(len(names))}
    assert by == {"alpha": 3, "beta": 2, "gamma": 1}  # beta.cold folded into beta
    hot = res.hot_functions()
    assert [f.name for f in hot] == ["alpha", "beta", "gamma"]
    assert res.status == "ok"


def test_lbr_edges_ranges_counts():
    # one call/return story, newest first (see module doc for block indexes)
    story = [(rt(0x300F), L), (rt(0x2016), rt(0x3000)), (rt(0x101F), rt(0x200D)),
             (rt(0x2008), rt(0x1000))]
    res = run(batch([rt(0x300F)], stacks=[story]))
    a = res.accounting
    assert a.total_branches == 4
    assert a.branch_buckets() == {"in_block": 3, "in_function_no_block": 0,
                                  "outside_function": 0, "other_dso": 1, "kernel": 0,
                                  "unmapped": 0, "other_pid": 0, "duplicate": 0}
    # ranges: [0x3000,0x300f] beta bb2; [0x200d,0x2016] beta bb0,bb1; [0x1000,0x101f] alpha all
    assert a.range_reasons()["valid"] == 3 and a.total_ranges == 3
    # beta bb0's range starts at 0x200d, after the call returned: bb0 was entered before
    # the call (outside this stack), so only bb1 counts from that range
    assert res.block_count.tolist() == [1, 1, 1, 0, 1, 0, 1]
    edges = {(int(f), int(t), int(k)): int(c) for f, t, k, c in
             zip(res.edge_from, res.edge_to, res.edge_kind, res.edge_count)}
    from bbmap.aggregate.lbr import K_BRANCH, K_CALL, K_FALLTHROUGH, K_RETURN
    assert edges == {(4, 6, K_BRANCH): 1, (2, 3, K_RETURN): 1, (3, 0, K_CALL): 1,
                     (0, 1, K_FALLTHROUGH): 1, (1, 2, K_FALLTHROUGH): 1,
                     (3, 4, K_FALLTHROUGH): 1}
    j = res.to_json()
    beta = next(f for f in j["functions"] if f["name"] == "beta")
    kinds = {(e["from"], e["to"], e["kind"]) for e in beta["edges"]}
    assert kinds == {(1, 2, "branch"), (0, "alpha:0", "call"), (0, 1, "fallthrough")}
    alpha = next(f for f in j["functions"] if f["name"] == "alpha")
    assert (2, "beta:0", "return") in {(e["from"], e["to"], e["kind"]) for e in alpha["edges"]}
    assert [b["count"] for b in alpha["blocks"]] == [1, 1, 1]


@pytest.mark.parametrize("start,end,reason", [
    (0x1004, 0x1012, "valid"),
    (0x1018, 0x1004, "reversed"),
    (0x1004, 0x2004, "cross_function"),
    (0x2004, 0x3004, "cross_range"),
    (0x2004, 0x201A, "no_fall_through"),  # beta bb1 (a jmp) lies before the end block
    (0x4010, 0x4020, "not_in_block"),
    (0x2018, 0x201C, "valid"),  # a range inside one block: only that block counts
])
def test_range_validity(start, end, reason):
    # a two-entry stack [(end -> L), (L -> start)] makes exactly the range [start, end]
    res = run(batch([rt(end)], stacks=[[(rt(end), L), (L, rt(start))]]))
    rr = res.accounting.range_reasons()
    assert rr[reason] == 1 and sum(rr.values()) == 1
    if reason != "valid":
        assert res.block_count.sum() == 0


def test_range_counts_cover_blocks():
    stacks = [[(rt(0x1012), L), (L, rt(0x1000))], [(rt(0x201C), L), (L, rt(0x2018))]]
    res = run(batch([1, 2], stacks=stacks))
    assert res.block_count.tolist() == [1, 1, 0, 0, 0, 1, 0]
    # a range starting inside alpha bb0 (a return landing) enters only bb1
    res = run(batch([1], stacks=[[(rt(0x1012), L), (L, rt(0x1004))]]))
    assert res.block_count.tolist() == [0, 1, 0, 0, 0, 0, 0]
    fb, tb, kind, cnt = res.edge_from, res.edge_to, res.edge_kind, res.edge_count
    assert (0, 1, 4, 1) in set(zip(fb.tolist(), tb.tolist(), kind.tolist(), cnt.tolist()))


def test_duplicated_newest_entry_dropped():
    dup = (rt(0x2016), rt(0x3000))
    stack = [dup, dup, (L, rt(0x2000))]
    res = run(batch([rt(0x3000)], stacks=[stack]), drop_duplicate_newest=True)
    bb = res.accounting.branch_buckets()
    assert bb["duplicate"] == 1 and bb["in_block"] == 1 and bb["other_dso"] == 1
    # after the drop the range is [0x2000, 0x2016] (beta bb0, bb1), not the bogus reversed one
    assert res.accounting.range_reasons() == {"valid": 1, "not_in_block": 0, "reversed": 0,
                                              "cross_function": 0, "cross_range": 0,
                                              "no_fall_through": 0}
    assert res.block_count.tolist() == [0, 0, 0, 1, 1, 0, 0]
    # without the rule the duplicate makes a reversed range
    res2 = run(batch([rt(0x3000)], stacks=[stack]), drop_duplicate_newest=False)
    assert res2.accounting.range_reasons()["reversed"] == 1


def _loop_stacks(n: int, quirk: bool) -> list:
    """``n`` stacks of a program whose two hottest branches alternate (so deeper
    neighbours are rarely equal), entry 0 duplicated when ``quirk``."""
    a, b = (rt(0x2016), rt(0x2000)), (rt(0x1012), rt(0x1004))
    stacks = []
    for i in range(n):
        st = [a if (i + k) % 2 else b for k in range(8)]
        if quirk:
            st = [st[0]] + st
        stacks.append(st)
    return stacks


def test_duplicated_newest_entry_detected_per_batch():
    from bbmap.aggregate.lbr import duplicate_newest_quirk

    for quirk in (False, True):
        stacks = _loop_stacks(64, quirk)
        b = batch([s[0][1] for s in stacks], stacks=stacks)
        verdict, (p0, deeper, n) = duplicate_newest_quirk(b.br_ptr, b.br_from, b.br_to,
                                                          b.br_flags)
        assert verdict is quirk and n == 64 and deeper == 0.0
        assert p0 == (1.0 if quirk else 0.0)
        res = run(b)  # auto: drops exactly the quirk's copies, and says so
        assert res.accounting.branch_buckets()["duplicate"] == (64 if quirk else 0)
    # a one-block loop repeats at every depth: equal neighbours are the program, not the quirk
    same = [[(rt(0x2016), rt(0x2000))] * 8 for _ in range(64)]
    b = batch([rt(0x2000)] * 64, stacks=same)
    verdict, (p0, deeper, _) = duplicate_newest_quirk(b.br_ptr, b.br_from, b.br_to, b.br_flags)
    assert p0 == deeper == 1.0 and verdict  # indistinguishable; dropping costs 1 of 8 here
    # too few stacks to judge: no verdict, the default keeps every entry
    few = _loop_stacks(8, True)
    assert duplicate_newest_quirk(*_cols(batch([s[0][1] for s in few], stacks=few)))[1] is None


def _cols(b):
    return b.br_ptr, b.br_from, b.br_to, b.br_flags


def test_kernel_entries_bucketed_and_not_ranged():
    stack = [(KERNEL_A := 0xFFFF_FFFF_8100_0010, rt(0x1004)), (rt(0x1012), KERNEL_A)]
    res = run(batch([rt(0x1004)], stacks=[stack]))
    bb = res.accounting.branch_buckets()
    assert bb["kernel"] == 2
    assert res.accounting.range_reasons()["not_in_block"] == 1


def test_batches_merge_equals_one_batch():
    ips = [rt(0x1004), rt(0x2004), rt(0x3004), LIBC + 1]
    stacks = [[(rt(0x1012), L), (L, rt(0x1004))]] * 4
    one = run(batch(ips, stacks=stacks))
    two = run(batch(ips[:2], stacks=stacks[:2]), batch(ips[2:], stacks=stacks[2:]))
    assert one.to_json() == two.to_json()


def test_accounting_check_catches_a_lost_sample():
    a = Accounting()
    a.add_samples(np.array([0, 1], np.int8), np.array([1, 1], np.uint64))
    a.total_samples, a.total_period = 3, 2
    with pytest.raises(AccountingError):
        a.check()


def test_branch_slicing_equals_one_pass(monkeypatch):
    import bbmap.aggregate.annotator as api

    stacks = [[(rt(0x1012), L), (L, rt(0x1004)), (rt(0x2016), rt(0x3000))]] * 7
    ips = [rt(0x1004)] * 7
    one = run(batch(ips, stacks=stacks))
    monkeypatch.setattr(api, "MAX_BRANCH_SLICE", 4)  # cut inside the batch
    many = run(batch(ips, stacks=stacks))
    assert one.to_json() == many.to_json()
    assert many.accounting.total_branches == 21


def test_period_sums_exact_beyond_float_precision():
    from bbmap.aggregate.samples import _add_weighted

    acc = np.zeros(3, np.uint64)
    big = np.uint64((1 << 62) + 1)
    _add_weighted(acc, np.array([1, 1, 2]), np.array([big, np.uint64(1), np.uint64(5)]))
    assert acc.tolist() == [0, (1 << 62) + 2, 5]
    _add_weighted(acc, np.array([0, 0]), np.array([3, 4], np.uint64))
    assert acc.tolist() == [7, (1 << 62) + 2, 5]


def test_fresh_and_merge_equal_one_annotator():
    ips = [rt(0x1004), rt(0x2004), LIBC + 3]
    stacks = [[(rt(0x1012), L), (L, rt(0x1000))], [(rt(0x2016), rt(0x3000))], []]
    one = Annotator(block_map(), symbols())
    r = resolver()
    one.add_batch(batch(ips, stacks=stacks), r)
    one.add_batch(batch(ips[:1], stacks=stacks[:1]), r)
    main = Annotator(block_map(), symbols())
    for b in (batch(ips, stacks=stacks), batch(ips[:1], stacks=stacks[:1])):
        sub = main.fresh()
        sub.add_batch(b, r)
        main.merge(sub)
    kw = dict(binary="t", build_id=None, profiles=[])
    assert one.result(**kw).to_json() == main.result(**kw).to_json()


# quirk evidence across batches (a review regression: spec/annotate.md, "LBR branch records")
def _b(quirk: bool):
    stacks = _loop_stacks(64, quirk)
    return batch([s[0][1] for s in stacks], stacks=stacks)


def test_quirk_warning_evidence_comes_from_a_batch_that_showed_the_quirk():
    # batch 1 shows the quirk (p0 = 1.0), batch 2 does not (p0 = 0.0): the warning's
    # evidence ("entries 0 and 1 are equal in X% ...") must be the quirk's, not batch 2's
    a = Annotator(block_map(), symbols())
    r = resolver()
    a.add_batch(_b(True), r)
    a.add_batch(_b(False), r)
    assert a.branches.quirk_batches == 1
    assert a.branches.quirk_evidence is not None and a.branches.quirk_evidence[0] == 1.0
    # the same across files: a quirk profile merged with a later profile without it
    top = Annotator(block_map(), symbols())
    for q in (True, False):
        sub = top.fresh()
        sub.add_batch(_b(q), r)
        top.merge(sub)
    assert top.branches.quirk_batches == 1 and top.branches.quirk_evidence[0] == 1.0
