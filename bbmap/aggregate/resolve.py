"""Runtime addresses -> (bucket, ELF vaddr, block, block-map function, DSO), in bulk.

The aggregation code depends only on the :class:`Resolver` protocol, so it can be fed
by the real mapping and index layers (:class:`ProfileResolver`) or by a small
hand-built resolver in tests.  ``direction`` matters for branch ends: a branch
*target* at an address shared by empty blocks belongs to the first of them, a branch
*source* to the last (Propeller's rule, implemented by the index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from bbmap.buckets import IN_BLOCK, IN_FUNCTION_NO_BLOCK, OTHER_DSO, OUTSIDE_FUNCTION, UNMAPPED


@dataclass
class Resolved:
    where: np.ndarray  # i1 bucket code (bbmap.buckets: IN_BLOCK ... UNMAPPED)
    vaddr: np.ndarray  # u8 ELF vaddr (meaningful where the address is in the binary)
    block: np.ndarray  # i8 global block index, -1 if none
    func: np.ndarray  # i4 block-map function index, -1 if none
    dso: np.ndarray  # i4 index into Resolver.dso_names for OTHER_DSO, else -1

    def __len__(self) -> int:
        return len(self.where)


class Resolver(Protocol):
    dso_names: list[str]

    def resolve(self, addr: np.ndarray, pid: np.ndarray, seq: np.ndarray,
                cpumode: np.ndarray | None, direction: str | None = None,
                time: np.ndarray | None = None) -> Resolved:
        """Resolve runtime addresses; ``direction`` is None (IP), "from" or "to"; ``time``
        (with ``seq``) says which mappings were live."""
        ...


def empty_resolved(n: int) -> Resolved:
    return Resolved(where=np.full(n, UNMAPPED, np.int8), vaddr=np.zeros(n, np.uint64),
                    block=np.full(n, -1, np.int64), func=np.full(n, -1, np.int32),
                    dso=np.full(n, -1, np.int32))


class AddressSpace(Protocol):
    """Stage 0: runtime address -> binary / other DSO / kernel / unmapped, and ELF vaddr."""

    dso_names: list[str]

    def classify(self, addr: np.ndarray, pid: np.ndarray, seq: np.ndarray,
                 cpumode: np.ndarray | None, time: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (where, vaddr, dso): where uses OUTSIDE_FUNCTION for "in the binary"."""
        ...


class IndexResolver:
    """An address space (the profile's mappings) followed by the block index.

    ``where`` from the address space says only "in the binary"; the index refines it into
    in-block / in-function-no-block / outside-function.
    """

    def __init__(self, space: AddressSpace, index, num_map_functions: int) -> None:  # noqa: ANN001
        self.space = space
        self.index = index
        self.num_map_functions = num_map_functions

    @property
    def dso_names(self) -> list[str]:
        return self.space.dso_names

    def constant_between(self, pids: list[int], seq: np.ndarray,
                         time: np.ndarray | None = None) -> bool:
        """Whether every address of ``pids`` resolves the same at every one of these
        moments (no mapping begins or ends among them): then a batch may be resolved once
        per distinct address (:mod:`bbmap.aggregate.distinct`).  False when the address
        space cannot tell."""
        check = getattr(self.space, "constant_between", None)
        return bool(check(pids, seq, time)) if check is not None else False

    def resolve_binary(self, addr: np.ndarray, pid: np.ndarray, seq: np.ndarray,
                       cpumode: np.ndarray | None, time: np.ndarray | None = None
                       ) -> Resolved:
        """The address space only (no block index): ``where`` is ``OUTSIDE_FUNCTION``
        for every address in the binary, with its ELF vaddr -- all that the address
        aggregates (BOLT's formats) need."""
        n = len(addr)
        out = empty_resolved(n)
        if n == 0:
            return out
        where, vaddr, dso = self.space.classify(addr, pid, seq, cpumode, time)
        out.where[:] = where
        out.dso[:] = np.where(where == OTHER_DSO, dso, -1)
        inb = where == OUTSIDE_FUNCTION
        out.vaddr[inb] = np.asarray(vaddr)[inb]
        return out

    def resolve(self, addr: np.ndarray, pid: np.ndarray, seq: np.ndarray,
                cpumode: np.ndarray | None, direction: str | None = None,
                time: np.ndarray | None = None) -> Resolved:
        from bbmap import index as ix

        out = self.resolve_binary(addr, pid, seq, cpumode, time)  # stage 0, then the index
        inb = np.flatnonzero(out.where == OUTSIDE_FUNCTION)
        if len(inb):
            va = out.vaddr[inb]
            if direction is None or direction == "from":
                lk = self.index.lookup(va)
            else:
                lk = self.index.lookup_direction(va, to=True)
            st = np.asarray(lk.status)
            code = np.full(len(inb), OUTSIDE_FUNCTION, np.int8)
            code[st == ix.IN_BLOCK] = IN_BLOCK
            code[st == ix.IN_FUNCTION_NO_BLOCK] = IN_FUNCTION_NO_BLOCK
            out.where[inb] = code
            blk = np.asarray(lk.block).astype(np.int64)
            out.block[inb] = np.where(code == IN_BLOCK, blk, -1)
            f = np.asarray(lk.func).astype(np.int32)
            out.func[inb] = np.where(f < self.num_map_functions, f, -1)
        return out
