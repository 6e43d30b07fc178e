"""``verify --profile`` on real clang-22 PGO builds and LBR profiles of real runs.

corpus/src/pgoflip.c was trained (``-fprofile-instr-generate``) on pgoflip-train.txt and
rebuilt with ``-fprofile-instr-use`` and the PGO analysis map.  Its LBR profiles come
from valgrind traces of runs on the training input and on pgoflip-shift.txt, which flips
the hot path; each has the traced run's exact counts beside it, the oracle here: every
verdict is held against the exact branch ratio, not against bbmap's own numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bbmap.run import annotate
from bbmap.verify.api import judge_profile, verify_profile
from bbmap.verify.profile import MATCHED, MISMATCHED
from tests.conftest import CORPUS, corpus_binary

LBR = CORPUS / "lbr"
TRAIN = LBR / "c22-pgoflip-pie-lbr-train"
SHIFT = LBR / "c22-pgoflip-pie-lbr-shift"
CFG_TRAIN = LBR / "c22-pgoflip-cfg-pie-lbr-train"
CFG_SHIFT = LBR / "c22-pgoflip-cfg-pie-lbr-shift"
# the branches the shifted input turns around (pgoflip.c's header): function -> block IDs
FLIPPED = {"pf_sign", "pf_magnitude", "pf_apply", "pf_digits"}
STEADY = {"pf_low_bits", "pf_every", "pf_check"}  # index-driven: any input alike


def _need(d: Path) -> Path:
    if not (d / "perf.data").exists():
        pytest.skip(f"corpus profile {d.name} not built")
    return d


@pytest.fixture(scope="module")
def flip_bin() -> Path:
    return corpus_binary("c22-pgoflip-pie")


@pytest.fixture(scope="module")
def cfg_bin() -> Path:
    return corpus_binary("c22-pgoflip-cfg-pie")


@pytest.fixture(scope="module")
def train(flip_bin: Path) -> Any:
    return verify_profile(flip_bin, _need(TRAIN) / "perf.data")


@pytest.fixture(scope="module")
def shift(flip_bin: Path) -> Any:
    return verify_profile(flip_bin, _need(SHIFT) / "perf.data")


# ------------------------------------------------------------------ the exact oracle
class Exact:
    """Exact per-block executions and block-to-block transfers of a traced run."""

    def __init__(self, d: Path, rep: Any) -> None:
        ex = json.loads((d / "exact-counts.json").read_text())
        self.execs = {int(b["address"], 16): b["count"] for b in ex["blocks"]}
        self.into: dict[int, int] = {}
        self.taken: dict[int, list[tuple[int, int]]] = {}
        for e in ex["edges"]:
            f, t = int(e["from"], 16), int(e["to"], 16)
            self.into[t] = self.into.get(t, 0) + e["count"]
            self.taken.setdefault(t, []).append((f, e["count"]))
        m = rep.comparison.block_map
        self.m = m
        self.start = np.asarray(m.block_address(np.arange(m.num_blocks)), np.int64)
        self.end = self.start + m.block_size.astype(np.int64)

    def transfers(self, b: int, s: int) -> int:
        """b -> s: a fall-through into s (entries of s that no taken branch made) when s
        follows b, else the taken branches from inside b to the start of s."""
        if self.start[s] == self.end[b]:
            return self.execs.get(int(self.start[s]), 0) - self.into.get(int(self.start[s]), 0)
        return sum(c for f, c in self.taken.get(int(self.start[s]), [])
                   if self.start[b] <= f < self.end[b])

    def ratio(self, row: dict[str, Any], succ: dict[str, Any]) -> float | None:
        """The exact probability of ``succ`` for the branch row (same denominator rule as
        the measurement: all listed outcomes, or the block's executions with an exit)."""
        ids = {int(self.m.block_id[i]): i for i in self._fn_blocks(row)}
        b, s = ids[row["block"]], ids[succ["id"]]
        outs = [ids[x["id"]] for x in row["successors"]]
        exits = len(outs) == 1 or 1 - sum(x["believed"] for x in row["successors"]) > 1e-6
        n = self.execs.get(int(self.start[b]), 0) if exits else sum(
            self.transfers(b, o) for o in outs)
        return self.transfers(b, s) / n if n else None

    def _fn_blocks(self, row: dict[str, Any]) -> range:
        f = int(np.flatnonzero(self.m.func_address == row["function_address"])[0])
        return self.m.function_blocks(f)


def _check_against_exact(rep: Any, d: Path, source: str = "compiler") -> dict[str, int]:
    """Every verdict agrees with the exact ratio; return how many intervals hold it."""
    ex = Exact(d, rep)
    t = rep.options.threshold
    held = total = 0
    for row in rep.branch_rows(source):
        if not row["executions"]:
            continue
        for s in row["successors"]:
            q = ex.ratio(row, s)
            if q is None:
                continue
            total += 1
            held += s["interval"][0] - 1e-9 <= q <= s["interval"][1] + 1e-9
            if s["verdict"] == "matched":
                assert abs(q - s["believed"]) <= t + 1e-9, (row, s, q)
            elif s["verdict"] == "mismatched":
                assert abs(q - s["believed"]) > t, (row, s, q)
    return {"held": held, "total": total}


# ------------------------------------------------------------------ must show
def test_same_input_mostly_matched(train: Any) -> None:
    s = train.summary()["branches"]
    print(train.format())
    assert s["sampled"] >= 15
    assert s["matched"] >= 0.65 * s["sampled"] and s["matched"] >= 4 * s["mismatched"]
    assert s["weight"]["matched"] >= 0.75  # most measured executions sit in matched ones
    mism = {(r["function"], r["block"]) for r in train.mismatched_branches()}
    # the only ones are the compiler's own errors on its training input, proven by the
    # exact counts below: loop peeling left the rest of pf_digits's loop at probability
    # 0, CodeGenPrepare's division bypass in pf_apply carries fixed 3/8 - 5/8 weights
    assert {f for f, _ in mism} <= {"pf_digits", "pf_apply"}
    for f in STEADY | {"pf_sign", "pf_magnitude"}:
        assert all(r["verdict"] != "mismatched" for r in train.branch_rows()
                   if r["function"] == f)


def test_shifted_input_flags_the_flipped_branches_first(train: Any, shift: Any) -> None:
    print(shift.format())
    worst = shift.mismatched_branches()
    assert len(worst) >= 6
    # every branch the shifted input turns around is mismatched, and the top of the
    # ranking is made of them only
    flipped_rows = [r for r in shift.branch_rows() if r["function"] in FLIPPED
                    and r["delta"] > 0.5 and r["executions"] >= 100]
    assert len(flipped_rows) >= 5
    assert all(r["verdict"] == "mismatched" for r in flipped_rows)
    top = {(r["function"], r["block"]) for r in worst[:len(flipped_rows)]}
    assert top == {(r["function"], r["block"]) for r in flipped_rows}
    assert {r["function"] for r in worst[:5]} <= FLIPPED
    # what the input does not touch stays matched
    for r in shift.branch_rows():
        if r["function"] in STEADY and r["executions"]:
            assert r["verdict"] != "mismatched", r
    # a flipped branch newly mismatched against the training run's verdict
    was = {(r["function"], r["block"]): r["verdict"] for r in train.branch_rows()}
    newly = [r for r in worst if was.get((r["function"], r["block"])) == "matched"]
    assert {r["function"] for r in newly} >= {"pf_sign", "pf_magnitude", "pf_apply"}
    assert shift.summary()["branches"]["score"] < train.summary()["branches"]["score"] - 0.3


def test_named_flips(shift: Any) -> None:
    rows = {(r["function"], r["block"]): r for r in shift.branch_rows()}
    sign = rows[("pf_sign", 0)]  # v < 0: a conditional tail call, the rest falls to 1
    s1 = sign["successors"][0]
    assert s1["id"] == 1 and s1["believed"] == pytest.approx(0.105, abs=0.01)
    assert 0.75 < s1["measured"] < 0.95 and sign["verdict"] == "mismatched"
    mag = rows[("pf_magnitude", 2)]  # |v| > 1e6: never in training, always here
    big = next(s for s in mag["successors"] if s["id"] == 3)
    assert big["believed"] < 0.01 and big["measured"] > 0.98


@pytest.mark.parametrize("which", ["train", "shift"])
def test_verdicts_agree_with_exact_counts(which: str, train: Any, shift: Any) -> None:
    rep, d = (train, TRAIN) if which == "train" else (shift, SHIFT)
    got = _check_against_exact(rep, d)
    print(which, got)
    assert got["total"] >= 30
    assert got["held"] >= 0.9 * got["total"]  # 95% intervals, a few stacks each


def test_block_frequencies_against_exact(train: Any, shift: Any) -> None:
    for rep, d in ((train, TRAIN), (shift, SHIFT)):
        ex = Exact(d, rep)
        f = rep.options.freq_factor
        n = held = 0
        for r in rep.block_rows():
            e = ex.execs.get(int(ex.start[_index(ex, r)]))
            entry = ex.execs.get(int(ex.start[_entry(ex, r)]))
            if not entry or not r["count"]:
                continue
            x = e / entry
            n += 1
            held += r["interval"][0] * (1 - 1e-9) <= x <= (r["interval"][1] or np.inf) * (
                1 + 1e-9)
            if r["verdict"] == "mismatched" and r["believed"] >= 0.01:
                assert not (r["believed"] / f <= x <= r["believed"] * f), r
            if r["verdict"] == "matched" and r["believed"] >= 0.01:
                assert r["believed"] / f <= x <= r["believed"] * f, r
        assert n >= 15 and held >= 0.9 * n


def _index(ex: Exact, r: dict[str, Any]) -> int:
    return next(i for i in ex._fn_blocks(r) if ex.m.block_id[i] == r["block"])


def _entry(ex: Exact, r: dict[str, Any]) -> int:
    return ex._fn_blocks(r)[0]


def test_compiler_frequencies_disagree_with_its_own_probabilities(train: Any) -> None:
    """pf_sign's block 1 runs when the conditional tail call is not taken (10.5% by the
    map's own probability), yet the map gives it frequency 1.0: the tail call was made
    conditional after the frequencies were computed.  The run says 0.105."""
    r = next(r for r in train.block_rows() if r["function"] == "pf_sign" and r["block"] == 1)
    assert r["believed"] == pytest.approx(1.0) and r["verdict"] == "mismatched"
    assert r["interval"][1] < 0.2


# ------------------------------------------------------------------ post-link CFG
def test_postlink_cfg_matches_its_own_run(cfg_bin: Path) -> None:
    rep = verify_profile(cfg_bin, _need(CFG_TRAIN) / "perf.data")
    s = rep.summary()
    assert "postlink" in rep.sources()
    pl = s["postlink"]["branches"]
    print(rep.format())
    assert pl["matched"] >= 12 and pl["weight"]["matched"] > 0.95
    assert pl["score"] > 0.95
    _check_against_exact(rep, CFG_TRAIN, "postlink")


def test_postlink_cfg_flags_the_shift(cfg_bin: Path) -> None:
    rep = verify_profile(cfg_bin, _need(CFG_SHIFT) / "perf.data")
    pl = {(r["function"], r["block"]): r for r in rep.branch_rows("postlink")}
    assert pl[("pf_sign", 0)]["verdict"] == "mismatched"
    assert pl[("pf_magnitude", 2)]["verdict"] == "mismatched"
    assert rep.summary()["postlink"]["branches"]["score"] < 0.8


# ------------------------------------------------------------------ a flipped map
def test_rewritten_probability_is_caught_as_that_branch(flip_bin: Path, tmp_path: Path,
                                                        train: Any) -> None:
    """Swap the two probabilities of pf_apply's block 0 (+ or not) with bbmap's writer:
    that branch, with its block IDs, becomes the worst mismatch; nothing else moves."""
    from mutate import blocks, find_function, rewrite_map

    def swap(records: list) -> None:
        b0 = blocks(find_function(records, "pf_apply"))[0]
        (i1, p1, q1), (i2, p2, q2) = b0.successors
        b0.successors = ((i1, p2, q1), (i2, p1, q2))

    mutant = tmp_path / "pgoflip.pie"
    rewrite_map(flip_bin, mutant, swap)
    rep = verify_profile(mutant, TRAIN / "perf.data")
    before = {(r["function"], r["block"]) for r in train.mismatched_branches()}
    after = rep.mismatched_branches()
    assert {(r["function"], r["block"]) for r in after} - before == {("pf_apply", 0)}
    top = after[0]
    assert (top["function"], top["block"]) == ("pf_apply", 0)
    assert sorted(s["id"] for s in top["successors"]) == [1, 9]
    hot = next(s for s in top["successors"] if s["id"] == 1)  # the "+" case
    assert hot["believed"] < 0.1 and hot["measured"] > 0.85
    doc = rep.to_json()
    assert doc["functions"]["pf_apply"]["branches"]["0"]["verdict"] == "mismatched"
    assert doc["worst_branches"][0]["block"] == 0


# ------------------------------------------------------------------ stack moments
def test_cluster_moments_equal_a_per_stack_count(flip_bin: Path, tmp_path: Path) -> None:
    """The accumulated per-stack moments equal sums over stacks annotated one by one."""
    from bbmap.aggregate.lbr import EDGE_KINDS
    from bbmap.formats import perfdata as fmt
    from bbmap.perf import PerfData
    from bbmap.perf.records import SampleBatch
    from bbmap.perf.writer import PerfWriter

    d = _need(TRAIN)
    info = json.loads((d / "lbr-info.json").read_text())
    stacks = []
    for item in PerfData(d / "perf.data").stream():
        if isinstance(item, SampleBatch):
            for i in range(len(item)):
                lo, hi = int(item.br_ptr[i]), int(item.br_ptr[i + 1])
                stacks.append((int(item.ip[i]), list(zip(item.br_from[lo:hi].tolist(),
                                                         item.br_to[lo:hi].tolist(),
                                                         item.br_flags[lo:hi].tolist()))))
    stacks = stacks[:40]

    def write(path: Path, chosen: list) -> Path:
        w = PerfWriter(path, sample_type=fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
                       | fmt.S_BRANCH_STACK, branch_sample_type=info["branch_sample_type"])
        pid = info["pid"]
        w.add_comm(pid, pid, "pgoflip.pie", exec_=True)
        mm = info["mmap"]
        w.add_mmap2(pid, pid, int(mm["start"], 16), int(mm["len"], 16), int(mm["pgoff"], 16),
                    str(flip_bin), prot=5, flags=2)
        for k, (ip, br) in enumerate(chosen):
            w.add_sample(ip, pid, pid, time=10 + k, branches=br)
        w.close()
        return path

    whole = annotate([write(tmp_path / "all.data", stacks)], flip_bin, cluster_stats=True,
                     drop_duplicate_newest=False)
    mo = whole.cluster
    B = whole.block_map.num_blocks
    intra = {EDGE_KINDS.index("branch"), EDGE_KINDS.index("fallthrough")}
    entry = np.asarray(whole.block_map.range_block_ptr)[
        whole.block_map.func_range_ptr[whole.block_map.block_function(np.arange(B))]]
    is_entry = np.zeros(B, bool)
    is_entry[entry] = True
    x2 = np.zeros(B)
    o2 = np.zeros(B)
    xe = np.zeros(B)
    xE = np.zeros(B)
    E2 = 0.0
    k2: dict[int, float] = {}
    ko: dict[int, float] = {}
    kx: dict[int, float] = {}
    for i, st in enumerate(stacks):
        one = annotate([write(tmp_path / f"s{i}.data", [st])], flip_bin,
                       drop_duplicate_newest=False)
        x = one.block_count.astype(float)
        E = float(x[is_entry].sum())
        x2 += x * x
        xe += x * x[entry]
        xE += x * E
        E2 += E * E
        o = np.zeros(B)
        edges: dict[int, float] = {}
        for f, t, k, c in zip(one.edge_from.tolist(), one.edge_to.tolist(),
                              one.edge_kind.tolist(), one.edge_count.tolist()):
            if k in intra:
                edges[f * B + t] = edges.get(f * B + t, 0) + c
                o[f] += c
        o2 += o * o
        for key, c in edges.items():
            k2[key] = k2.get(key, 0) + c * c
            ko[key] = ko.get(key, 0) + c * o[key // B]
            kx[key] = kx.get(key, 0) + c * x[key // B]
    assert np.allclose(mo.x2, x2) and np.allclose(mo.o2, o2)
    assert np.allclose(mo.xe, xe) and np.allclose(mo.xE, xE) and np.isclose(mo.E2, E2)
    keys = np.array(sorted(k2), np.int64)
    g2, go, gx = mo.edge_moments(keys)
    assert np.allclose(g2, [k2[k] for k in keys.tolist()])
    assert np.allclose(go, [ko[k] for k in keys.tolist()])
    assert np.allclose(gx, [kx[k] for k in keys.tolist()])
    assert sorted(mo.edge_key.tolist()) == keys.tolist()


def test_judge_without_moments_says_so(flip_bin: Path) -> None:
    res = annotate([_need(TRAIN) / "perf.data"], flip_bin)  # no cluster_stats
    rep = judge_profile(res)
    assert any("independent trials" in n for n in rep.notes)
    assert rep.comparison.branches["compiler"].verdict.tolist().count(MATCHED) > 0
    assert MISMATCHED in rep.comparison.branches["compiler"].verdict.tolist()
