"""The functions a report is keyed by: symbols with their `.cold`/`.__part.N` parts folded.

Samples are attributed to functions by symbol (the way ``perf report`` does, so the
per-function counts can be compared with it); block-map functions are tied to the same
keys through the symbol at their entry address, so a function's blocks and its sample
count land under one name.  Aliases (several symbols at one address and size) share
one key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bbmap.binary.types import FunctionSymbols, parent_name
from bbmap.model import BlockMap


@dataclass
class FunctionTable:
    names: list[str] = field(default_factory=list)  # display name per key
    raw_names: list[str] = field(default_factory=list)  # parent raw (mangled) name per key
    address: list[int] = field(default_factory=list)  # lowest address of the parent
    key_of_symbol: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    key_of_bmfunc: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    _bm_order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _bm_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    sym_address: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    sym_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @property
    def num_keys(self) -> int:
        return len(self.names)

    @classmethod
    def build(cls, symbols: FunctionSymbols | None, block_map: BlockMap,
              *, demangle: bool = True, sections: list | None = None) -> FunctionTable:
        """``sections`` (``Binary.sections``) bounds zero-size symbols to their section,
        so ``_init`` does not swallow the PLT that follows it.  One pass of list
        comprehensions and dict lookups per symbol; no per-sample work."""
        t = cls()
        nsym = len(symbols) if symbols is not None else 0
        key_of_symbol = np.full(nsym, -1, np.int32)
        index: dict[str, int] = {}
        if nsym:
            names = symbols.names
            display = symbols.display if (demangle and len(symbols.display) == nsym) else names
            addrs = symbols.address.tolist()
            alias_a = _first_of_pair(symbols.address, symbols.size)
            raw = [parent_name(n) if "." in n else n for n in names]
            # one key per parent name, in address order (symbols are sorted by address, so
            # the first symbol of a key holds its lowest address): the first symbol of each
            # raw name among those that are not an alias of an earlier one
            heads = np.flatnonzero(alias_a == np.arange(nsym)).tolist()
            alias = alias_a.tolist()
            rs = raw if len(heads) == nsym else [raw[i] for i in heads]
            order = dict.fromkeys(rs)  # the names, first seen first
            if len(order) == len(rs):
                first_of = dict(zip(rs, heads))
            else:
                first = dict(zip(reversed(rs), reversed(heads)))  # the first one wins
                first_of = {r: first[r] for r in order}
            index = dict(zip(first_of, range(len(first_of))))
            t.raw_names = list(first_of)
            t.address = [addrs[i] for i in first_of.values()]
            t.names = [display[i] if r == names[i] else r for r, i in first_of.items()]
            if display is not names and display != names:
                # a part seen before its parent: show the parent (as the last symbol of
                # that name displays it); with display == names nothing changes
                display_of = {n: d for n, d in zip(names, display) if n in index}
                for r, k in index.items():
                    if r in display_of:
                        t.names[k] = display_of[r]
            key_of_symbol[:] = [index[raw[a]] for a in alias]
            t.sym_address = symbols.address.astype(np.uint64)
            t.sym_end = _symbol_ends(t.sym_address, symbols.size.astype(np.uint64),
                                     symbols.section, sections)
        t.key_of_symbol = key_of_symbol
        t._attach_block_map(block_map, index)
        return t

    def _attach_block_map(self, block_map: BlockMap, index: dict[str, int]) -> None:
        """Each block-map function's key (``key_of_bmfunc``, and the CSR order of
        :meth:`bmfunc_csr`), once the symbols' keys are made: by the symbol at its
        address, else (a map-only function of a stripped binary) by its map name or
        ``fn@ADDR``, a new key when no symbol had that name (``index`` grows)."""
        nf = block_map.num_functions
        key_of_bmfunc = np.full(nf, -1, np.int32)
        if nf:
            sym = self.symbol_at(block_map.func_address.astype(np.uint64))
            has = sym >= 0
            key_of_bmfunc[has] = self.key_of_symbol[sym[has]]
            for f in np.flatnonzero(~has).tolist():  # map-only functions (stripped binary)
                nm = block_map.func_name[f] if f < len(block_map.func_name) else None
                addr = int(block_map.func_address[f])
                r = parent_name(nm) if nm else f"fn@{addr:#x}"
                k = index.get(r)
                if k is None:
                    k = index[r] = len(self.names)
                    self.names.append(r)
                    self.raw_names.append(r)
                    self.address.append(addr)
                key_of_bmfunc[f] = k
        self.key_of_bmfunc = key_of_bmfunc
        order = np.argsort(key_of_bmfunc, kind="stable")
        self._bm_order = order
        self._bm_ptr = np.searchsorted(key_of_bmfunc[order], np.arange(len(self.names) + 1))

    def bmfunc_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """``bmfuncs`` of every key at once: block-map functions ``order[ptr[k]:ptr[k+1]]``
        of key ``k`` (map order); keys added after the table was built have none."""
        ptr = self._bm_ptr
        if len(ptr) < self.num_keys + 1:
            ptr = np.concatenate([ptr, np.full(self.num_keys + 1 - len(ptr), ptr[-1])])
        return self._bm_order, ptr

    @property
    def bmfuncs(self) -> _BmFuncs:
        """Block-map functions of each key (``bmfuncs[k]`` is a list, usually of one)."""
        return _BmFuncs(self)

    def symbol_at(self, vaddr: np.ndarray) -> np.ndarray:
        """Index of the sized symbol containing each address, or -1 (vectorized)."""
        if not len(self.sym_address):
            return np.full(len(vaddr), -1, np.int64)
        i = np.searchsorted(self.sym_address, vaddr, side="right") - 1
        ok = i >= 0
        ic = np.clip(i, 0, None)
        ok &= vaddr < self.sym_end[ic]
        return np.where(ok, i, -1)

    def key_at(self, vaddr: np.ndarray, bmfunc: np.ndarray) -> np.ndarray:
        """Function key per address: its symbol's parent, else its block-map function."""
        s = self.symbol_at(vaddr)
        k = np.full(len(vaddr), -1, np.int32)
        has = s >= 0
        if has.any():
            k[has] = self.key_of_symbol[s[has]]
        fb = ~has & (bmfunc >= 0)
        if fb.any():
            k[fb] = self.key_of_bmfunc[bmfunc[fb]]
        return k


def _first_of_pair(addr: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per symbol, the index of the first symbol with the same (address, size): aliases
    share one key.  Vectorized (a dict of 20,000 tuples cost ~17 ms)."""
    n = len(addr)
    pos = np.arange(n)
    order = np.lexsort((pos, size, addr))
    new = np.ones(n, bool)
    oa, osz = addr[order], size[order]
    new[1:] = (oa[1:] != oa[:-1]) | (osz[1:] != osz[:-1])
    out = np.empty(n, np.int64)
    out[order] = order[np.flatnonzero(new)][np.cumsum(new) - 1]
    return out


def _symbol_ends(addr: np.ndarray, size: np.ndarray, section: np.ndarray | None = None,
                 sections: list | None = None) -> np.ndarray:
    """End of each symbol; a zero-size one runs to the next symbol (as perf fixes it up),
    but not past the end of its section when the sections are known."""
    end = addr + size
    zero = size == 0
    if zero.any():
        u = np.unique(addr)
        k = np.searchsorted(u, addr[zero], side="right")
        nxt = np.where(k < len(u), u[np.minimum(k, len(u) - 1)], addr[zero])
        if sections and section is not None and len(section) == len(addr):
            bound = {s.index: s.sh_addr + s.sh_size for s in sections}
            sec_end = np.array([bound.get(int(i), 1 << 63) for i in section[zero]], np.uint64)
            nxt = np.minimum(nxt, np.maximum(sec_end, addr[zero]))
        end[zero] = nxt
    return end


class _BmFuncs:
    def __init__(self, t: FunctionTable) -> None:
        self._t = t

    def __getitem__(self, k: int) -> list[int]:
        t = self._t
        if k + 1 >= len(t._bm_ptr):
            return []
        return t._bm_order[t._bm_ptr[k]:t._bm_ptr[k + 1]].tolist()
