"""Function order: call-chain clustering (Propeller's rules), CDSort (LLVM's tests),
hottest first."""

from __future__ import annotations

import pytest

from bbmap.layout.callchain import MERGE_SIZE_LIMIT, call_chain_order, hottest_first
from bbmap.layout.cdsort import CDSortConfig, cdsort_order


def test_c3_propeller_build_clusters():
    """llvm-propeller code_layout_test.cc CodeLayoutTest.BuildClusters on
    simple_multi_function (sizes and frequencies of google/autofdo
    testdata/propeller_simple_multi_function.protobuf): bar calls foo 100 times, so foo's
    chain joins bar's cluster after it; qux stays alone; cold baz comes last."""
    # index: foo 0, bar 1, baz 2, qux 3 (address order); hot bytes, summed block counts
    sizes = [8 + 6 + 6, 10 + 6 + 6, 8, 12]
    freqs = [100 + 20 + 80, 100 + 100 + 100, 0, 10]
    entry = [100, 100, 0, 10]
    assert call_chain_order(sizes, freqs, entry, [(1, 0, 100)]) == [1, 0, 3, 2]


def test_c3_rules():
    sizes, freqs, entry = [100, 100, 100], [1000, 500, 1000], [100, 100, 100]
    # the callee follows its heaviest caller's cluster; clusters densest first
    assert call_chain_order(sizes, freqs, entry, [(2, 0, 50), (1, 0, 40)]) == [2, 0, 1]
    # a call lighter than a tenth of the callee's entry count is ignored
    assert call_chain_order(sizes, freqs, entry, [(2, 0, 9)]) == [0, 2, 1]
    # ties between caller clusters go to the larger id (Propeller's max over (weight, id))
    assert call_chain_order(sizes, freqs, entry, [(1, 0, 50), (2, 0, 50)]) == [2, 0, 1]
    # a caller cluster over the merge size limit takes no callee
    big = [MERGE_SIZE_LIMIT + 1, 100, 100]
    assert call_chain_order(big, [10**6, 1000, 2000], entry, [(0, 1, 500)]) == [2, 1, 0]
    assert call_chain_order(big, [10**6, 1000, 2000], entry, [(0, 1, 500)],
                            merge_size_limit=4 << 20) == [2, 0, 1]
    # nor does a merge that would cut the caller cluster's density by more than 1/8
    assert call_chain_order([10, 10_000, 10], [10_000, 10, 10], [100, 10, 10],
                            [(0, 1, 10)]) == [0, 2, 1]
    # recursion and zero counts are no calls
    assert call_chain_order(sizes, freqs, entry, [(0, 0, 99), (1, 2, 0)]) == [0, 2, 1]


def test_hottest_first():
    assert hottest_first([5, 9, 9, 0], [1, 1, 2, 7]) == [2, 1, 0, 3]


@pytest.mark.parametrize("sizes,counts,edges,offsets,want", [
    # llvm/unittests/Transforms/Utils/CodeLayoutTest.cpp: ThreeFunctions (two cases),
    # HotChain, BreakLoop (two cases)
    ([9] * 3, [140, 40, 140], [(0, 1, 40), (0, 2, 100), (1, 2, 40)], [5] * 3, [0, 2, 1]),
    ([9] * 3, [180, 80, 180], [(0, 1, 80), (0, 2, 100), (1, 2, 80)], [9, 5, 9], [0, 1, 2]),
    ([9] * 5, [22, 7, 22, 15, 46],
     [(0, 1, 7), (1, 2, 7), (0, 3, 15), (3, 4, 15), (4, 4, 31), (4, 2, 15)], [5] * 6,
     [0, 3, 4, 2, 1]),
    ([9] * 6, [177, 371, 196, 124, 70, 177],
     [(0, 1, 177), (1, 2, 196), (2, 3, 124), (3, 1, 124), (1, 5, 177), (2, 4, 79), (4, 1, 70)],
     [5] * 7, [4, 0, 1, 2, 3, 5]),
    ([18] + [9] * 5, [177, 371, 196, 124, 70, 177],
     [(0, 1, 177), (1, 2, 196), (2, 3, 124), (3, 1, 124), (1, 5, 177), (2, 4, 79), (4, 1, 70)],
     [5] * 7, [0, 4, 1, 2, 3, 5]),
], ids=["three-likely", "three-fallthrough", "hot-chain", "break-loop", "break-loop-big0"])
def test_cdsort_llvm_unit_tests(sizes, counts, edges, offsets, want):
    assert cdsort_order(sizes, counts, edges, offsets) == want


def test_cdsort_max_chain_size():
    """HotChain with CDSortConfig.MaxChainSize = 3 (LLVM's unit test)."""
    got = cdsort_order([9] * 5, [22, 7, 22, 15, 46],
                       [(0, 1, 7), (1, 2, 7), (0, 3, 15), (3, 4, 15), (4, 4, 31), (4, 2, 15)],
                       [5] * 6, CDSortConfig(max_chain_size=3))
    assert got == [0, 3, 4, 1, 2]
