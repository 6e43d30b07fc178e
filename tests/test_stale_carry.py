"""Carrying a profile of one build onto the next (bbmap.stale, spec/stale.md), measured on
corpus/stale: two real releases of one program built by clang 22 (-O2 and -O3, with and
without -emit-bb-hash), real cpu-clock profiles of every build, and valgrind's exact
block counts of the next builds.  The carried counts are held against the exact counts
and against what a fresh profile of the new build gives; the naive path (samples moved
block ID for block ID, what an old cluster file does) is the baseline to beat."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from bbmap.binary import load_binary
from bbmap.run import annotate, apply_inference
from bbmap.stale.carry import carry
from bbmap.stale.fingerprint import function_blocks
from bbmap.stale.names import bare_name, base_name, match_functions
from tests.helpers import CORPUS

STALE = CORPUS / "stale"
# (profiled build, next build): a release's edits at -O2 without and with the block
# hashes, and the same source at -O3
PAIRS = [("v1-O2", "v2-O2"), ("v1-O2-hash", "v2-O2-hash"), ("v1-O2-hash", "v1-O3-hash")]


def _bin(name: str) -> str:
    return str(STALE / "bin" / name)


def _perf(name: str) -> str:
    return str(STALE / "profiles" / f"{name}.perf.data")


@cache
def _old(name: str):  # noqa: ANN202 - an AnnotateResult
    return annotate([_perf(name)], _bin(name), inference="off", addresses=True)


@cache
def _carried(old: str, new: str):  # noqa: ANN202 - (AnnotateResult, CarryReport)
    return carry(_old(old), load_binary(_bin(old)), load_binary(_bin(new)))


@cache
def _fresh(name: str):  # noqa: ANN202
    return annotate([_perf(name)], _bin(name))


def _truth(res, name: str) -> np.ndarray:  # noqa: ANN001
    ex = json.loads((STALE / "exact" / f"{name}.json").read_text())
    by_addr = {int(b["address"], 16): b["count"] or 0 for b in ex["blocks"]}
    return np.array([by_addr.get(int(a), 0) for a in res.block_start], float)


def _error(est: np.ndarray, truth: np.ndarray) -> float:
    """Sum of absolute errors over the exact total, the estimate scaled to the truth's
    total (inferred counts are relative)."""
    est = est.astype(float)
    return float(np.abs(est * truth.sum() / est.sum() - truth).sum() / truth.sum())


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Shared share of two sample distributions over the same blocks (1: identical)."""
    a, b = a / a.sum(), b / b.sum()
    return float(1 - 0.5 * np.abs(a - b).sum())


def _naive_samples(old: str, new: str) -> np.ndarray:
    """The old profile's block samples moved to the new block of the same ID in the
    function of the same name (suffixes aside): what an old cluster file assumes."""
    r = _old(old)
    mo, mn = load_binary(_bin(old)).block_map, load_binary(_bin(new)).block_map
    by_name = {base_name(n): g for g, n in enumerate(mn.func_name)}
    out = np.zeros(mn.num_blocks, np.int64)
    for f, n in enumerate(mo.func_name):
        g = by_name.get(base_name(n))
        if g is None:
            continue
        ids = {int(mn.block_id[b]): b for b in function_blocks(mn, g)}
        for a in function_blocks(mo, f).tolist():
            b = ids.get(int(mo.block_id[a]))
            if b is not None:
                out[b] += r.block_samples[a]
    return out


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_carried_samples_land_where_a_fresh_profile_puts_them(old: str, new: str) -> None:
    res, _rep = _carried(old, new)
    fresh = _fresh(new).block_samples
    carried = _overlap(res.block_samples, fresh)
    naive = _overlap(_naive_samples(old, new), fresh)
    # two real profiles of one binary overlap ~0.95 here (sampling noise); the carried
    # one loses only the removed and inlined functions' share
    assert carried >= 0.85, carried
    assert carried >= naive - 1e-9, (carried, naive)


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_carried_counts_close_to_a_fresh_profiles_against_valgrind(old: str, new: str) -> None:
    res, _rep = _carried(old, new)
    assert res.count_source == "inferred"
    truth = _truth(res, new)
    carried = _error(res.block_count, truth)
    fresh = _error(_fresh(new).block_count, truth)
    assert carried <= fresh + 0.05, (carried, fresh)


def test_naive_path_is_worse_where_ids_moved() -> None:
    """v2 adds an early return to classify(): its block IDs shift; moving samples ID for
    ID puts them on the wrong blocks, and the counts show it."""
    old, new = "v1-O2-hash", "v2-O2-hash"
    res, _rep = _carried(old, new)
    truth = _truth(res, new)
    naive = replace(res, block_samples=_naive_samples(old, new), addresses=None,
                    count_source="none")
    naive = apply_inference(naive, load_binary(_bin(new)), "on")
    assert _error(res.block_count, truth) + 0.2 < _error(naive.block_count, truth)


def test_report_says_how_each_function_carried() -> None:
    _res, rep = _carried("v1-O2", "v2-O2")
    by = {base_name(f.name): f for f in rep.functions}
    # retire() is gone in release 2 (its call taken out): nothing to carry to; mix() is
    # inlined into checksum(): its samples go to the copy (the call's block grew)
    assert by["_ZL6retirePKji"].found_by is None
    assert by["_ZL6retirePKji"].dropped == by["_ZL6retirePKji"].samples > 0
    assert by["mix"].found_by == "inlined"
    assert by["mix"].inlined > 0.9 * by["mix"].samples
    # the static functions' -funique-internal-linkage-names suffix changed with the file
    assert by["_ZL8classifyj"].found_by == "suffix"
    assert by["main"].found_by == "name"
    # insertion_sort() is unchanged: every sample carried exactly
    assert by["_ZL14insertion_sortPji"].exact == by["_ZL14insertion_sortPji"].samples
    # classify() is edited (an early return, registers reallocated): its blocks carry by
    # hash, and the switch's cases whose registers changed by their jump-table entry
    c = by["_ZL8classifyj"]
    assert c.exact == 0 and c.hash > 0.5 * c.samples and c.anchor > 0.1 * c.samples
    assert c.dropped == 0
    for f in rep.functions:
        assert f.exact + f.hash + f.anchor + f.inlined + f.dropped == f.samples
    assert 0.97 < rep.carried_share < 1  # retire() is the rest
    assert not rep.too_little
    doc = rep.to_json()
    worst = [f["share"]["dropped"] for f in doc["functions"]]
    assert worst[0] == 1.0  # worst first
    assert doc["functions"][0]["function"] in ("mix", by["_ZL6retirePKji"].name)


def test_o3_rebuild_matches_unchanged_functions_exactly() -> None:
    _res, rep = _carried("v1-O2-hash", "v1-O3-hash")
    by = {base_name(f.name): f for f in rep.functions}
    assert by["_ZL8classifyj"].exact == by["_ZL8classifyj"].samples
    assert rep.carried_share > 0.95


def test_identical_rebuild_gives_the_direct_counts() -> None:
    """A byte-identical rebuild: every function exact, every address carried unchanged,
    so the counts are those of annotating the profile directly."""
    old, new = "v1-O2", "v1-O2-rebuild"
    assert (STALE / "bin" / old).read_bytes() == (STALE / "bin" / new).read_bytes()
    res, rep = carry(_old(old), load_binary(_bin(old)), load_binary(_bin(new)))
    direct = _fresh(old)
    assert rep.total("exact") == rep.samples
    for col in ("block_samples", "block_count", "edge_from", "edge_to", "edge_count",
                "block_low", "block_high"):
        np.testing.assert_array_equal(getattr(res, col), getattr(direct, col), err_msg=col)


def test_carry_is_deterministic() -> None:
    a, ra = carry(_old("v1-O2"), load_binary(_bin("v1-O2")), load_binary(_bin("v2-O2")))
    b, rb = carry(_old("v1-O2"), load_binary(_bin("v1-O2")), load_binary(_bin("v2-O2")))
    np.testing.assert_array_equal(a.block_count, b.block_count)
    assert ra.to_json() == rb.to_json()


def test_too_little_carried_is_an_error() -> None:
    """A profile carried onto an unrelated program: almost nothing matches."""
    other = load_binary(str(CORPUS / "demo" / "layout"))
    res, rep = carry(_old("v1-O2"), load_binary(_bin("v1-O2")), other)
    assert rep.too_little
    assert any(w.severity == "error" and "carried" in w.message for w in res.warnings)


def test_functions_matched_through_suffixes_and_contents() -> None:
    old = ["main", "f.llvm.123", "g.__uniq.1", "h", "dup.__uniq.1", "dup.__uniq.2", None]
    new = ["main", "f.llvm.999", "g.__uniq.2", "renamed", "dup.__uniq.7", "dup.__uniq.8"]
    contents = {("old", 3): 42, ("new", 3): 42, ("old", 4): 1, ("old", 5): 2,
                ("new", 4): 2, ("new", 5): 1}
    got, how = match_functions(old, new, range(6), lambda s, f: contents.get((s, f), 0))
    assert got == {0: 0, 1: 1, 2: 2, 3: 3, 4: 5, 5: 4}
    assert how == {0: "name", 1: "suffix", 2: "suffix", 3: "content", 4: "suffix",
                   5: "suffix"}
    assert base_name("x.__uniq.12.llvm.34") == "x"


def test_functions_matched_through_renamed_parameter_types() -> None:
    """zstd 1.5.7 renamed ZSTD_matchState_t to ZSTD_MatchState_t: every static function
    taking one got another mangled name under -funique-internal-linkage-names."""
    old = ["_ZL23ZSTD_compressBlock_opt0P17ZSTD_matchState_tPKv.__uniq.1", "_ZL1fi"]
    new = ["_ZL1fj", "_ZL23ZSTD_compressBlock_opt0P17ZSTD_MatchState_tPKv.__uniq.1"]
    got, how = match_functions(old, new, range(2), lambda s, f: 0)
    assert got == {0: 1, 1: 0}
    assert how == {0: "signature", 1: "signature"}
    assert bare_name(old[0]) == "ZSTD_compressBlock_opt0"
    assert bare_name("main") == "main"


def test_inlined_callee_compiled_anew_carries_along_its_copy() -> None:
    """corpus/stale/src/varint.c: ``get_varint`` (a function with its own branches and
    loop) is inlined into ``scan()`` in release 2 and compiled anew there, so only a
    few of its copy's blocks have its opcodes.  Its other blocks' samples go to the copy's
    unmatched blocks at their relative position (the hot one- and two-byte paths first,
    the rare long-varint loop last), placed inside the blocks where the time model
    credits them (a sample on a block's first instruction counts for the block before):
    nothing of it is dropped, and the carried counts are held against valgrind's."""
    old, new = "varint-v1", "varint-v2"
    res, rep = _carried(old, new)
    by = {base_name(f.name): f for f in rep.functions}
    gv = by["_ZL10get_varintPKhPm"]
    assert gv.found_by == "inlined" and gv.inlined == gv.samples > 1000
    truth = _truth(res, new)
    carried = _error(res.block_count, truth)
    fresh = _error(_fresh(new).block_count, truth)
    # before (the rest dropped once some blocks matched by opcodes, the samples put on
    # block starts): 0.31
    assert carried < 0.25 and carried <= fresh + 0.1, (carried, fresh)
    # the copy's two-byte path (a quarter of the varints) runs: its block is counted
    # within a factor two of valgrind's share of the entry's count (it was ~1/20)
    g = res.block_map.func_name.index(by["_ZL4scanPKhi"].new_name)
    nb = function_blocks(res.block_map, g)
    cnt, tr = res.block_count[nb].astype(float), truth[nb]
    k = int(np.argsort(tr)[-3])  # the third most run block: the two-byte path
    ratio = (cnt[k] / cnt.max()) / (tr[k] / tr.max())
    assert 0.5 < ratio < 2, ratio


def test_inlined_samples_are_placed_inside_their_blocks() -> None:
    """Samples given to a block (an inlined callee's) go on its instructions from the
    third, never its first: the time model credits a sample on a block's first
    instruction to whichever block ran before, so samples put at the start are lost to
    the block (SQLite 3.54's inlined ``sqlite3GetVarint``)."""
    from bbmap.stale.carry import _inside
    from bbmap.stale.fingerprint import fingerprint

    b = load_binary(_bin("varint-v2"))
    m = b.block_map
    g = next(i for i, n in enumerate(m.func_name) if n and n.startswith("_ZL4scan"))
    fp = fingerprint(b, np.asarray([g]))
    blocks = [x for x in function_blocks(m, g).tolist() if len(fp.insn_addr[x]) >= 3]
    assert blocks
    for x in blocks:
        addrs = fp.insn_addr[x]
        placed = _inside(addrs, int(addrs[0]), 100)
        assert sum(k for _a, k in placed) == 100
        assert {a for a, _k in placed} <= set(addrs[2:].tolist())
    one = next(x for x in function_blocks(m, g).tolist() if len(fp.insn_addr[x]) == 1)
    assert _inside(fp.insn_addr[one], int(fp.insn_addr[one][0]), 5) == \
        [(int(fp.insn_addr[one][0]), 5)]


def test_edited_blocks_match_by_how_alike_their_instructions_are(monkeypatch) -> None:  # noqa: ANN001
    """corpus/stale/src/dispatch.c: an interpreter loop whose release 2 adds an opcode
    (the jump table grows: its entries no longer pair by index) and edits the bodies of
    several (an instruction more: other opcodes, no hash in common).  Those blocks match
    only by how alike their instructions are (pass 5): every sample carries, and they
    land where a fresh profile puts them (without the pass: 74% carried, overlap 0.72,
    and the edited bodies' blocks get no count); each of those blocks' counts is within
    a factor two of valgrind's (scaled to the function's total) with OR-Tools -- the
    built-in solver breaks the ties among equally cheap flows otherwise and puts one of
    them at 2.11x (spec/stale.md), so the counts are taken from an OR-Tools solve."""
    import importlib.util

    import bbmap.stale.match as match

    old, new = "dispatch-v1", "dispatch-v2"
    res, rep = _carried(old, new)
    counted = carry(_old(old), load_binary(_bin(old)), load_binary(_bin(new)),
                    solver="ortools")[0] if importlib.util.find_spec("ortools") else None
    fresh = _fresh(new)
    with_pass = _overlap(res.block_samples, fresh.block_samples)
    assert rep.carried_share > 0.99
    assert with_pass > 0.85, with_pass
    monkeypatch.setattr(match, "_similar_pass", lambda *a: False)
    res2, rep2 = carry(_old(old), load_binary(_bin(old)), load_binary(_bin(new)))
    assert rep2.carried_share < 0.9
    assert _overlap(res2.block_samples, fresh.block_samples) + 0.1 < with_pass
    m = res.block_map
    g = next(i for i, x in enumerate(m.func_name) if x and x.startswith("_ZL3run"))
    nb = function_blocks(m, g)
    truth = _truth(res, new)[nb]
    by_pass = [i for i, b in enumerate(nb.tolist())
               if res.block_samples[b] > 0 and res2.block_samples[b] == 0]
    assert len(by_pass) >= 3
    for i in by_pass:
        assert res2.block_count[nb[i]] == 0
        assert res.block_count[nb[i]] > 0
    if counted is None:
        pytest.skip("OR-Tools (bbmap[inference]) not installed: the counts' bound is its")
    cnt = counted.block_count[nb].astype(float)
    cnt *= truth.sum() / cnt.sum()
    for i in by_pass:
        assert 0.5 < cnt[i] / truth[i] < 2, (i, cnt[i], truth[i])


def test_similarity_is_the_dice_of_the_opcode_multisets() -> None:
    """``match.similar`` on real blocks of corpus/stale/bin/dispatch-v1 and -v2: a block is
    fully alike to itself and an unchanged block to its counterpart; an edited body (one
    instruction more) is alike in part; two empty blocks are alike."""
    from bbmap.stale.fingerprint import fingerprint
    from bbmap.stale.match import _dice, similar

    fps = {}
    for n in ("dispatch-v1", "dispatch-v2"):
        b = load_binary(_bin(n))
        g = next(i for i, x in enumerate(b.block_map.func_name) if x and x.startswith("_ZL3run"))
        fps[n] = (fingerprint(b, np.asarray([g])), function_blocks(b.block_map, g).tolist())
    (fo, ob), (fn, nb) = fps["dispatch-v1"], fps["dispatch-v2"]
    for a in ob:
        assert similar(fo, fo, a, a) == 1.0
    scores = sorted(max(similar(fo, fn, a, b) for b in nb) for a in ob if fo.text[a])
    assert scores[-1] == 1.0  # unchanged blocks
    assert any(0.5 <= s < 1.0 for s in scores)  # edited ones
    from collections import Counter
    assert _dice(Counter(), Counter()) == 1.0
    assert _dice(Counter("ab"), Counter("ac")) == 0.5


SQLITE_BENCH = Path.home() / ".cache" / "bbmap-e2e-stale" / "stale" / "sqlite"


@pytest.mark.skipif(not all((SQLITE_BENCH / f).exists() for f in (
    "old", "baseline", "old.perf.data", "new.perf.data")),
    reason="needs bench/bench_stale.py's SQLite builds and profiles")
def test_rewritten_dispatch_follows_the_entrys_fall_through() -> None:
    """SQLite 3.49.2 -> 3.54.1 (bench/bench_stale.py's builds): ``vdbeRecordCompareInt``'s
    entry tests the serial type (``cmp; ja``) in both; its fall-through was a jump-table
    dispatch (459 of the function's 2,325 samples) and is now one straight-line load, and
    the entry's taken side now goes to a new test.  The fall-through pairs with the
    fall-through although NEW's entry has an edge kind more (before: the dispatch went to
    the new test, by position from the tail call both reach, and the new load got no
    samples; the function's carried samples overlap a fresh profile's 0.62 -> 0.84).
    Where NEW has the edge more, the pair must end alike (a block with
    successors not with a return: corpus/stale varint's epilogue is not paired with the
    inlined copy's first varint block, test above)."""
    from bbmap.cfg import S_FALLTHROUGH, S_TABLE
    from bbmap.stale.fingerprint import fingerprint
    from bbmap.stale.match import match_blocks

    bo, bn = load_binary(str(SQLITE_BENCH / "old")), load_binary(str(SQLITE_BENCH / "baseline"))
    fp, blocks = {}, {}
    for k, b in (("o", bo), ("n", bn)):
        g = next(i for i, x in enumerate(b.block_map.func_name)
                 if x and x.startswith("_ZL20vdbeRecordCompareInt"))
        fp[k], blocks[k] = fingerprint(b, np.asarray([g])), function_blocks(b.block_map, g)
    fo, fn = fp["o"], fp["n"]
    ob, nb = blocks["o"].tolist(), blocks["n"].tolist()
    pairs = match_blocks(ob, nb, fo, fn, bo.block_map.block_size, bn.block_map.block_size)

    def fall(fp, b: int) -> int:  # noqa: ANN001
        return next(x for x in fp.succ[b] if fp.edge_kind[(b, x)] == S_FALLTHROUGH)

    disp = fall(fo, ob[0])
    assert any(fo.edge_kind[(disp, x)] == S_TABLE for x in fo.succ[disp])
    assert pairs[ob[0]][0] == nb[0]
    assert pairs[disp][0] == fall(fn, nb[0])
    old = annotate([str(SQLITE_BENCH / "old.perf.data")], str(SQLITE_BENCH / "old"),
                   inference="off", addresses=True)
    res, _rep = carry(old, bo, bn)
    fresh = annotate([str(SQLITE_BENCH / "new.perf.data")], str(SQLITE_BENCH / "baseline"),
                     inference="off")
    ours, theirs = res.block_samples[nb].astype(float), fresh.block_samples[nb].astype(float)
    assert res.block_samples[fall(fn, nb[0])] > 0
    assert _overlap(ours, theirs) > 0.8, _overlap(ours, theirs)  # before: 0.62


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_unmatched_blocks_are_not_sent_to_cold(old: str, new: str) -> None:
    """A block of the new build that no block of the profiled build matched has no
    evidence of being cold (its zero samples say nothing): the layout keeps it in its
    function's hot part.  Those of them valgrind saw run (v2's new early return and
    edited bodies) would otherwise be jumps into ``.cold`` on every run."""
    from bbmap.layout.plan import plan_layout

    res, _rep = _carried(old, new)
    unknown = res.unknown_blocks
    if unknown is None:
        pytest.skip("every block of this pair matched")
    truth = _truth(res, new)
    plan = plan_layout(res)
    laid = 0
    for lay in plan.functions:
        blocks = lay.cfg.blocks
        cold = set(blocks[np.asarray(lay.cold, np.int64)].tolist())
        for b in blocks[unknown[blocks]].tolist():
            assert b not in cold, (lay.name, b, truth[b])
            laid += 1
    assert laid


@pytest.mark.skipif(not all((SQLITE_BENCH / f).exists() for f in (
    "old", "baseline", "old.perf.data", "new.perf.data")),
    reason="the stale bench's SQLite builds (bench/bench_stale.py) are not here")
def test_sqlite_blocks_a_fresh_profile_samples_are_not_cold_for_lack_of_a_match() -> None:
    """SQLite 3.49 -> 3.54: ``sqlite3VdbeExec``'s new inline integer decode of
    ``OP_Column`` (0x71df6: ``movsbq (%r12),%rax; shlq $8...``) matches no 3.49 block.  A
    fresh profile of 3.54 puts 399 samples on it; the carried layout keeps it hot, where
    before it went to ``.cold`` (a jump there and back 38k times in the measured run)."""
    from bbmap.layout.plan import plan_layout
    from bbmap.stale.api import annotate_stale

    res, _rep = annotate_stale([str(SQLITE_BENCH / "old.perf.data")],
                               str(SQLITE_BENCH / "old"), str(SQLITE_BENCH / "baseline"),
                               force=True)
    fresh = annotate([str(SQLITE_BENCH / "new.perf.data")], str(SQLITE_BENCH / "baseline"))
    unknown = res.unknown_blocks
    assert unknown is not None
    plan = plan_layout(res)
    hot_unknown = sampled_unknown = 0
    for lay in plan.functions:
        blocks = lay.cfg.blocks
        cold = set(blocks[np.asarray(lay.cold, np.int64)].tolist())
        for b in blocks[unknown[blocks]].tolist():
            assert b not in cold
            hot_unknown += 1
            sampled_unknown += int(fresh.block_samples[b] > 0)
    assert hot_unknown and sampled_unknown
