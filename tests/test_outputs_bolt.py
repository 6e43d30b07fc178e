"""BOLT's formats without BOLT: the address aggregates, BOLT's naming, ``[unknown]`` ends,
merging, determinism and the CLI (the perf2bolt / llvm-bolt oracles are in
test_outputs_bolt_perf2bolt.py and test_outputs_bolt_llvmbolt.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.aggregate.addresses import (
    END_BRANCH_ONLY,
    EXTERNAL,
    KERNEL_START,
    AddressAggregator,
    AddressProfile,
)
from bbmap.aggregate.resolve import Resolved
from bbmap.binary import load_binary
from bbmap.bolt_functions import BoltView
from bbmap.buckets import IN_BLOCK, OTHER_DSO
from bbmap.mappings import Mapping
from bbmap.outputs.bolt import fdata_from_profile, preagg_from_profile
from bbmap.run import annotate
from tests.helpers import CORPUS, cli, ip_profile_cases, profile_cases

LBR = {c[0]: c for c in profile_cases("lbr")}
IP = {c[0]: c for c in ip_profile_cases()}
PIE = LBR.get("c22-addrmap-pie-lbr")
needs_pie = pytest.mark.skipif(PIE is None, reason="corpus LBR profiles not built")


def view_of(path: str) -> BoltView:
    return BoltView(load_binary(path))


def sym(b, name: str) -> int:  # noqa: ANN001
    for t in b.symbol_tables:
        for i in range(len(t)):
            if t.name(i) == name:
                return int(t.value[i])
    raise KeyError(name)


# ---------------------------------------------------------------- BOLT's function table
@needs_pie
def test_bolt_names_locals_plt_and_fde_functions() -> None:
    v = view_of(PIE[2])
    names = set(v.names)
    assert {"lay_dbl/1", "lay_apply", "main", "printf@PLT", "__BOLT_PSEUDO_.plt"} <= names
    cfg = CORPUS / "bin/clang-22/pgoflip-cfg/pgoflip.pie"
    if cfg.exists():  # untyped .cold labels inside frame_dummy's reach: FDE functions
        w = view_of(str(cfg))
        assert "__BOLT_FDE_FUNCat1513" in w.names and "pf_magnitude.cold/1" not in w.names


@needs_pie
def test_locate_uses_the_maximum_size() -> None:
    b = load_binary(PIE[2])
    v = BoltView(b)
    a = sym(b, "lay_apply")
    i = v.names.index("lay_apply")
    end = int(v.end[i])
    f, off = v.locate(np.array([a, a + 5, end - 1, end], np.uint64))
    assert f[:3].tolist() == [i, i, i] and f[3] != i
    assert off[:2].tolist() == [0, 5]
    assert v.locate(np.array([0, 1 << 40], np.uint64))[0].tolist() == [-1, -1]


# ---------------------------------------------------------------- [unknown] ends
def _profile(traces: list[tuple[int, int, int, int]]) -> AddressProfile:
    f, t, e, c = (np.array(x, dtype=np.uint64) for x in zip(*traces))
    return AddressProfile(trace_from=f, trace_to=t, trace_end=e, trace_count=c.astype(np.int64),
                          trace_mispred=np.zeros(len(c), np.int64),
                          entries=int(c.sum()))


@needs_pie
def test_unknown_ends_are_written_as_perf2bolt_does() -> None:
    b = load_binary(PIE[2])
    v = BoltView(b)
    main, apply_ = sym(b, "main"), sym(b, "lay_apply")
    p = _profile([(EXTERNAL, main, END_BRANCH_ONLY, 3),  # from a library into main
                  (apply_ + 0x2d, EXTERNAL, END_BRANCH_ONLY, 2),  # a call out of the binary
                  (EXTERNAL, EXTERNAL, END_BRANCH_ONLY, 4)])  # nothing of the binary
    text, st = fdata_from_profile(p, v)
    assert sorted(text.splitlines()) == ["0 [unknown] 0 1 main 0 0 3",
                                         "1 lay_apply 2d 0 [unknown] 0 0 2"]
    assert st.branches == 5 and st.branches_outside == 4


@needs_pie
def test_fallthrough_after_a_return_counts_the_calls_block() -> None:
    """A range starting right after a call, reached by a return from elsewhere, also
    counts the call's block falling through (getFallthroughsInTrace)."""
    b = load_binary(PIE[2])
    v = BoltView(b)
    blk = v.blocks(np.arange(len(v.start)))
    calls = np.flatnonzero(np.isin(blk.last_kind, (5, 6)) & blk.falls)
    assert len(calls)
    k = int(calls[0])
    f = int(blk.func[k])
    nxt = int(blk.start[k + 1])
    other = int(v.start[(f + 1) % len(v.start)])
    p = _profile([(other, nxt, nxt, 7)])
    text, st = fdata_from_profile(p, v)
    name = v.names[f]
    last = int(blk.last[k]) - int(v.start[f])
    assert f"1 {name} {last:x} 1 {name} {nxt - int(v.start[f]):x} 0 7" in text.splitlines()
    assert st.traces_ok == 7


# ---------------------------------------------------------------- aggregation rules
def _resolved(addr: np.ndarray, inside: np.ndarray) -> Resolved:
    n = len(addr)
    return Resolved(where=np.where(inside, IN_BLOCK, OTHER_DSO).astype(np.int8),
                    vaddr=addr.astype(np.uint64), block=np.zeros(n, np.int64),
                    func=np.zeros(n, np.int64), dso=np.zeros(n, np.int32))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from([0x1000, 0x1010, 0x2000, KERNEL_START + 8]),
                                   st.sampled_from([0x1004, 0x1020, 0x7000_0000]),
                                   st.booleans()), min_size=1, max_size=6),
                min_size=1, max_size=8))
def test_every_entry_is_a_trace_or_tallied(stacks) -> None:  # noqa: ANN001
    src = np.array([e[0] for s in stacks for e in s], np.uint64)
    dst = np.array([e[1] for s in stacks for e in s], np.uint64)
    flg = np.array([int(e[2]) for s in stacks for e in s], np.uint64)
    stack = np.repeat(np.arange(len(stacks)), [len(s) for s in stacks])
    agg = AddressAggregator()
    agg.add_stacks(src, dst, flg, stack, _resolved(src, src < 0x7000_0000),
                   _resolved(dst, dst < 0x7000_0000))
    p = agg.result()
    p.check()
    # the newest kept entry of each stack (and only it) has no fall-through end
    kept = [[e for e in s if e[0] < KERNEL_START] for s in stacks]
    br_only = int((p.trace_count[p.trace_end == np.uint64(END_BRANCH_ONLY)]).sum())
    assert br_only <= sum(1 for s in kept if s)


class _FlatSpace:
    """An address space for :meth:`AddressAggregator.add_stacks_raw`: no mapping ever
    changes; an address in [0x1000, 0x7000_0000) is in the binary at that vaddr."""

    class pm:  # noqa: N801 - the attribute name add_stacks_raw asks for
        mappings = [Mapping(p, 0x1000, 0x7000_0000 - 0x1000, 0, "bin", None, (0, 0),
                            is_binary=True) for p in (1, 2)]

        @staticmethod
        def constant_between(pids, seq, time) -> bool:  # noqa: ANN001
            return True

    @staticmethod
    def classify(addr, pid, seq, cpumode, time):  # noqa: ANN001, ANN205
        r = _resolved(addr, (addr >= 0x1000) & (addr < 0x7000_0000))  # = the mappings
        return r.where, r.vaddr, r.dso


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2),
                          st.lists(st.tuples(st.sampled_from([0x1000, 0x1010, 0x2000,
                                                              0x7100_0000, 0x7F00_0000_0010,
                                                              KERNEL_START + 8]),
                                             st.sampled_from([0x1004, 0x1020, 0x7000_0000,
                                                              0x7F00_0000_0000,
                                                              KERNEL_START + 4]),
                                             st.integers(0, 1)), max_size=6)),
                min_size=1, max_size=8))
def test_raw_stacks_reduce_to_the_resolved_path(samples) -> None:  # noqa: ANN001
    """Reducing entries on runtime addresses first (per-sample pid/seq, samples with no
    entry, kernel entries, several processes, mispredicted flags, a far library whose
    addresses are folded into one) gives what resolving every entry gives."""
    ent = [(k, e) for k, (_pid, s) in enumerate(samples) for e in s]
    src = np.array([e[0] for _, e in ent], np.uint64)
    dst = np.array([e[1] for _, e in ent], np.uint64)
    flg = np.array([e[2] for _, e in ent], np.uint64)
    stack = np.array([k for k, _ in ent], np.int64)
    pid = np.array([p for p, _ in samples], np.int32)
    counts = np.array([len(s) for _, s in samples])
    live = None if counts.all() else counts > 0
    ref, raw = AddressAggregator(), AddressAggregator()
    ref.add_stacks(src, dst, flg, stack, _resolved(src, src < 0x7000_0000),
                   _resolved(dst, dst < 0x7000_0000))
    assert raw.add_stacks_raw(src, dst, flg, stack, pid, np.arange(len(samples)), None,
                              _FlatSpace(), live)
    a, b = ref.result(), raw.result()
    for k in ("trace_from", "trace_to", "trace_end", "trace_count", "trace_mispred"):
        assert getattr(a, k).tolist() == getattr(b, k).tolist(), k
    assert (a.entries, a.kernel, a.external) == (b.entries, b.kernel, b.external)
    b.check()


def test_merge_is_order_free() -> None:
    a = _profile([(0x10, 0x20, 0x30, 2), (0x40, 0x50, END_BRANCH_ONLY, 1)])
    b = _profile([(0x10, 0x20, 0x30, 5), (0x60, 0x70, 0x80, 1)])
    ab, ba = a.merge(b), b.merge(a)
    for k in ("trace_from", "trace_to", "trace_end", "trace_count"):
        assert getattr(ab, k).tolist() == getattr(ba, k).tolist()
    assert ab.trace_count.tolist() == [7, 1, 1] and ab.entries == 9
    # sorted unique keys: what an aggregate store concatenates and reduces again
    keys = list(zip(ab.trace_from.tolist(), ab.trace_to.tolist(), ab.trace_end.tolist()))
    assert keys == sorted(set(keys))


# ---------------------------------------------------------------- results and the CLI
@needs_pie
def test_two_profiles_give_the_doubled_fdata() -> None:
    _, perf, binary = PIE
    one = annotate([perf], binary, addresses=True, inference="off")
    two = annotate([perf, perf], binary, addresses=True, inference="off")
    v = view_of(binary)
    a = [ln.rsplit(" ", 1) for ln in fdata_from_profile(one.addresses, v)[0].splitlines()]
    b = [ln.rsplit(" ", 1) for ln in fdata_from_profile(two.addresses, v)[0].splitlines()]
    assert [x[0] for x in a] == [x[0] for x in b]
    assert [2 * int(x[1]) for x in a] == [int(x[1]) for x in b]


@needs_pie
def test_addresses_only_on_request() -> None:
    _, perf, binary = PIE
    assert annotate([perf], binary, inference="off").addresses is None


@needs_pie
@pytest.mark.parametrize("fmt", ["fdata", "bolt-preagg"])
def test_cli_writes_deterministic_bolt_files(fmt: str, tmp_path) -> None:  # noqa: ANN001
    _, perf, binary = PIE
    out = [tmp_path / "a", tmp_path / "b"]
    for o in out:
        code, output = cli("annotate", "--format", fmt, "-o", str(o), perf, binary)
        assert code == 0, output
    assert out[0].read_bytes() == out[1].read_bytes() and out[0].stat().st_size > 100
    text = out[0].read_text()
    if fmt == "bolt-preagg":
        bid = load_binary(binary).build_id
        assert text.startswith(f"B {bid}:") and "\nF " in text


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fdata", "bolt-preagg"])
def test_console_script_quick_exit_writes_the_same_files(fmt: str, tmp_path) -> None:  # noqa: ANN001
    """The real process (``python -m bbmap``, which may end without the interpreter's
    teardown) writes what the in-process CLI writes, to -o and to stdout, exit 0."""
    _, perf, binary = PIE
    ref = tmp_path / "ref"
    assert cli("annotate", "--format", fmt, "-o", str(ref), perf, binary)[0] == 0
    run = [sys.executable, "-m", "bbmap", "annotate", "--format", fmt, perf, binary]
    got = subprocess.run([*run, "-o", str(tmp_path / "p")], capture_output=True)
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "p").read_bytes() == ref.read_bytes()
    out = subprocess.run(run, capture_output=True)
    assert out.returncode == 0 and out.stdout == ref.read_bytes()


@pytest.mark.slow
def test_ip_only_fdata_and_preagg() -> None:
    if "c22-addrmap-pie-ip" not in IP:
        pytest.skip("IP corpus profile absent")
    _, perf, binary = IP["c22-addrmap-pie-ip"]
    r = annotate([perf], binary, addresses=True, inference="off")
    v = view_of(binary)
    text, st = fdata_from_profile(r.addresses, v)
    assert text.startswith("no_lbr cpu-clock:u:\n")
    assert sum(int(x.split()[-1]) for x in text.splitlines()[1:]) == st.samples_written
    pa = preagg_from_profile(r.addresses, v)
    assert pa.startswith("E cpu-clock:u:\nS ")


def test_version_does_not_import_numpy() -> None:
    code = ("import sys; from bbmap.cli import main; "
            "sys.argv = ['bbmap', '--version']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@needs_pie
@pytest.mark.parametrize("fmt", ["fdata", "bolt-preagg"])
def test_bolt_formats_from_merged_aggregates_equal_the_profiles(tmp_path, fmt) -> None:  # noqa: ANN001
    """Aggregate files carry the address aggregates (spec/aggregate.md): fdata written from
    a merge of per-piece aggregates equals fdata written from the profiles themselves."""
    pytest.importorskip("pyarrow")
    _, perf, binary = PIE
    plain = str(CORPUS / "profiles" / "c22-addrmap-pie-plain" / "perf.data")
    aggs = []
    for i, p in enumerate((perf, plain)):
        agg = str(tmp_path / f"{i}.agg")
        code, out = cli("annotate", "--format", "aggregate", "-o", agg, p, binary)
        assert code == 0, out
        aggs.append(agg)
    merged = str(tmp_path / "m.agg")
    assert cli("merge", *aggs[::-1], "-o", merged)[0] == 0
    code_a, from_agg = cli("annotate", "--format", fmt, merged, binary)
    code_p, from_perf = cli("annotate", "--format", fmt, perf, plain, binary)
    assert code_a == code_p == 0 and from_agg == from_perf and from_agg.strip()


@needs_pie
def test_aggregates_without_addresses_are_refused_for_bolt_formats(tmp_path) -> None:  # noqa: ANN001
    """An aggregate made without the address aggregates (a Session without them) would give
    a BOLT profile missing its branches: refused, the file named."""
    pytest.importorskip("pyarrow")
    from bbmap.aggregate.store import write_aggregate
    from bbmap.run import Session

    _, perf, binary = PIE
    s = Session(binary)
    s.add(perf)
    agg = tmp_path / "one.agg"
    write_aggregate(s.aggregate(), str(agg))
    code, out = cli("annotate", "--format", "fdata", str(agg), binary)
    assert code != 0 and "one.agg" in out and "Traceback" not in out


@pytest.mark.parametrize("name", ["c22-addrmap-pie-lbr", "c22-addrmap-nopie-lbr-skylake",
                                  "c22-list-pie-lbr"])
def test_address_only_fast_path_gives_the_same_aggregates(name: str) -> None:
    if name not in LBR:
        pytest.skip(f"corpus case {name} absent")
    _, perf, binary = LBR[name]
    full = annotate([perf], binary, addresses=True, inference="off").addresses
    fast = annotate([perf], binary, address_only=True, inference="off").addresses
    for k in ("trace_from", "trace_to", "trace_end", "trace_count", "trace_mispred",
              "ip_addr", "ip_samples"):
        assert getattr(full, k).tolist() == getattr(fast, k).tolist(), k
    assert (full.entries, full.kernel, full.external, full.duplicate, full.samples) == \
        (fast.entries, fast.kernel, fast.external, fast.duplicate, fast.samples)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40),
                          st.sampled_from([0, 3, 2**32 - 1, 2**32, 2**64 - 1]),
                          st.integers(1, 5)), min_size=1, max_size=60))
def test_reduce_by_key_equals_its_definition(rows) -> None:  # noqa: ANN001
    from bbmap.aggregate.addresses import reduce_by_key

    k = [np.array([r[i] for r in rows], np.uint64) for i in range(3)]
    v = np.array([r[3] for r in rows], np.int64)
    (a, b, c), (s,) = reduce_by_key(k, [v])
    want: dict = {}
    for r in rows:
        want[r[:3]] = want.get(r[:3], 0) + r[3]
    assert list(zip(a.tolist(), b.tolist(), c.tolist())) == sorted(want)
    assert s.tolist() == [want[key] for key in sorted(want)]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 5, 2**63, 2**64 - 1]), st.integers(0, 40),
                          st.sampled_from([0, 3, 2**32, 2**64 - 1]), st.integers(0, 1)),
                max_size=60))
def test_count_by_key_equals_its_definition(rows) -> None:  # noqa: ANN001
    """The sort-only reducer of raw LBR entries (count, mispredicted flags) -- packed
    and too wide to pack alike -- and the strictly-increasing test that skips a second
    reduction."""
    from bbmap.aggregate.addresses import _strictly_increasing, count_by_key

    k = [np.array([r[i] for r in rows], np.uint64) for i in range(3)]
    (a, b, c), (n, m) = count_by_key(k, np.array([r[3] for r in rows], np.int64))
    want: dict = {}
    for r in rows:
        got = want.setdefault(r[:3], [0, 0])
        got[0] += 1
        got[1] += r[3]
    assert list(zip(a.tolist(), b.tolist(), c.tolist())) == sorted(want)
    assert [list(x) for x in zip(n.tolist(), m.tolist())] == [want[x] for x in sorted(want)]
    assert n.dtype == m.dtype == np.int64
    assert _strictly_increasing([a, b, c])
    assert _strictly_increasing(k) == (sorted(set(rows_k := [r[:3] for r in rows])) == rows_k)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0x1000, 0x1001, 0x5555_5555_0000, 2**63 + 5,
                                           2**64 - 2]),
                          st.sampled_from([0, 0x1004, 0x5555_5555_0040, 2**64 - 1]),
                          st.booleans(), st.integers(0, 1)), min_size=1, max_size=50))
def test_trace_counts_equal_count_by_key_on_the_end_column(rows) -> None:  # noqa: ANN001
    """The end-free trace key (end = previous entry's source, the sentinel where a stack
    begins) gives count_by_key's rows and sums; None only when the key cannot fit."""
    from bbmap.aggregate.addresses import count_by_key, trace_counts

    src = np.array([r[0] for r in rows], np.uint64)
    dst = np.array([r[1] for r in rows], np.uint64)
    begins = np.array([j for j, r in enumerate(rows) if r[2] and j > 0], np.int64)
    flag = np.array([r[3] for r in rows], np.uint8)
    end = np.empty(len(rows), np.uint64)
    end[1:] = src[:-1]
    end[0] = END_BRANCH_ONLY
    end[begins] = END_BRANCH_ONLY
    want = count_by_key([src, dst, end], flag)
    got = trace_counts(src, dst, begins, flag)
    span = [int(c.max()) - int(c.min()) + 1 for c in (src, dst)]
    if got is None:
        assert span[0] * span[1] * (span[0] + 1) * (2 if flag.any() else 1) >= 1 << 64
        return
    for a, b in zip(got[0] + got[1], want[0] + want[1]):
        assert a.tolist() == b.tolist()
    assert got[1][0].dtype == got[1][1].dtype == np.int64


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 7, 2**63, 2**64 - 1]),
                          st.sampled_from([1, 2**40, 2**64 - 1]),
                          st.sampled_from([0, 2**64 - 1]), st.integers(1, 5)),
                min_size=1, max_size=40))
def test_reduce_by_key_wide_keys(rows) -> None:  # noqa: ANN001
    """Spans too wide to pack: the lexsort path gives the definition too."""
    from bbmap.aggregate.addresses import reduce_by_key

    k = [np.array([r[i] for r in rows], np.uint64) for i in range(3)]
    (a, b, c), (s,) = reduce_by_key(k, [np.array([r[3] for r in rows], np.int64)])
    want: dict = {}
    for r in rows:
        want[r[:3]] = want.get(r[:3], 0) + r[3]
    assert list(zip(a.tolist(), b.tolist(), c.tolist())) == sorted(want)
    assert s.tolist() == [want[key] for key in sorted(want)]


def test_profile_of_another_binary_is_an_error_naming_it(tmp_path) -> None:  # noqa: ANN001
    demo = CORPUS / "profiles/demo-plain/perf.data"
    other = CORPUS / "bin/clang-22/addrmap/layout.nopie"
    if not (demo.exists() and other.exists()):
        pytest.skip("corpus absent")
    code, out = cli("annotate", "--format", "fdata", "-o", str(tmp_path / "x"), str(demo),
                    str(other))
    assert code == 1 and "lies in" in out and "layout.nopie" in out and "Traceback" not in out
