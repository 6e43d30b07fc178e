"""The compiled Ext-TSP merger (bbmap/layout/exttsp.py _FastMerger, exttsp_numba.py) is the
reference merger (``exttsp._Merger``) bit for bit: every heap entry it pushes -- the lazy
bounds, the exact gains and the merge plans -- and the order, on random graphs.

The kernel is compiled when numba is installed (``bbmap[fast]``) and runs as plain Python
otherwise, so the equality of the two evaluators is checked on every install, and of the
compiled code where numba is there.  Which one ``ext_tsp_order`` takes is a speed rule
only; the tests at the end pin what it imports."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys

import numpy as np
import pytest
from helpers import random_counts_and_hot
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.layout import exttsp
from bbmap.layout.exttsp import LLVM, PROPELLER, ext_tsp_order, ext_tsp_score

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
if HAVE_NUMBA:  # (installed but not importable: the reference runs, as without it)
    from bbmap.layout import exttsp_numba as _k

    HAVE_NUMBA = _k.compiled()

_PARAM_SETS = [PROPELLER, LLVM, PROPELLER.with_(chain_split_threshold=0),
               LLVM.with_(chain_split_threshold=2), LLVM.with_(chain_split_threshold=12),
               PROPELLER.with_(split_along_jumps=False, chain_split_threshold=1),
               LLVM.with_(chain_split=False), PROPELLER.with_(fallthrough_weight=0.5)]


@pytest.fixture(autouse=True)
def _kernel_not_loaded():
    """Each test starts, and leaves the process, as if no big function had been laid out:
    other tests' mid-sized functions then keep the reference merger (see exttsp._fast_ok)."""
    exttsp._kernel_loaded = False
    yield
    exttsp._kernel_loaded = False


def _graph(rng: random.Random, n: int, local: bool | str, parallel: bool):
    """Random jumps anywhere (``local`` false), or a fall-through path with branches to
    nearby blocks, as compiled code has (long chains: the split-along-jumps search and
    its few-positions case), or (``"dense"``) many jumps of fractional weights within
    a window (many jumps between two chains: sums whose order shows in the rounding).
    Zero sizes, self-loops, zero weights; ``parallel``: some jumps repeated."""
    sizes = [rng.choice([0, 1, 2, 4, 8, 16, 32, 64, 200, 700]) for _ in range(n)]
    if local == "dense":
        edges = [(i, i + 1, rng.random() * 1e4) for i in range(n - 1)]
        edges += [(s, min(n - 1, max(0, s + rng.randint(-15, 15))), rng.random() * 1e3)
                  for s in range(n) for _ in range(rng.randint(0, 6))]
    elif local:
        edges = []
        for i in range(n - 1):
            edges.append((i, i + 1, rng.choice([1, 5, 50, 1000, rng.randint(0, 10**6)])))
            if rng.random() < 0.6:
                j = rng.randrange(max(0, i - 12), min(n, i + 12))
                edges.append((i, j, rng.choice([1, 5, 50, 1000, rng.randint(1, 10**6)])))
    else:
        edges = [(s, rng.randrange(n), rng.choice([0, 1, 5, 50, 1000, rng.randint(1, 10**6)]))
                 for s in range(n) for _ in range(rng.randint(0, 3))]
    if parallel and edges:
        edges += [(s, d, rng.choice([0, 3, rng.random() * 1e6])) for s, d, _ in edges[::3]]
    return sizes, edges


def _pushes(make):  # noqa: ANN001, ANN202
    """Run the merger ``make()`` builds; return (its order, every heap entry it pushed)."""
    got = []
    heapq = exttsp.heapq

    class _Heapq:
        heappop = staticmethod(heapq.heappop)

        @staticmethod
        def heappush(heap, item):  # noqa: ANN001, ANN205
            got.append(item)
            heapq.heappush(heap, item)

    exttsp.heapq = _Heapq
    try:
        order = make().run()
    finally:
        exttsp.heapq = heapq
    return order, got


def _both(sizes, edges, params, counts=None, hot=None, small=None):  # noqa: ANN001, ANN202
    """Both mergers on one graph (``small``: SMALL_MERGE for the run): [(order, pushes)]."""
    n = len(sizes)
    s = np.asarray(sizes, np.int64)
    src, dst, w = exttsp.edge_arrays(n, edges)
    c = None if counts is None else np.asarray(counts, np.float64)
    h = None if hot is None else np.asarray(hot, bool)
    out = []
    default = exttsp.SMALL_MERGE
    exttsp.SMALL_MERGE = default if small is None else small
    try:
        for cls in (exttsp._Merger, exttsp._FastMerger):
            out.append(_pushes(lambda cls=cls: cls(s, src, dst, w, c, params, h)))
    finally:
        exttsp.SMALL_MERGE = default
    return out


def _same(a, b, graph=None) -> None:  # noqa: ANN001
    """Both runs pushed the same heap entries (every float equal) and made the same order;
    with ``graph`` (sizes, edges, params), the orders' scores are the same float too."""
    (order_a, push_a), (order_b, push_b) = a, b
    assert len(push_a) == len(push_b)
    for x, y in zip(push_a, push_b):
        assert x == y
        assert type(x[0]) is float and type(y[0]) is float
    assert order_a == order_b
    if graph is not None:
        sizes, edges, params = graph
        assert ext_tsp_score(sizes, edges, order_a, params) == \
            ext_tsp_score(sizes, edges, order_b, params)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 90),
       local=st.sampled_from([False, True, "dense"]),
       params=st.sampled_from(_PARAM_SETS), small=st.sampled_from([None, 0, 6]),
       given_counts=st.booleans(), given_hot=st.booleans(), parallel=st.booleans())
def test_fast_merger_is_the_merger_bit_for_bit(seed, n, local, params, small,
                                               given_counts, given_hot, parallel):
    """Same heap entries (bounds, gains, plans: every float equal) and the same order, on
    graphs of every shape the reference takes (zero sizes, parallel jumps, self-loops,
    zero weights, given or derived counts and hot flags, every search option, and
    ``SMALL_MERGE`` moved so that both evaluators see short and long chains)."""
    rng = random.Random(seed)
    sizes, edges = _graph(rng, n, local, parallel)
    counts, hot = random_counts_and_hot(rng, n, edges, given_counts, given_hot)
    _same(*_both(sizes, edges, params, counts, hot, small), (sizes, edges, params))


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(150, 700),
       params=st.sampled_from(_PARAM_SETS[:5]), local=st.sampled_from([True, "dense"]))
def test_fast_merger_is_the_merger_on_long_chains(seed, n, params, local):
    """As above on bigger compiled-code-like functions: chains of hundreds of blocks
    (split positions along jumps only, sums over more than 128 jumps, the BLAS case)."""
    sizes, edges = _graph(random.Random(seed), n, local, False)
    _same(*_both(sizes, edges, params), (sizes, edges, params))


def test_the_blas_case_goes_back_to_the_reference(monkeypatch):
    """A long chain split at a few positions: the reference sums its own jumps' gains with
    a matrix product (``_self_gains_at``, BLAS's rounding), so the kernel asks the caller
    for those rows -- this graph takes that path, and the results stay equal."""
    calls = []
    real = exttsp._Merger._self_gains_at

    def counted(self, *a):  # noqa: ANN001, ANN002, ANN202
        if isinstance(self, exttsp._FastMerger):
            calls.append(len(a[-1]))
        return real(self, *a)

    monkeypatch.setattr(exttsp._Merger, "_self_gains_at", counted)
    sizes, edges = _graph(random.Random(3), 400, True, False)
    a, b = _both(sizes, edges, LLVM.with_(chain_split_threshold=12))
    monkeypatch.setattr(exttsp._Merger, "_self_gains_at", real)
    assert calls
    _same(a, b)


def test_pairwise_sum_is_numpys():
    """The kernel's sums over jumps are ``ndarray.sum``'s pairwise summation (all regimes:
    under 8, up to 128, halves above), at any offset."""
    from bbmap.layout import exttsp_numba

    rng = np.random.default_rng(5)
    for n in (0, 1, 7, 8, 9, 127, 128, 129, 136, 300, 1000, 4099):
        a = rng.standard_normal(n + 3) * 10.0 ** rng.integers(-6, 6, n + 3)
        assert exttsp_numba._pw(a, 3, n) == a[3:].sum()
        assert exttsp_numba._pw(a, 0, n) == a[:n].sum()


def test_ext_tsp_order_takes_the_kernel_by_size(monkeypatch):
    """Big functions take the kernel when numba is there (same order either way), small
    ones the reference; ``$BBMAP_NO_NUMBA`` switches the kernel off."""
    taken = []
    real = exttsp._FastMerger.__init__

    def spy(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        taken.append(len(a[0]))
        real(self, *a, **k)

    monkeypatch.setattr(exttsp._FastMerger, "__init__", spy)
    monkeypatch.setattr(exttsp, "FAST_MIN_BLOCKS", 60)
    monkeypatch.setattr(exttsp, "FAST_NUMBA_MIN_BLOCKS", 60)
    sizes, edges = _graph(random.Random(1), 80, True, False)
    monkeypatch.setenv("BBMAP_NO_NUMBA", "1")
    ref = ext_tsp_order(sizes, edges, LLVM)
    assert taken == []
    monkeypatch.delenv("BBMAP_NO_NUMBA")
    assert ext_tsp_order(sizes, edges, LLVM) == ref
    assert taken == ([80] if HAVE_NUMBA else [])
    ext_tsp_order(sizes[:50], [e for e in edges if max(e[:2]) < 50], LLVM)
    assert len(taken) == (2 if HAVE_NUMBA else 0)  # (the kernel is loaded: all sizes)
    ext_tsp_order(sizes[:30], [e for e in edges if max(e[:2]) < 30], LLVM)
    assert len(taken) == (2 if HAVE_NUMBA else 0)  # (under SMALL_MERGE: the lean merger)


@pytest.mark.parametrize("n,env,imported", [(300, "", False), (exttsp.FAST_MIN_BLOCKS, "1", False),
                                            (exttsp.FAST_MIN_BLOCKS, "", HAVE_NUMBA)])
def test_what_a_layout_imports(n, env, imported):
    """numba (~0.4 s to import) is imported only for a function big enough to pay it
    back, and never with ``$BBMAP_NO_NUMBA=1``."""
    code = ("import sys, random\n"
            "from bbmap.layout.exttsp import ext_tsp_order\n"
            f"n = {n}\n"
            "r = random.Random(2)\n"
            "e = [(i, i + 1, r.randint(1, 9)) for i in range(n - 1)]\n"
            "e += [(i, r.randrange(n), 3) for i in range(0, n, 3)]\n"
            "ext_tsp_order([4] * n, e)\n"
            "print('numba' in sys.modules)\n")
    env_ = {"BBMAP_NO_NUMBA": env} if env else {}
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, **env_} if env else
                         {k: v for k, v in os.environ.items() if k != "BBMAP_NO_NUMBA"})
    assert out.stdout.strip() == str(imported)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba (bbmap[fast]) not installed")
def test_the_kernel_is_compiled_when_numba_is_there():
    from bbmap.layout import exttsp_numba

    assert hasattr(exttsp_numba.best_merge, "py_func")
