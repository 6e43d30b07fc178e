"""LLVM 11 ``-fbasic-block-sections=labels``: the block map lives in the symbol table.

Every non-entry block N of ``foo`` gets a local symbol ``<N letters>.BB.foo``; the
count of letters is the block number and the first letter is block N's kind:
``a`` plain, ``r`` return, ``l`` landing pad, ``L`` landing pad that returns.  The
function symbol itself is block 0.  Sizes come from the symbol sizes, or the
distance to the next label (the function's end for the last).
"""

from __future__ import annotations

import re

import numpy as np

from bbmap.binary.mapinput import MapInput
from bbmap.errors import Diagnostic
from bbmap.formats.bbaddrmap import MD_HAS_RETURN, MD_IS_EH_PAD
from bbmap.formats.elf import SHN_LORESERVE, STT_FUNC, STT_GNU_IFUNC
from bbmap.model import (
    VERSION_LABEL_SYMBOLS,
    BlockMap,
    BlockMapBuilder,
    BlockRecord,
    FunctionRecord,
    RangeRecord,
)

LABEL = re.compile(r"^([arlL]+)\.BB\.(.+)$")
LETTER_MD = {"a": 0, "r": MD_HAS_RETURN, "l": MD_IS_EH_PAD, "L": MD_IS_EH_PAD | MD_HAS_RETURN}


def parse_label(name: str) -> tuple[int, int, str] | None:
    """``'ra.BB.foo'`` -> (block number 2, metadata, 'foo'); None if not a label."""
    m = LABEL.match(name)
    if not m:
        return None
    letters, func = m.groups()
    return len(letters), LETTER_MD[letters[0]], func


def has_labels(inp: MapInput) -> bool:
    """A cheap prefilter: names containing ``.BB.`` are found in the string table first."""
    return inp.symtab is not None and b".BB." in inp.symtab.strtab


def decode_labels(inp: MapInput) -> tuple[BlockMap, list[Diagnostic]]:
    """The block map of the label symbols of ``inp.symtab`` (a ``.symtab``), like the
    section decoders: ``(BlockMap, diagnostics)``; function names are filled."""
    t = inp.symtab
    diags: list[Diagnostic] = []
    builder = BlockMapBuilder([inp.source] if inp.source is not None else [])
    if not has_labels(inp):
        return builder.build(), diags
    labels: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    funcs: dict[tuple[str, int], tuple[int, int]] = {}
    st = t.stype
    for i in range(len(t)):
        shndx = int(t.shndx[i])
        if shndx == 0 or shndx >= SHN_LORESERVE:
            continue
        name = t.name(i)
        if st[i] in (STT_FUNC, STT_GNU_IFUNC):
            funcs.setdefault((name, shndx), (int(t.value[i]), int(t.size[i])))
            continue
        p = parse_label(name)
        if p is not None:
            n, md, fname = p
            labels.setdefault((fname, shndx), []).append(
                (int(t.value[i]), n, md, int(t.size[i])))
    names: list[str] = []
    for (fname, shndx), entries in sorted(labels.items(), key=lambda kv: min(kv[1])[0]):
        fn = funcs.get((fname, shndx))
        if fn is None:
            diags.append(Diagnostic(
                f"label symbols {entries[0][1] * 'a'}.BB.{fname}...: no function symbol "
                f"'{fname}' in section {shndx}; skipped", inp.file, inp.label))
            continue
        start, fsize = fn
        entries = sorted(set(entries))
        addrs = [start] + [e[0] for e in entries]
        ids = [0] + [e[1] for e in entries]
        mds = [0] + [e[2] for e in entries]
        sizes = [0] + [e[3] for e in entries]
        end = start + fsize if fsize else (max(addrs) + sizes[-1])
        blocks = []
        for k in range(len(addrs)):
            nxt = addrs[k + 1] if k + 1 < len(addrs) else max(end, addrs[k])
            size = sizes[k] if sizes[k] else nxt - addrs[k]
            blocks.append(BlockRecord(id=ids[k], offset=addrs[k] - start, size=size, md=mds[k]))
        section = shndx if inp.relocatable else -1
        builder.add(FunctionRecord(address=start, ranges=[RangeRecord(base=start,
                                                                      blocks=blocks,
                                                                      section=section)],
                                   version=VERSION_LABEL_SYMBOLS, name=fname))
        names.append(fname)
    m = builder.build()
    m.func_name = names
    m.func_map_offset = np.zeros(m.num_functions, "u8")
    return m, diags
