"""The compiled built-in solver (bbmap/inference/solvers_fast.py, solvers_numba.py) gives
the pure-Python reference's flows (``solvers._ssp``), arc for arc -- not merely flows as
cheap: the same algorithm, so the same choice among equal-cost optima.

The kernel is compiled when numba is installed (``bbmap[fast]``) and runs as plain Python
otherwise, so the equality of the two algorithms is checked on every install; the
compiled form is checked where numba is there."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_inference_components import _floored
from test_inference_flow import draw_entries_and_edge_weights, problems

from bbmap import installed
from bbmap.inference import components, solvers, solvers_fast, solvers_numba
from bbmap.inference.flow import build_network, infer

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def _reference(s: components.Split) -> np.ndarray:
    """Every function of ``s`` by the pure-Python ``_ssp``."""
    out = np.zeros(int(s.ptr[-1]), np.int64)
    for k in range(s.count):
        p, q = int(s.ptr[k]), int(s.ptr[k + 1])
        out[p:q] = components._one_builtin(s, p, q, int(s.nodes[k]))
    return out


def _kernel(s: components.Split, skip: np.ndarray | None = None) -> np.ndarray:
    return solvers_fast.solve_functions(s.ptr, s.nodes, s.tail, s.head, s.cap, s.cost, 0,
                                        s.count, skip)


@st.composite
def raw_networks(draw) -> components.Split:  # noqa: ANN001
    """Functions of random arcs (parallel arcs, self-loops, negative costs, zero and
    large capacities): any shape ``_ssp`` accepts, beyond what build_network makes."""
    k = draw(st.integers(1, 4))
    ptr, nodes, tail, head, cap, cost = [0], [], [], [], [], []
    for _ in range(k):
        n = draw(st.integers(1, 9))
        m = draw(st.integers(0, 24))
        for _ in range(m):
            tail.append(draw(st.integers(0, n - 1)))
            head.append(draw(st.integers(0, n - 1)))
            cap.append(draw(st.sampled_from([0, 1, 2, 3, 7, 100, 10**9])))
            cost.append(draw(st.integers(-50, 50)))
        ptr.append(ptr[-1] + m)
        nodes.append(n)
    a = lambda x: np.array(x, np.int64)  # noqa: E731
    return components.Split(arc=np.arange(len(tail)), ptr=a(ptr), tail=a(tail),
                            head=a(head), cap=a(cap), cost=a(cost), nodes=a(nodes))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_networks())
def test_the_kernel_gives_the_reference_flows_on_any_network(s: components.Split) -> None:
    assert np.array_equal(_kernel(s), _reference(s))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_the_kernel_gives_the_reference_flows_on_inference_networks(p, data) -> None:  # noqa: ANN001
    """On the networks inference builds (floors, side entries, observed edges), and with
    some functions skipped (left at 0, as the flow cache's hits are)."""
    p = _floored(draw_entries_and_edge_weights(p, data), data)
    s = components.split_network(build_network(p))
    ref = _reference(s)
    assert np.array_equal(_kernel(s), ref)
    skip = np.array(data.draw(st.lists(st.booleans(), min_size=s.count, max_size=s.count)))
    got = _kernel(s, skip)
    keep = ~np.repeat(skip, np.diff(s.ptr))
    assert np.array_equal(got[keep], ref[keep]) and not got[~keep].any()


def test_solve_split_takes_the_kernel_for_big_networks_with_the_same_flows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``solve_split`` with the built-in solver routes a network of FAST_MIN_ARCS arcs or
    more to the kernel (when numba is there) and the flows do not change."""
    rng = np.random.default_rng(7)
    n = 6
    m = 30
    k = 50
    s = components.Split(
        arc=np.arange(k * m), ptr=np.arange(k + 1, dtype=np.int64) * m,
        tail=rng.integers(0, n, k * m), head=rng.integers(0, n, k * m),
        cap=rng.integers(0, 20, k * m), cost=rng.integers(-9, 9, k * m),
        nodes=np.full(k, n, np.int64))
    ref = _reference(s)
    calls = []
    real = solvers_fast.solve_functions
    monkeypatch.setattr(solvers_fast, "solve_functions",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setattr(solvers_fast, "FAST_MIN_ARCS", k * m)
    assert np.array_equal(components.solve_split(s, "builtin"), ref)
    assert calls == ([1] if HAVE_NUMBA else [])
    monkeypatch.setenv(installed.ENV_NO_NUMBA, "1")
    calls.clear()
    assert np.array_equal(components.solve_split(s, "builtin"), ref)
    assert calls == []


def test_overflow_guard() -> None:
    """A network whose sums might not fit int64 is left to the reference solver."""
    a = np.array([1, 2], np.int64)
    assert solvers_fast.fits(a, np.array([5, -5]), 10)
    assert not solvers_fast.fits(a, np.array([1 << 58, 0]), 10)
    assert not solvers_fast.fits(np.array([1 << 61, 1 << 61]), np.array([1, 1]), 2)


def test_an_infeasible_network_is_an_error_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel names a function it found no path in (inference never builds one: a
    saturated arc's reverse is always there), and that is the reference's error."""
    from bbmap.errors import BBMapError

    monkeypatch.setattr(solvers_numba, "solve_all", lambda *a: (np.zeros(0, np.int64), 0))
    with pytest.raises(BBMapError, match="no path"):
        solvers_fast.solve_functions(np.array([0, 0]), np.array([1]), *[np.zeros(0)] * 4,
                                     0, 1)


def test_auto_picks_the_builtin_solver_when_it_is_compiled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` is the built-in solver where numba is installed (then OR-Tools where it
    is, then the built-in solver), and ``$BBMAP_NO_NUMBA`` turns the rule off."""
    if HAVE_NUMBA:
        assert solvers.pick("auto") == "builtin"
    monkeypatch.setenv(installed.ENV_NO_NUMBA, "1")
    assert solvers.pick("auto") == ("ortools" if solvers.available("ortools") else "builtin")


def test_auto_preloads_ortools_only_when_it_may_pick_it() -> None:
    """With numba installed ``auto`` is the built-in solver, so ``preload('auto')`` maps
    no OR-Tools library (nor imports anything of it)."""
    import subprocess
    import sys

    code = ("import sys, threading; from bbmap.inference import solvers, solvers_fast; "
            "solvers.preload('auto'); "
            "ts = [t for t in threading.enumerate() if t.name == 'bbmap-preload-ortools']; "
            "print(bool(ts) == (not solvers_fast.available() and solvers.available('ortools'))"
            " or not solvers.available('ortools'))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True"]


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba (bbmap[fast]) not installed")
def test_the_kernel_is_compiled_where_numba_is_installed() -> None:
    assert hasattr(solvers_numba.solve_all, "py_func")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_infer_with_the_builtin_solver_is_unchanged_by_the_kernel(p, data) -> None:  # noqa: ANN001
    """End to end: ``infer`` gives the same counts with the kernel as without it."""
    from test_inference_components import _many

    p = _many(_floored(draw_entries_and_edge_weights(p, data), data), 5)
    old = solvers_fast.FAST_MIN_ARCS
    try:
        solvers_fast.FAST_MIN_ARCS = 1 << 62
        ref = infer(p, "builtin")
        solvers_fast.FAST_MIN_ARCS = 0
        got = infer(p, "builtin")
    finally:
        solvers_fast.FAST_MIN_ARCS = old
    assert np.array_equal(got.block_flow, ref.block_flow)
    assert np.array_equal(got.edge_flow, ref.edge_flow)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_the_kernel_in_worker_processes_gives_the_same_flows(p, data) -> None:  # noqa: ANN001
    """Two worker processes, each running the kernel over its share of the functions,
    give the flows of one process."""
    from test_inference_components import _many

    p = _many(_floored(draw_entries_and_edge_weights(p, data), data), 6)
    old = solvers_fast.FAST_MIN_ARCS, components.PARALLEL_MIN_ARCS
    try:
        solvers_fast.FAST_MIN_ARCS = 0
        components.PARALLEL_MIN_ARCS = 0
        one = infer(p, "builtin", workers=1)
        two = infer(p, "builtin", workers=2)
    finally:
        solvers_fast.FAST_MIN_ARCS, components.PARALLEL_MIN_ARCS = old
    assert np.array_equal(one.block_flow, two.block_flow)
    assert np.array_equal(one.edge_flow, two.edge_flow)
