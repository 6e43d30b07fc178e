"""Alignment padding: where the compiler's loop-header padding runs after a reordering.

clang aligns a loop header (``.p2align 4``) when, in the block order *it* chose, the header
is not entered by a hot fall-through: the padding then sits behind an unconditional jump
and never runs.  clang decides this in its block placement, before
``-fbasic-block-sections=list=`` puts the blocks in the cluster file's order, and the
sections pass keeps every block's alignment.  A new order that makes the latch or the
preheader fall into the header puts the padding on that path: its nops run on every such
entry and fill hot cache lines.  BOLT drops all padding when it rewrites a function.

This module measures that, per function, from what the profiled binary shows:

* a block's alignment: the block map leaves a gap before a block only for padding, so a
  block with a gap before it (in its address range) was aligned, to the largest power of
  two its address is a multiple of (at most :data:`FUNCTION_ALIGN`, as a function section
  starts at that alignment and the offset inside it is all the layout can know); a block
  that happened to start aligned without a gap is not counted (no evidence);
* the padding a layout puts before each block: the blocks back to back from an aligned
  start, each aligned block padded up to its alignment (for the original layout: the
  gaps themselves);
* the padding that runs: every fall-through edge (the target starts where its source
  ends) into a padded block, weighted by its count.

The plan (:mod:`bbmap.layout.plan`) compares the padding that runs in the new order with
the padding that runs in the compiler's, and when the new order runs more, the build recipe
it prints turns loop alignment off for the unit (:data:`DROP_LOOP_ALIGNMENT`): clang-22 has
no per-function or per-block switch for it, and re-aligning after the sections pass is
left to the compiler (spec/layout.md, "Alignment").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the function alignment of clang -O2 on x86-64 (a function section starts there)
FUNCTION_ALIGN = 16
# the compiler flag that turns loop-header alignment off (-falign-loops=N: N-byte aligned)
DROP_LOOP_ALIGNMENT = "-falign-loops=1"
LOOP_ALIGNMENT_POLICIES = ("auto", "keep", "drop")


@dataclass(frozen=True)
class Padding:
    """Padding that runs in one layout of one function."""

    entries: int = 0  # executions of fall-throughs into a padded block
    bytes: int = 0  # padding bytes run (entries x padding)
    blocks: int = 0  # padded blocks entered by a fall-through that runs

    def __add__(self, o: Padding) -> Padding:
        return Padding(self.entries + o.entries, self.bytes + o.bytes, self.blocks + o.blocks)

    def to_json(self) -> dict:
        return {"entries": self.entries, "bytes": self.bytes, "blocks": self.blocks}


def block_alignment(addr: np.ndarray, sizes: np.ndarray, ranges: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per block: the padding before it in the binary, and the alignment that padding
    shows (1 for a block without padding)."""
    n = len(addr)
    gap = np.zeros(n, np.int64)
    align = np.ones(n, np.int64)
    if n < 2:
        return gap, align
    by = np.lexsort((addr, ranges))
    prev, cur = by[:-1], by[1:]
    same = ranges[prev] == ranges[cur]
    g = addr[cur] - (addr[prev] + sizes[prev])
    ok = same & (g > 0)
    gap[cur[ok]] = g[ok]
    for v in cur[ok].tolist():
        a = int(addr[v])
        k = 1
        while k < FUNCTION_ALIGN and a % (2 * k) == 0:
            k *= 2
        align[v] = k
    return gap, align


def padding_of_order(order: list[int], sizes: np.ndarray, align: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The blocks of ``order`` back to back from an aligned start, each aligned block
    padded to its alignment: (address of each block, padding before it); blocks not in
    ``order`` get address -1."""
    n = len(sizes)
    addr = np.full(n, -1, np.int64)
    pad = np.zeros(n, np.int64)
    off = 0
    for v in order:
        a = int(align[v])
        p = (-off) % a if a > 1 else 0
        off += p
        addr[v], pad[v] = off, p
        off += int(sizes[v])
    return addr, pad


def running_padding(addr: np.ndarray, sizes: np.ndarray, pad: np.ndarray,
                    edges: np.ndarray) -> Padding:
    """Padding run by the fall-throughs of a layout: edges whose target starts right after
    its source's end plus the target's padding."""
    if not len(edges):
        return Padding()
    s, d, w = edges[:, 0], edges[:, 1], edges[:, 2]
    placed = (addr[s] >= 0) & (addr[d] >= 0)
    ft = placed & (s != d) & (addr[d] == addr[s] + sizes[s] + pad[d]) & (pad[d] > 0) & (w > 0)
    return Padding(entries=int(w[ft].sum()), bytes=int((w[ft] * pad[d[ft]]).sum()),
                   blocks=len(set(d[ft].tolist())))


def padding_before_after(addr: np.ndarray, sizes: np.ndarray, ranges: np.ndarray,
                         edges: np.ndarray, order: list[int]) -> tuple[Padding, Padding]:
    """The padding that runs in the compiler's layout (the binary's addresses and gaps) and
    in ``order`` (the new hot cluster, each block keeping its alignment)."""
    gap, align = block_alignment(addr, sizes, ranges)
    before = running_padding(addr, sizes, gap, edges)
    new_addr, pad = padding_of_order(order, sizes, align)
    return before, running_padding(new_addr, sizes, pad, edges)


def loop_alignment_flags(policy: str, before: Padding, after: Padding) -> tuple[str, ...]:
    """The compiler flags the build recipe adds: loop alignment off when the policy says so,
    or (``auto``) when the new layout runs more padding than the compiler's did -- clang
    aligned those headers on the premise that their padding is off the hot path, and the
    new order broke it."""
    if policy not in LOOP_ALIGNMENT_POLICIES:
        raise ValueError(f"loop alignment {policy!r} (one of "
                         f"{', '.join(LOOP_ALIGNMENT_POLICIES)})")
    if policy == "drop" or (policy == "auto" and after.bytes > before.bytes):
        return (DROP_LOOP_ALIGNMENT,)
    return ()
