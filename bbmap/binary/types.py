"""Plain types the binary layer hands to translation, indexing and verification."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

# (PF_* and PT_LOAD are re-exported: tests import them from here)
from bbmap.formats.elf import (  # noqa: F401
    PF_R,
    PF_W,
    PF_X,
    PT_LOAD,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHT_NOBITS,
)

# a part of a function split by basic-block sections (``foo.cold``, ``foo.__part.3``)
PART_SUFFIX = re.compile(r"\.(?:cold|__part\.\d+|eh)$")


@dataclass(frozen=True)
class Segment:
    """One program header, as seed 000 names its fields."""

    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_filesz: int
    p_memsz: int
    p_align: int

    @property
    def is_load(self) -> bool:
        return self.p_type == PT_LOAD

    @property
    def is_exec(self) -> bool:
        return self.p_type == PT_LOAD and bool(self.p_flags & PF_X)


@dataclass(frozen=True)
class SectionInfo:
    index: int
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int = 0

    @property
    def is_exec(self) -> bool:
        return bool(self.sh_flags & SHF_EXECINSTR) and bool(self.sh_flags & SHF_ALLOC)

    @property
    def has_contents(self) -> bool:
        """Whether the section's bytes are in the file (every type but ``SHT_NOBITS``)."""
        return self.sh_type != SHT_NOBITS

    @property
    def is_code(self) -> bool:
        """Executable, with its instructions in the file: what a disassembler may read."""
        return self.is_exec and self.has_contents


def parent_name(name: str) -> str:
    """``foo.cold`` / ``foo.__part.3`` / ``foo.eh`` belong to ``foo`` (basic-block sections)."""
    return PART_SUFFIX.sub("", name)


@dataclass
class FunctionSymbols:
    """Sized code symbols sorted by address (columnar), deduplicated by (address, name).

    ``address``/``size`` are ELF vaddrs (section-relative offsets in ET_REL files, with
    ``section`` giving the section index).  ``names`` are raw (mangled) names;
    ``display`` are demangled when the loader was asked to.
    """

    address: np.ndarray = field(default_factory=lambda: np.zeros(0, "u8"))
    size: np.ndarray = field(default_factory=lambda: np.zeros(0, "u8"))
    section: np.ndarray = field(default_factory=lambda: np.zeros(0, "i4"))
    names: list[str] = field(default_factory=list)
    display: list[str] = field(default_factory=list)
    is_func: np.ndarray = field(default_factory=lambda: np.zeros(0, "?"))  # STT_FUNC vs part/other

    def __len__(self) -> int:
        return len(self.address)
