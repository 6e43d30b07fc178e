"""Which block of a function in build N+1 is which block of it in build N.

Passes, each over the blocks the earlier ones left (a block is matched at most once on
each side, so no two old blocks pour their samples into one new block):

1. ``exact``: the function is unchanged -- as many blocks, each with the same
   instructions (and size) in the same order: block i is block i.
2. ``hash``: the same instructions and the same neighbourhood; the same instructions;
   the same instructions but for their registers; the same opcodes and neighbourhood;
   the same opcodes -- each only where the value is unique on each side (a hash two
   blocks share says nothing about which is which).
3. ``anchor``: blocks calling the same functions in the same order (calls are the most
   stable thing in a block); the entry block is the entry block; then the CFG
   neighbourhood, repeated until nothing changes: an unmatched successor (predecessor)
   of a matched block is the counterpart's unmatched successor (predecessor) with the
   same opcodes, or the only one on both sides, or the one reached by the same kind of
   edge (the taken side of a branch, the fall-through) when each kind is there once
   (NEW may have a kind more -- a branch added beside the fall-through -- if the two
   blocks then end alike: both with successors or both without), or the same entry of
   a jump table of the same length.
4. ``hash`` (loose): the same opcodes, operands aside, nearest by relative position;
   then the neighbourhood again from what that matched.
5. ``hash`` (similar): what is left, by how alike the blocks' instructions are (their
   multisets, registers aside: :func:`similar`), most alike first, with a matched
   neighbour in common breaking ties; then the neighbourhood again.

Matching a block by position alone needs no likeness: requiring one (half the opcodes
alike) for the neighbourhood's "only one" and "same edge kind" pairs was measured worse on
SQLite (hot blocks left unmatched are blocks inference may route no flow through).

What is still unmatched on the old side is ``dropped``; on the new side it has no
evidence and inference fills it (``inferred``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

from bbmap.cfg import S_TABLE
from bbmap.stale.fingerprint import Fingerprints

EXACT, HASH, ANCHOR, DROPPED = "exact", "hash", "anchor", "dropped"
KINDS = (EXACT, HASH, ANCHOR, DROPPED)
MIN_SIMILAR_PASS = 0.6  # opcodes alike enough for pass 5 (Dice of the multisets)


def _dice(x: Counter, y: Counter) -> float:
    n = sum(x.values()) + sum(y.values())
    return 1.0 if not n else 2 * sum((x & y).values()) / n


class _Alike:
    """How alike two blocks' instructions are (Dice coefficients of the multisets of
    their opcodes and of their normalised instructions), memoised per block."""

    def __init__(self, fo: Fingerprints, fn: Fingerprints) -> None:
        self.fo, self.fn = fo, fn
        self.memo: dict[tuple[bool, int], tuple[Counter, Counter]] = {}

    def bags(self, new: bool, b: int) -> tuple[Counter, Counter]:
        k = (new, b)
        if k not in self.memo:
            t = (self.fn if new else self.fo).text.get(b, ())
            self.memo[k] = (Counter(x.split(" ", 1)[0] for x in t), Counter(t))
        return self.memo[k]

    def opcodes(self, a: int, b: int) -> float:
        return _dice(self.bags(False, a)[0], self.bags(True, b)[0])

    def both(self, a: int, b: int) -> tuple[float, float]:
        (mo, io), (mn, in_) = self.bags(False, a), self.bags(True, b)
        return _dice(mo, mn), _dice(io, in_)


def similar(fo: Fingerprints, fn: Fingerprints, a: int, b: int) -> float:
    """How alike old block ``a`` and new block ``b`` are by their opcodes: the Dice
    coefficient of the two multisets (1: the same opcodes; two empty blocks are alike)."""
    return _Alike(fo, fn).opcodes(a, b)


def match_blocks(old: Sequence[int], new: Sequence[int], fo: Fingerprints, fn: Fingerprints,
                 size_old: np.ndarray, size_new: np.ndarray) -> dict[int, tuple[int, str]]:
    """old global block -> (new global block, kind) for one matched function pair
    (``old``/``new``: their blocks in map order)."""
    old, new = list(old), list(new)
    if len(old) == len(new) and all(
            fo.instr[a] == fn.instr[b] and size_old[a] == size_new[b]
            for a, b in zip(old, new)):
        return {a: (b, EXACT) for a, b in zip(old, new)}
    # the compiler's opcode and neighbourhood hashes where both builds wrote them, else
    # the binary's own; instructions always the binary's (clang 22's instruction part
    # differs between two runs of the same compile: spec/stale.md)
    comp = bool(old and new and all(fo.compiler[a] for a in old)
                and all(fn.compiler[b] for b in new))
    in_o, in_n = fo.instr, fn.instr
    op_o, nb_o = (fo.c_opcode, fo.c_neighbor) if comp else (fo.opcode, fo.neighbor)
    op_n, nb_n = (fn.c_opcode, fn.c_neighbor) if comp else (fn.opcode, fn.neighbor)
    out: dict[int, tuple[int, str]] = {}
    used: set[int] = set()

    def free_old() -> list[int]:
        return [a for a in old if a not in out]

    def free_new() -> list[int]:
        return [b for b in new if b not in used]

    def unique(key_o, key_n, kind: str) -> None:  # noqa: ANN001 - block -> Hashable
        ko: dict[Hashable, list[int]] = defaultdict(list)
        kn: dict[Hashable, list[int]] = defaultdict(list)
        for a in free_old():
            k = key_o(a)
            if k is not None:
                ko[k].append(a)
        for b in free_new():
            k = key_n(b)
            if k is not None:
                kn[k].append(b)
        for k, as_ in ko.items():
            bs = kn.get(k, [])
            if len(as_) == 1 and len(bs) == 1:
                out[as_[0]] = (bs[0], kind)
                used.add(bs[0])

    unique(lambda a: (in_o[a], nb_o[a]), lambda b: (in_n[b], nb_n[b]), HASH)
    unique(lambda a: in_o[a], lambda b: in_n[b], HASH)
    unique(lambda a: fo.shape[a], lambda b: fn.shape[b], HASH)
    unique(lambda a: (op_o[a], nb_o[a]), lambda b: (op_n[b], nb_n[b]), HASH)
    unique(lambda a: op_o[a], lambda b: op_n[b], HASH)
    unique(lambda a: fo.calls.get(a) or None, lambda b: fn.calls.get(b) or None, ANCHOR)
    if old and new and old[0] not in out and new[0] not in used:
        out[old[0]] = (new[0], ANCHOR)
        used.add(new[0])
    alike = _Alike(fo, fn)
    _neighbourhood(old, fo, fn, op_o, op_n, out, used)
    # loose: the same opcodes, nearest by relative position
    pos_o = {a: i / max(len(old), 1) for i, a in enumerate(old)}
    pos_n = {b: i / max(len(new), 1) for i, b in enumerate(new)}
    by_op: dict[int, list[int]] = defaultdict(list)
    for b in free_new():
        by_op[int(op_n[b])].append(b)
    for a in free_old():
        cands = [b for b in by_op.get(int(op_o[a]), []) if b not in used]
        if cands:
            b = min(cands, key=lambda b: (abs(pos_n[b] - pos_o[a]), b))
            out[a] = (b, HASH)
            used.add(b)
    _neighbourhood(old, fo, fn, op_o, op_n, out, used)
    if _similar_pass(free_old(), free_new(), fo, fn, pos_o, pos_n, out, used, alike):
        _neighbourhood(old, fo, fn, op_o, op_n, out, used)
    return out


def _similar_pass(old: list[int], new: list[int], fo: Fingerprints, fn: Fingerprints,
                  pos_o: dict[int, float], pos_n: dict[int, float],
                  out: dict[int, tuple[int, str]], used: set[int], alike: _Alike) -> bool:
    """Pass 5: the blocks left, paired most alike first (opcodes at least
    ``MIN_SIMILAR_PASS`` alike; ranked by instructions, then opcodes, then a matched
    neighbour in common, then relative position).  Whether anything matched."""
    if not old or not new:
        return False
    by_op: dict[str, list[int]] = defaultdict(list)
    for b in new:
        for m in alike.bags(True, b)[0]:
            by_op[m].append(b)
    image = {a: b for a, (b, _k) in out.items()}
    cands = []
    for a in old:
        ops = alike.bags(False, a)[0]
        near = {image[x] for x in (*fo.succ.get(a, ()), *fo.pred.get(a, ())) if x in image}
        seen: set[int] = set()
        for m in ops:
            for b in by_op.get(m, ()):
                if b in seen:
                    continue
                seen.add(b)
                d_op, d_in = alike.both(a, b)
                if d_op < MIN_SIMILAR_PASS:
                    continue
                shared = bool(near & {*fn.succ.get(b, ()), *fn.pred.get(b, ())})
                cands.append((-d_in, -d_op, -shared, abs(pos_o[a] - pos_n[b]), a, b))
    cands.sort()
    hit = False
    for *_r, a, b in cands:
        if a not in out and b not in used:
            out[a] = (b, HASH)
            used.add(b)
            hit = True
    return hit


def _neighbourhood(old: list[int], fo: Fingerprints, fn: Fingerprints,
                   op_o: np.ndarray, op_n: np.ndarray, out: dict[int, tuple[int, str]],
                   used: set[int]) -> None:
    """Matches spread from matched blocks to their unmatched neighbours (pass 3)."""
    oldset = set(old)
    changed = True
    while changed:
        changed = False
        for a, (b, _k) in sorted(out.items()):
            for near_o, near_n, fwd in ((fo.succ, fn.succ, True), (fo.pred, fn.pred, False)):
                ao = [x for x in near_o.get(a, []) if x in oldset and x not in out]
                bn = [y for y in near_n.get(b, []) if y not in used]
                if not ao or not bn:
                    continue
                pairs = []
                if len(ao) == 1 and len(bn) == 1:
                    pairs = [(ao[0], bn[0])]
                else:
                    for x in ao:
                        same = [y for y in bn if op_n[y] == op_o[x]]
                        if len(same) == 1 and sum(op_o[z] == op_o[x]
                                                  for z in ao) == 1:
                            pairs.append((x, same[0]))
                    if not pairs and fwd and len(near_o.get(a, [])) == len(near_n.get(b, [])) \
                            and all(fo.edge_kind.get((a, x)) == S_TABLE
                                    for x in near_o.get(a, [])):
                        pairs = [(x, y) for x, y in zip(near_o[a], near_n[b])
                                 if x in ao and y in bn]
                    if not pairs:
                        ko = [fo.edge_kind.get((a, x) if fwd else (x, a)) for x in ao]
                        kn = [fn.edge_kind.get((b, y) if fwd else (y, b)) for y in bn]
                        if len(set(ko)) == len(ko) and len(set(kn)) == len(kn) \
                                and set(ko) <= set(kn):
                            pairs = [(x, bn[kn.index(k)]) for x, k in zip(ao, ko)]
                            if set(ko) != set(kn):  # NEW has an edge more: ends alike
                                pairs = [(x, y) for x, y in pairs
                                         if bool(fo.succ.get(x)) == bool(fn.succ.get(y))]
                for x, y in pairs:
                    if x not in out and y not in used:
                        out[x] = (y, ANCHOR)
                        used.add(y)
                        changed = True
