"""What a map decoder needs to know about one section, and how it reports trouble.

Both decoders (construct reference and fast path) take a :class:`MapInput` and
return ``(BlockMap, list[Diagnostic])``; the hypothesis tests compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bbmap.errors import Diagnostic
from bbmap.formats.bbaddrmap import FEATURE_MIN_VERSION, KNOWN_METADATA, VERSION_BLOCK_IDS
from bbmap.model import MapSource

if TYPE_CHECKING:
    from bbmap.binary.symbols import SymbolTable

KIND_V0 = "v0"  # SHT_LLVM_BB_ADDR_MAP_V0
KIND_VERSIONED = "versioned"  # SHT_LLVM_BB_ADDR_MAP
KIND_BB_INFO = "bb_info"  # the 2020 proposal
KIND_LABELS = "labels"  # LLVM 11 label symbols: the map is in ``symtab``, ``data`` is empty


class NoRelocations:
    """Linked images: address fields hold final addresses; the text section is unknown."""

    def resolve(self, offset: int, raw: int) -> tuple[int, int]:
        return raw, -1

    def resolve_many(self, offsets: np.ndarray, raws: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, int | None]:
        """Vectorized :meth:`resolve`: values, sections, index of the first failure."""
        return raws.astype("u8"), np.full(len(raws), -1, dtype="i4"), None


@dataclass
class MapInput:
    data: bytes
    kind: str
    address_size: int = 8
    little: bool = True
    relocs: object = field(default_factory=NoRelocations)
    file: str | None = None
    label: str = "section"  # e.g. "section [29] .llvm_bb_addr_map"
    source: MapSource | None = None
    symtab: SymbolTable | None = None  # KIND_LABELS: the symbol table holding the labels
    relocatable: bool = False  # an ET_REL file: addresses are section offsets

    def where(self) -> dict:
        return {"file": self.file, "section": self.label}


class Notes:
    """Liberal-decoding warnings, one per kind per section (count + first offset)."""

    def __init__(self, inp: MapInput) -> None:
        self.inp = inp
        self.first: dict[str, int] = {}
        self.count: dict[str, int] = {}

    def note(self, what: str, offset: int) -> None:
        if what not in self.first:
            self.first[what] = offset
        self.count[what] = self.count.get(what, 0) + 1

    def diagnostics(self) -> list[Diagnostic]:
        out = []
        for what, off in self.first.items():
            n = self.count[what]
            msg = what if n == 1 else f"{what} ({n} function records; first shown)"
            out.append(Diagnostic(msg, self.inp.file, self.inp.label, off, "warning"))
        return out


def check_record(notes: Notes, offset: int, version: int, feature: int, md_or: int) -> None:
    """Warn where LLVM 22 would refuse what older readers (and we) decode."""
    if version == 1 and feature:
        notes.note(f"version 1 feature byte {feature:#x} ignored (as LLVM 15/16 readers did)",
                   offset)
    if version >= VERSION_BLOCK_IDS:
        for bit, need in FEATURE_MIN_VERSION.items():
            if feature & bit and version < need:
                notes.note(f"feature bit {bit:#x} needs version >= {need} "
                           f"(version = {version}); decoded anyway", offset)
    if md_or & ~KNOWN_METADATA:
        notes.note(f"unknown BBEntry::Metadata bits {md_or & ~KNOWN_METADATA:#x} kept "
                   "(LLVM 19+ refuses them)", offset)
