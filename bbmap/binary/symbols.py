"""Symbol tables read columnar, and the naming of map functions.

pyelftools parses one symbol at a time (construct, ~10 us each); a clang binary has
hundreds of thousands, so ``.symtab``/``.dynsym`` are read as one numpy record array
and only the names we keep are cut out of the string table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.binary.types import PART_SUFFIX, FunctionSymbols, parent_name
from bbmap.formats.elf import (
    SHN_LORESERVE,
    SHN_UNDEF,
    ST_BIND_SHIFT,
    ST_TYPE_MASK,
    STB_GLOBAL,
    STB_WEAK,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    elf_dtype,
)


@dataclass
class SymbolTable:
    """All entries of one symbol table (columns), names decoded on demand."""

    value: np.ndarray
    size: np.ndarray
    info: np.ndarray
    shndx: np.ndarray
    name_off: np.ndarray
    strtab: bytes
    section_name: str

    def __len__(self) -> int:
        return len(self.value)

    @property
    def stype(self) -> np.ndarray:
        return self.info & ST_TYPE_MASK

    @property
    def bind(self) -> np.ndarray:
        return self.info >> ST_BIND_SHIFT

    def names_at(self, indices: np.ndarray) -> list[str]:
        """Names of many entries at once (NUL positions found with numpy)."""
        if not len(indices):
            return []
        st = self.strtab
        nuls = np.flatnonzero(np.frombuffer(st, np.uint8) == 0)
        starts = self.name_off[indices]
        ends = nuls[np.minimum(np.searchsorted(nuls, starts), len(nuls) - 1)] \
            if len(nuls) else np.full(len(starts), len(st))
        ends = np.where(ends >= starts, ends, len(st))
        if st.isascii():  # byte offsets are character offsets: slice one decoded str
            text = st.decode("ascii")
            return [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
        return [st[a:b].decode("utf-8", "replace")
                for a, b in zip(starts.tolist(), ends.tolist())]

    def name(self, i: int) -> str:
        off = int(self.name_off[i])
        end = self.strtab.find(b"\0", off)
        raw = self.strtab[off:end if end >= 0 else len(self.strtab)]
        return raw.decode("utf-8", "replace")


def symbol_array(data: bytes, *, is64: bool, little: bool) -> np.ndarray:
    """A symbol table's entries (pyelftools' Elf_Sym) as one structured array, read in
    place: a clang-sized table has hundreds of thousands of entries."""
    dt = elf_dtype("Elf_Sym", 64 if is64 else 32, little)
    return np.frombuffer(data[: len(data) - len(data) % dt.itemsize], dtype=dt)


def read_symtab(data: bytes, strtab: bytes, *, is64: bool, little: bool,
                section_name: str) -> SymbolTable:
    arr = symbol_array(data, is64=is64, little=little)
    return SymbolTable(value=arr["st_value"].astype("u8"), size=arr["st_size"].astype("u8"),
                       info=arr["st_info"].copy(), shndx=arr["st_shndx"].astype("i4"),
                       name_off=arr["st_name"].astype("i8"), strtab=strtab,
                       section_name=section_name)


def demangle(name: str) -> str:
    import cxxfilt

    if not name.startswith("_Z"):
        return name
    try:
        return cxxfilt.demangle(name)
    except Exception:  # noqa: BLE001 - cxxfilt raises its own types on odd names
        return name


def function_symbols(tables: list[SymbolTable], *, demangle_names: bool = True
                     ) -> FunctionSymbols:
    """Sized code symbols (STT_FUNC/IFUNC and ``.cold``/``.__part.N`` parts), by address.

    Deduplicated by (address, name), the first occurrence (table order, then entry order)
    giving size, section and kind; sorted by (address, name).  Columnar: names are cut
    from each string table at once and only symbols sharing an address are compared by
    name, because a per-symbol decode and a sort of (address, name) tuples cost ~70 ms on
    a 20,000-function binary.
    """
    addr: list[np.ndarray] = []
    size: list[np.ndarray] = []
    sect: list[np.ndarray] = []
    kind: list[np.ndarray] = []
    names: list[str] = []
    for t in tables:
        st = t.stype
        defined = (t.shndx != SHN_UNDEF) & (t.shndx < SHN_LORESERVE)
        funcs = defined & ((st == STT_FUNC) | (st == STT_GNU_IFUNC))
        maybe_part = defined & (st == STT_NOTYPE) & (t.size > 0)
        idx = np.flatnonzero(funcs | maybe_part)
        got = t.names_at(idx)
        keep = funcs[idx]
        for j in np.flatnonzero(~keep).tolist():  # untyped: only part symbols count
            keep[j] = PART_SUFFIX.search(got[j]) is not None
        idx = idx[keep]
        names += got if keep.all() else [n for n, k in zip(got, keep.tolist()) if k]
        addr.append(t.value[idx].astype("u8"))
        size.append(t.size[idx].astype("u8"))
        sect.append(t.shndx[idx].astype("i4"))
        kind.append(funcs[idx])
    a = np.concatenate(addr) if addr else np.zeros(0, "u8")
    order = _by_address_then_name(a, names)
    fs = FunctionSymbols(
        address=a[order],
        size=(np.concatenate(size) if size else np.zeros(0, "u8"))[order],
        section=(np.concatenate(sect) if sect else np.zeros(0, "i4"))[order],
        names=[names[i] for i in order.tolist()],
        is_func=(np.concatenate(kind) if kind else np.zeros(0, "?"))[order].astype("?"))
    fs.display = ([demangle(n) if n.startswith("_Z") else n for n in fs.names]
                  if demangle_names else list(fs.names))
    return fs


def _by_address_then_name(addr: np.ndarray, names: list[str]) -> np.ndarray:
    """Indices of the first occurrence of each distinct (address, name), in that order.

    Names are ranked (Python string order) only among entries sharing an address with a
    *different* name -- aliases, the rare case.  Most shared addresses are one symbol in
    both ``.symtab`` and ``.dynsym`` (every exported function of a shared library: 102k
    of them in the dump bench's binary), whose equal names need no rank; comparing them
    as one numpy string column instead of sorting every shared name saved ~50 ms there.
    """
    n = len(addr)
    pos = np.arange(n)
    by_addr = np.argsort(addr, kind="stable")
    sa = addr[by_addr]
    same = sa[1:] == sa[:-1]
    rank = np.zeros(n, np.int64)
    if same.any():
        shared = np.zeros(n, bool)
        shared[1:] |= same
        shared[:-1] |= same
        members = by_addr[shared]
        text = np.array([names[i] for i in members.tolist()])  # numpy "U": code point order
        ma = addr[members]
        group_start = np.r_[True, ma[1:] != ma[:-1]]
        differs = np.r_[False, ~group_start[1:] & (text[1:] != text[:-1])]
        group = np.cumsum(group_start) - 1
        mixed = np.zeros(int(group[-1]) + 1, bool)
        mixed[group[differs]] = True  # an address carrying two names or more
        sel = mixed[group]
        if sel.any():
            _, inv = np.unique(text[sel], return_inverse=True)  # ranks among them
            rank[members[sel]] = inv.reshape(-1)
    order = np.lexsort((pos, rank, addr))
    first = np.ones(n, bool)
    oa, orank = addr[order], rank[order]
    first[1:] = (oa[1:] != oa[:-1]) | (orank[1:] != orank[:-1])
    return order[first]


def name_functions(addresses: np.ndarray, sections: np.ndarray, table: SymbolTable | None,
                   *, relocatable: bool) -> list[str | None]:
    """The symbol naming each map function, as llvm-readobj chooses it.

    Candidates are STT_FUNC/IFUNC symbols whose value equals the function address (in
    a ``.o`` also in the same section); globals win over locals, then table order.
    """
    out: list[str | None] = [None] * len(addresses)
    if table is None or not len(addresses):
        return out
    st = table.stype
    cand = np.nonzero(((st == STT_FUNC) | (st == STT_GNU_IFUNC))
                      & (table.shndx != SHN_UNDEF))[0]
    if not len(cand):
        return out
    bind = table.bind[cand]
    rank = np.where((bind == STB_GLOBAL) | (bind == STB_WEAK), 0, 1)
    order = np.lexsort((cand, rank, table.value[cand]))  # by value, then global, then index
    cand = cand[order]
    vals = table.value[cand]
    lo = np.searchsorted(vals, addresses, side="left")
    hi = np.searchsorted(vals, addresses, side="right")
    hit = hi > lo
    if relocatable:  # the candidate must also lie in the function's section
        first: dict[tuple[int, int], int] = {}
        for i, v, sh in zip(cand.tolist(), vals.tolist(), table.shndx[cand].tolist()):
            first.setdefault((sh, v), i)
        keys = zip(np.asarray(sections).tolist(), np.asarray(addresses).tolist())
        chosen = [first.get(k, -1) for k in keys]
        picked = [f for f, i in enumerate(chosen) if i >= 0]
        for f, n in zip(picked, table.names_at(np.array([chosen[f] for f in picked],
                                                         dtype=np.int64))):
            out[f] = n
        return out
    # linked images: the first candidate (globals first, then table order) wins
    firsts = cand[lo[hit]]
    names = table.names_at(firsts)
    if len(names) == len(out):  # every function named (the usual case): no scatter
        return names
    for f, n in zip(np.flatnonzero(hit).tolist(), names):
        out[f] = n
    return out


__all__ = ["SymbolTable", "read_symtab", "function_symbols", "name_functions", "demangle",
           "parent_name"]
