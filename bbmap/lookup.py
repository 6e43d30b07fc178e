"""Library behind ``bbmap lookup``: one address at a time, in all three spaces, explained.

Addresses come as ELF vaddrs (default), ELF file offsets (``offset``), or runtime VMAs
(``vma``) resolved through a profile's mappings (``perf_data``, optional ``pid`` and
``name``) or a given base address.  Each is translated with seed 000's formulas and
run through the three-stage index; the report names the function, the range, the
block and its bounds, and every conversion, or says which stage found nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bbmap.binary.go import go_identity_line, no_block_map_reason
from bbmap.errors import UsageError
from bbmap.index import STATUS_NAMES, BlockIndex, range_function
from bbmap.mappings import ProfileMappings
from bbmap.translate import (
    offset_to_vaddr,
    segment_for_vaddr,
    vaddr_to_offset,
    vaddr_to_vma,
    vma_to_vaddr,
)

SPACES = ("vaddr", "offset", "vma")


@dataclass
class AddressReport:
    input: str
    space: str
    vaddr: int | None = None
    offset: int | None = None
    vma: int | None = None
    base: int | None = None
    pid: int | None = None
    function: str | None = None
    symbol: str | None = None  # the ELF symbol holding the address (e.g. ``foo.cold``)
    func: int = -1
    range: int = -1
    range_ordinal: int | None = None
    ranges_in_function: int | None = None
    block: int = -1
    block_id: int | None = None
    block_start: int | None = None
    block_end: int | None = None
    status: str = "outside-function"
    note: str = ""
    build_id: str | None = None  # the binary's GNU build-id
    go_build_id: str | None = None  # its Go build id (a Go binary)
    explain: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The report as the text says it: ``block`` is the block's ID (llvm-readobj's
        ``ID``), ``range`` its range's place in the function; the positions in bbmap's
        arrays are the ``*_index`` fields."""
        d: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if k == "func":
                d["function_index"] = v
            elif k == "range":
                d.update(range=self.range_ordinal, range_index=v)
            elif k == "block":
                d.update(block=self.block_id, block_index=v)
            elif k != "explain" or self.explain:
                d[k] = v
        return d


def parse_address(text: str) -> int:
    """An address is hexadecimal, with or without ``0x``: ``401210`` is what ``perf
    script``, ``addr2line``, ``nm`` and ``readelf`` print (and what llvm-symbolizer
    reads), so it is 0x401210, never decimal 401210."""
    t = text.strip().lower()
    digits = t[2:] if t.startswith("0x") else t
    try:
        if not digits or digits.startswith(("+", "-", "_")) or "_" in digits:
            raise ValueError(t)
        v = int(digits, 16)
    except ValueError:
        raise UsageError(f"not an address: {text!r} (hexadecimal, as perf script prints "
                         "it: 401210 or 0x401210)") from None
    if not 0 <= v < 1 << 64:
        raise UsageError(f"address out of range: {text!r}")
    return v


class Lookuper:
    """Holds one binary's index (and optionally a profile's mappings) for many lookups."""

    def __init__(self, binary: Any, *, mappings: ProfileMappings | None = None,
                 base: int | None = None) -> None:
        binary.refuse_relocatable()
        self.binary = binary
        self.index = BlockIndex(binary.block_map, binary.symbols, binary.sections)
        self.mappings = mappings
        self.base = base
        self.caveat = ""
        self.go = getattr(binary, "go", None)
        if binary.block_map.num_functions == 0 and self.go is not None:
            self.caveat = f"no block map: {no_block_map_reason(self.go)}"
            if getattr(binary, "symbols_source", None) == ".gopclntab":
                self.caveat += "; function from .gopclntab (the binary is stripped)"
        elif binary.block_map.num_functions == 0:
            self.caveat = ("the binary has no block map (.llvm_bb_addr_map)" if len(binary.symbols)
                           else "the binary has no block map and no function symbols (stripped?)")

    def lookup(self, text: str, space: str = "vaddr", *, pid: int | None = None,
               to: bool = False, explain: bool = False) -> AddressReport:
        if space not in SPACES:
            raise UsageError(f"unknown address space {space!r} (one of {', '.join(SPACES)})")
        a = parse_address(text)
        segs = self.binary.segments
        rep = AddressReport(input=text, space=space, build_id=self.binary.build_id,
                            go_build_id=self.go.build_id if self.go else None)
        if space == "vaddr":
            rep.vaddr = a
        elif space == "offset":
            rep.offset = a
            rep.vaddr = offset_to_vaddr(a, segs)
            if rep.vaddr is None:
                rep.note = "file offset lies in no PT_LOAD segment"
                return rep
        else:
            rep.vma = a
            base, used_pid, note = self._base_for_vma(a, pid)
            rep.base, rep.pid = base, used_pid
            if base is None:
                rep.note = note
                return rep
            rep.vaddr = vma_to_vaddr(a, base)
            rep.note = note
        if rep.offset is None:
            rep.offset = vaddr_to_offset(rep.vaddr, segs)
            if rep.offset is None and segment_for_vaddr(rep.vaddr, segs) is None:
                rep.note = "; ".join(filter(None, [rep.note, "vaddr lies in no PT_LOAD "
                                                   "segment: not an address of this binary"]))
        if rep.vma is None:
            base, rep.pid = self._known_base(pid)
            if base is not None:
                rep.base = base
                rep.vma = vaddr_to_vma(rep.vaddr, base)
        rep.symbol = self._symbol_at(rep.vaddr)
        f, r, b, s = self.index.lookup_one(rep.vaddr, to=to)
        rep.status = STATUS_NAMES[s]
        bm = self.binary.block_map
        if f >= 0:
            rep.func = f
            rep.function = self.index.func_display[f]
        if r >= 0:
            fm = range_function(bm, r)
            r0 = int(bm.func_range_ptr[fm])
            rep.range, rep.range_ordinal = r, r - r0
            rep.ranges_in_function = int(bm.func_range_ptr[fm + 1]) - r0
        if b >= 0:
            rep.block = b
            rep.block_id = int(bm.block_id[b])
            rep.block_start = int(bm.block_address(b))
            rep.block_end = rep.block_start + int(bm.block_size[b])
        if explain:
            rep.explain = self.index.explain(rep.vaddr, to=to)
        if self.caveat:
            rep.note = f"{rep.note}; {self.caveat}" if rep.note else self.caveat
        return rep

    def identity(self) -> str | None:
        """The binary's two build ids, for a Go binary (None otherwise)."""
        return go_identity_line(self.go, self.binary.build_id) if self.go else None

    def _symbol_at(self, vaddr: int) -> str | None:
        """The sized symbol holding ``vaddr`` (a few aliases/nestings back at most)."""
        sy = self.binary.symbols
        k = int(np.searchsorted(sy.address, np.uint64(vaddr), side="right")) - 1
        names = sy.display or sy.names
        for j in range(k, max(k - 4, -1), -1):
            if int(sy.address[j]) <= vaddr < int(sy.address[j]) + int(sy.size[j]):
                return names[j]
        return None

    def _known_base(self, pid: int | None) -> tuple[int | None, int | None]:
        """The load base when it is unambiguous (given, or one base in the profile)."""
        if self.base is not None:
            return self.base, pid
        if self.mappings is None:
            return None, pid
        ms = [m for m in self.mappings.binary_mappings(pid) if m.base is not None]
        bases = {m.base for m in ms}
        pids = {m.pid for m in ms}
        return (bases.pop(), pids.pop() if len(pids) == 1 else pid) if len(bases) == 1 \
            else (None, pid)

    def _base_for_vma(self, vma: int, pid: int | None) -> tuple[int | None, int | None, str]:
        if self.base is not None:
            return self.base, pid, ""
        if self.mappings is None:
            raise UsageError("--vma needs --perf-data FILE (or --base ADDR) to know where the "
                             "binary was loaded")
        cands = self.mappings.binary_mappings(pid)
        hits = [m for m in cands if m.start <= vma < m.stop]
        if not hits:
            if not cands:
                return None, pid, self.mappings.evidence.explain()
            where = ", ".join(f"pid {m.pid} [{m.start:#x}, {m.stop:#x})" for m in cands[:4])
            return None, pid, f"no mapping of the binary covers it (mappings: {where})"
        m = hits[-1]  # the newest generation
        bases = {h.base for h in hits}
        note = "" if len(bases) == 1 else (
            f"{len(bases)} different load addresses cover it; used pid {m.pid}'s latest")
        if m.base is None:
            return None, m.pid, f"mapping at {m.start:#x} shows no PT_LOAD of the binary"
        return m.base, m.pid, note


def format_report(rep: AddressReport) -> str:
    """One line per address (plus indented stage lines when explained)."""
    def h(v: int | None) -> str:
        return "-" if v is None else f"{v:#x}"

    parts = [rep.input]
    if rep.space == "vma" or rep.vma is not None:
        parts.append(f"vma={h(rep.vma)}")
    parts += [f"vaddr={h(rep.vaddr)}", f"offset={h(rep.offset)}"]
    if rep.pid is not None:
        parts.append(f"pid={rep.pid}")
    parts.append(rep.function or "-")
    if rep.symbol and rep.symbol != rep.function:
        parts.append(f"<{rep.symbol}>")
    if rep.range >= 0:
        parts.append(f"range {rep.range_ordinal}/{rep.ranges_in_function}")
    if rep.block >= 0:
        parts.append(f"block {rep.block_id} [{h(rep.block_start)}, {h(rep.block_end)})")
    parts.append(rep.status)
    line = "  ".join(parts)
    if rep.note:
        line += f"  ({rep.note})"
    if rep.explain:
        for stage in ("stage1", "stage2", "stage3"):
            if stage in rep.explain:
                st = rep.explain[stage]
                kv = ", ".join(f"{k}={_fmt(k, v)}" for k, v in st.items())
                line += f"\n    {stage}: {kv}"
    return line


_HEX_KEYS = {"start", "end", "base", "offset_in_range", "vaddr"}


def _fmt(k: str, v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and k in _HEX_KEYS:
        return f"{v:#x}"
    return str(v)
