"""FunctionTable.build (bbmap/aggregate/functions.py) gives the very same table as before
its dict work was moved into C-level ``dict``/``zip`` calls (issue 17, session 4).

``_reference`` below is ``build``'s symbol part as it was: a ``setdefault`` loop for each
key's first symbol, and the part-before-parent display fix run over every name (the
block-map part, ``FunctionTable._attach_block_map``, did not change and is shared).
Both are compared field by field on random symbol tables (aliases, ``.cold``/``.__part.N``
parts before and after their parents, repeated names, demangled names that differ or not,
zero-size symbols) and on every corpus binary with demangling on and off.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import all_corpus_binaries
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.aggregate.functions import FunctionTable, _first_of_pair, _symbol_ends
from bbmap.binary.types import FunctionSymbols, parent_name
from bbmap.model import BlockMap, BlockMapBuilder


def _reference(cls, symbols: FunctionSymbols | None, block_map: BlockMap,
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
        alias = _first_of_pair(symbols.address, symbols.size).tolist()
        raw = [parent_name(n) if "." in n else n for n in names]
        # one key per parent name, in address order (symbols are sorted by address, so
        # the first symbol of a key holds its lowest address)
        first_of: dict[str, int] = {}
        for i, a in enumerate(alias):
            if a == i:
                first_of.setdefault(raw[i], i)
        index = {r: k for k, r in enumerate(first_of)}
        t.raw_names = list(first_of)
        t.address = [addrs[i] for i in first_of.values()]
        t.names = [display[i] if r == names[i] else r for r, i in first_of.items()]
        display_of = {n: d for n, d in zip(names, display) if n in index}
        for r, k in index.items():  # a part seen before its parent: show the parent
            if r in display_of:
                t.names[k] = display_of[r]
        key_of_symbol[:] = [index[raw[alias[i]]] for i in range(nsym)]
        t.sym_address = symbols.address.astype(np.uint64)
        t.sym_end = _symbol_ends(t.sym_address, symbols.size.astype(np.uint64),
                                 symbols.section, sections)
    t.key_of_symbol = key_of_symbol
    t._attach_block_map(block_map, index)  # (unchanged by the rewrite: shared)
    return t


FIELDS = ("names", "raw_names", "address", "key_of_symbol", "key_of_bmfunc", "_bm_order",
          "_bm_ptr", "sym_address", "sym_end")


def _same(symbols: FunctionSymbols | None, bm: BlockMap, **kw) -> None:  # noqa: ANN003
    got = FunctionTable.build(symbols, bm, **kw)
    want = _reference(FunctionTable, symbols, bm, **kw)
    for f in FIELDS:
        a, b = getattr(got, f), getattr(want, f)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), f
        else:
            assert a == b, f


NAMES = st.sampled_from(["main", "f", "g", "_Z1fv", "_Z1gi", "f.cold", "g.cold",
                         "f.__part.1", "h.__part.2", "h", "main.cold", "k.llvm.123",
                         "_Z1fv.cold", "_Z1gi.__part.1"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAMES, st.integers(0, 40), st.integers(0, 3)), max_size=30),
       st.booleans(), st.booleans())
@pytest.mark.slow
def test_same_table_as_before(rows, demangle, fancy) -> None:  # noqa: ANN001
    rows = sorted(rows, key=lambda r: r[1])  # by address, as the loader sorts them
    names = [n for n, _, _ in rows]
    fs = FunctionSymbols(address=np.array([a * 16 for _, a, _ in rows], np.uint64),
                         size=np.array([s * 8 for _, _, s in rows], np.uint64),
                         section=np.ones(len(rows), np.int32), names=names,
                         display=[("D:" + n if fancy and n.startswith("_Z") else n)
                                  for n in names], is_func=np.ones(len(rows), bool))
    _same(fs, BlockMapBuilder().build(), demangle=demangle)


@pytest.mark.parametrize("binary", all_corpus_binaries())
def test_same_table_on_the_corpus(binary) -> None:  # noqa: ANN001
    from bbmap.binary import load_binary
    from bbmap.errors import BBMapError

    for demangle in (True, False):
        try:
            b = load_binary(binary, demangle=demangle)
            bm = b.block_map
        except BBMapError as e:
            pytest.skip(str(e))
        _same(b.symbols, bm, demangle=demangle, sections=b.sections)
