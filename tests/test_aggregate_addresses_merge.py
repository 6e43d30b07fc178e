"""``AddressProfile.merge`` with an empty side keeps the other's rows (no sort): the same
profile as reduce_by_key of the concatenation, its definition (bbmap/aggregate/addresses.py
``_sum_tables``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.aggregate.addresses import AddressProfile, reduce_by_key

KEY = st.sampled_from([0, 3, 40, 2**32 - 1, 2**32, 2**63, 2**64 - 1])
ROWS = st.lists(st.tuples(KEY, KEY, KEY, st.integers(1, 5), st.integers(0, 1)), max_size=40)
IPS = st.lists(st.tuples(KEY, st.integers(1, 9)), max_size=40)


def profile(rows, ips, raw: bool) -> AddressProfile:
    """From rows; ``raw``: as given (unsorted, repeated keys), else reduced."""
    k = [np.array([r[i] for r in rows], np.uint64) for i in range(3)]
    v = [np.array([r[i] for r in rows], np.int64) for i in (3, 4)]
    a = [np.array([r[0] for r in ips], np.uint64)]
    s = [np.array([r[1] for r in ips], np.int64)]
    if not raw:
        k, v = reduce_by_key(k, v)
        a, s = reduce_by_key(a, s)
    return AddressProfile(trace_from=k[0], trace_to=k[1], trace_end=k[2], trace_count=v[0],
                          trace_mispred=v[1], ip_addr=a[0], ip_samples=s[0], events=["e"],
                          samples=len(ips), entries=len(rows))


def definition(a: AddressProfile, b: AddressProfile) -> list:
    cat = [np.concatenate([getattr(a, f), getattr(b, f)]) for f in
           ("trace_from", "trace_to", "trace_end", "trace_count", "trace_mispred",
            "ip_addr", "ip_samples")]
    (f, t, e), (c, m) = reduce_by_key(cat[:3], cat[3:5])
    (ia,), (iS,) = reduce_by_key([cat[5]], [cat[6]])
    return [(x.dtype.str, x.tolist()) for x in (f, t, e, c, m, ia, iS)]


def columns(p: AddressProfile) -> list:
    return [(x.dtype.str, x.tolist()) for x in (p.trace_from, p.trace_to, p.trace_end,
                                                 p.trace_count, p.trace_mispred, p.ip_addr,
                                                 p.ip_samples)]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(ROWS, IPS, ROWS, IPS, st.booleans(), st.booleans(), st.booleans())
def test_merge_equals_reduce_of_concatenation(r1, i1, r2, i2, raw, empty, swap):
    a = profile(r1, i1, raw)
    b = AddressProfile() if empty else profile(r2, i2, raw)
    if swap:
        a, b = b, a
    m = a.merge(b)
    assert columns(m) == definition(a, b)
    assert (m.samples, m.entries, m.events) == (a.samples + b.samples,
                                                a.entries + b.entries,
                                                sorted(set(a.events) | set(b.events)))
