"""LLVM's own Ext-TSP block-placement tests, scores and orders reproduced.

llvm/test/CodeGen/X86/code_placement_ext_tsp_large.ll prints, with ``-debug-only=
block-placement``, ``original  layout score: 23587612604815436.00`` and ``optimized layout
score: 27891096739311172.00`` for ``func_large`` and checks the order b0 b2 b3 b4 b5 b8 b1 b6
b7 b9; code_placement_ext_tsp.ll checks the orders of six more functions.  LLVM scores the
graph ``MachineBlockPlacement::applyExtTsp`` builds from the placed machine function: block
size = 4 bytes per non-debug instruction, block count = its MBFI frequency, jump count =
the source's frequency times the edge probability (``freq * p >> 31``).  The graphs below are
those numbers, read off llc-22 (a release build, so no ``-debug-only``) on the two tests'
IR: ``llc-22 -mcpu=corei7 -mtriple=x86_64-linux -enable-ext-tsp-block-placement=0
-stop-after=block-placement`` (the layout before Ext-TSP, its instructions and successor
probabilities) and ``-print-machine-bfi`` (the ``int`` frequencies).  The printed scores come
out to every digit, and bbmap's order is LLVM's in all seven functions.
"""

from __future__ import annotations

import pytest

from bbmap.layout.exttsp import LLVM, ext_tsp_order, ext_tsp_score

GRAPHS = {
    # name: (block names in the placed order, sizes, MBFI counts, [src, dst, count])
    "func_large": (
        ["b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"],
        [96, 44, 48, 16, 16, 120, 36, 12, 244, 16],
        [18014398509481984, 18014398509481984, 9007199254740992, 6755399441055744,
         4503599626321920, 1688849859870720, 4805885950, 4805885950, 4503599628419072,
         20575659],
        [(0, 1, 9007199254740992), (0, 2, 9007199254740992), (2, 3, 6755399441055744),
         (2, 8, 2251799813685248), (3, 4, 4503599626321920), (3, 8, 2251799814733824),
         (4, 5, 1688849859870720), (4, 1, 2814749766451200), (5, 1, 1688845053984769),
         (5, 6, 4805885950), (6, 7, 4785310290), (6, 9, 20575659), (7, 1, 4805885950),
         (8, 1, 4503599628419072), (9, 7, 20575659)]),
    "func1a": (
        ["b0", "b1", "b2"], [20, 12, 16],
        [18014398509481984, 5146971006304256, 18014398509481984],
        [(0, 1, 5146971006304256), (0, 2, 12867427503177728), (1, 2, 5146971006304256)]),
    "func1b": (
        ["b0", "b1", "b2"], [20, 12, 16],
        [18014398509481984, 8006399338479616, 18014398509481984],
        [(0, 1, 8006399338479616), (0, 2, 10007999171002368), (1, 2, 8006399338479616)]),
    "func2": (
        ["b0", "b3", "b4", "b2", "b1"], [32, 4, 16, 44, 8],
        [8615581898513838, 5874260383891456, 18014398509481984, 8615581898513838,
         2741321514622382],
        [(0, 4, 2741321514622382), (0, 1, 5874260383891455), (1, 2, 5874260383891456),
         (2, 3, 5874260383891456), (2, 2, 12140138125590528), (4, 3, 2741321514622382)]),
    "func3": (
        ["b0", "b1", "b2", "b3", "b4", "b5"], [80, 12, 28, 80, 80, 12],
        [8548387494297600, 18014398509481984, 9466011015184384, 6067955778738299,
         3398055236446084, 8548387494297600],
        [(0, 1, 8548387494297600), (1, 5, 8548387494297600), (1, 2, 9466011015184384),
         (2, 3, 6067955778738299), (2, 4, 3398055236446084), (3, 1, 6067955778738299),
         (4, 1, 3398055236446084)]),
    "func_loop": (
        ["entry", "if.else", "if.end", "header", "if.then", "end"], [12, 4, 16, 16, 8, 12],
        [562949953421312, 9007199254740992, 18014398509481984, 18014398509481984,
         9007199254740992, 562949953421312],
        [(0, 3, 562949953421312), (1, 2, 9007199254740992), (2, 3, 17451448556060672),
         (2, 5, 562949953421312), (3, 4, 9007199254740992), (3, 1, 9007199254740992),
         (4, 2, 9007199254740992)]),
    "func4": (
        ["entry", "b1", "b3", "b2"], [24, 16, 4, 16],
        [18014398509481984, 18014398501093376, 6671999444228020, 18014398509481984],
        [(0, 1, 18014398509481984), (0, 3, 0), (1, 3, 11342399056865355),
         (1, 2, 6671999444228020), (2, 3, 6671999444228020)]),
}

# the CHECK lines of the two tests
EXPECTED = {
    "func_large": ["b0", "b2", "b3", "b4", "b5", "b8", "b1", "b6", "b7", "b9"],
    "func1a": ["b0", "b2", "b1"],
    "func1b": ["b0", "b1", "b2"],
    "func2": ["b0", "b3", "b4", "b2", "b1"],
    "func3": ["b0", "b1", "b2", "b3", "b5", "b4"],
    "func_loop": ["entry", "if.else", "if.end", "header", "if.then", "end"],
    "func4": ["entry", "b1", "b3", "b2"],
}


def test_func_large_printed_scores():
    names, sizes, _, edges = GRAPHS["func_large"]
    original = ext_tsp_score(sizes, edges, range(len(sizes)), LLVM)
    optimized = ext_tsp_score(sizes, edges, [names.index(b) for b in EXPECTED["func_large"]],
                              LLVM)
    assert f"{original:.2f}" == "23587612604815436.00"
    assert f"{optimized:.2f}" == "27891096739311172.00"


@pytest.mark.parametrize("name", list(GRAPHS))
def test_llvm_check_orders(name):
    names, sizes, counts, edges = GRAPHS[name]
    got = [names[i] for i in ext_tsp_order(sizes, edges, LLVM, counts=counts)]
    assert got == EXPECTED[name]
