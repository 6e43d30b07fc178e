"""The block map every later layer builds on: functions -> ranges -> blocks.

Held columnar (numpy, CSR offsets) so that a map with millions of blocks costs a few
tens of bytes a block instead of a Python object each.  Decoders (the construct
reference and the fast path) both produce a :class:`BlockMap` through
:class:`BlockMapBuilder` or directly as arrays; equality of two maps is
:meth:`BlockMap.equals`, which the hypothesis tests use.

Invariants (checked by :meth:`BlockMap.validate_shape`):
  * ``func_range_ptr`` has F+1 entries, non-decreasing, from 0 to R;
  * ``range_block_ptr`` has R+1 entries, from 0 to B;
  * ``block_cs_ptr`` / ``block_succ_ptr`` have B+1 entries;
  * block offsets are absolute offsets inside their range (already accumulated,
    as llvm-readobj prints them), callsite offsets are relative to the block start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

# Where a function's map came from (``BlockMap.func_version`` for non-section sources).
VERSION_LABEL_SYMBOLS = -1  # LLVM 11 unary ``a.BB.foo`` symbols
VERSION_BB_INFO = -2  # the 2020 ``.bb_info`` proposal (seed 004)


@dataclass(frozen=True)
class MapSource:
    """One place block maps were read from: a map section, or the symbol table."""

    kind: str  # "section" | "label-symbols" | "bb_info"
    section_index: int  # -1 for symbol-derived maps
    section_name: str
    sh_type: int  # 0 for symbol-derived maps
    link: int  # sh_link: the text section the map describes (-1 if none)


def _u(dtype: str) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


def _ptr() -> np.ndarray:
    return np.zeros(1, dtype=np.int64)


@dataclass
class BlockMap:
    """Columnar functions -> ranges -> blocks, plus the PGO analysis map."""

    # ---- per function (F) ----
    func_address: np.ndarray = field(default_factory=lambda: _u("u8"))  # range-0 base
    func_version: np.ndarray = field(default_factory=lambda: _u("i2"))  # 0..5, or VERSION_*
    func_feature: np.ndarray = field(default_factory=lambda: _u("u2"))
    func_source: np.ndarray = field(default_factory=lambda: _u("i4"))  # index into sources
    func_map_offset: np.ndarray = field(default_factory=lambda: _u("u8"))  # record offset
    func_entry_count: np.ndarray = field(default_factory=lambda: _u("u8"))  # iff feature&1
    func_range_ptr: np.ndarray = field(default_factory=_ptr)  # F+1
    # ---- per range (R) ----
    range_base: np.ndarray = field(default_factory=lambda: _u("u8"))
    range_section: np.ndarray = field(default_factory=lambda: _u("i4"))  # text sec, -1 unknown
    range_num_blocks: np.ndarray = field(default_factory=lambda: _u("u4"))  # as declared
    range_block_ptr: np.ndarray = field(default_factory=_ptr)  # R+1
    # ---- per block (B) ----
    block_id: np.ndarray = field(default_factory=lambda: _u("u4"))
    block_offset: np.ndarray = field(default_factory=lambda: _u("u8"))  # abs, in range
    block_size: np.ndarray = field(default_factory=lambda: _u("u8"))
    block_md: np.ndarray = field(default_factory=lambda: _u("u1"))
    block_hash: np.ndarray = field(default_factory=lambda: _u("u8"))  # iff feature&0x40
    block_cs_ptr: np.ndarray = field(default_factory=_ptr)  # B+1
    callsite_offsets: np.ndarray = field(default_factory=lambda: _u("u4"))  # from block start
    # ---- PGO per block (iff feature bits 1 / 7) and successors (bit 2) ----
    block_freq: np.ndarray = field(default_factory=lambda: _u("u8"))
    block_postlink_freq: np.ndarray = field(default_factory=lambda: _u("u8"))
    block_succ_ptr: np.ndarray = field(default_factory=_ptr)  # B+1
    succ_id: np.ndarray = field(default_factory=lambda: _u("u4"))
    succ_prob: np.ndarray = field(default_factory=lambda: _u("u4"))  # numerator / 2**31
    succ_postlink: np.ndarray = field(default_factory=lambda: _u("u8"))
    # ---- provenance and names ----
    sources: list[MapSource] = field(default_factory=list)
    func_name: list[str | None] = field(default_factory=list)  # filled by the binary loader

    # ------------------------------------------------------------------ sizes
    @property
    def num_functions(self) -> int:
        return len(self.func_address)

    @property
    def num_ranges(self) -> int:
        return len(self.range_base)

    @property
    def num_blocks(self) -> int:
        return len(self.block_id)

    # ------------------------------------------------------------ navigation
    def function_ranges(self, f: int) -> range:
        return range(int(self.func_range_ptr[f]), int(self.func_range_ptr[f + 1]))

    def range_blocks(self, r: int) -> range:
        return range(int(self.range_block_ptr[r]), int(self.range_block_ptr[r + 1]))

    def function_blocks(self, f: int) -> range:
        r0, r1 = int(self.func_range_ptr[f]), int(self.func_range_ptr[f + 1])
        return range(int(self.range_block_ptr[r0]), int(self.range_block_ptr[r1]))

    def block_callsites(self, b: int) -> np.ndarray:
        return self.callsite_offsets[self.block_cs_ptr[b] : self.block_cs_ptr[b + 1]]

    def block_successors(self, b: int) -> Iterator[tuple[int, int, int]]:
        for s in range(int(self.block_succ_ptr[b]), int(self.block_succ_ptr[b + 1])):
            yield int(self.succ_id[s]), int(self.succ_prob[s]), int(self.succ_postlink[s])

    def block_address(self, b: np.ndarray | int) -> np.ndarray | int:
        """Absolute start address(es) of global block index(es)."""
        r = self.block_range(b)
        return self.range_base[r] + self.block_offset[b]

    def block_starts(self) -> np.ndarray:
        """Every block's absolute start address (u8, in block order): the one formula,
        range base plus the block's offset, for all blocks at once."""
        rng = np.repeat(np.arange(self.num_ranges, dtype=np.int64),
                        np.diff(self.range_block_ptr))
        return (self.range_base[rng] + self.block_offset).astype(np.uint64)

    def block_range(self, b: np.ndarray | int) -> np.ndarray | int:
        return np.searchsorted(self.range_block_ptr, b, side="right") - 1

    def block_function(self, b: np.ndarray | int) -> np.ndarray | int:
        return np.searchsorted(self.func_range_ptr, self.block_range(b), side="right") - 1

    # -------------------------------------------------------------- checking
    def validate_shape(self) -> None:
        """Raise AssertionError if the CSR columns are inconsistent (a bug, not bad input)."""
        F, R, B = self.num_functions, self.num_ranges, self.num_blocks
        for name in ("func_version", "func_feature", "func_source", "func_map_offset",
                     "func_entry_count"):
            assert len(getattr(self, name)) == F, name
        assert len(self.func_range_ptr) == F + 1 and self.func_range_ptr[-1] == R
        for name in ("range_section", "range_num_blocks"):
            assert len(getattr(self, name)) == R, name
        assert len(self.range_block_ptr) == R + 1 and self.range_block_ptr[-1] == B
        for name in ("block_offset", "block_size", "block_md", "block_hash", "block_freq",
                     "block_postlink_freq"):
            assert len(getattr(self, name)) == B, name
        assert len(self.block_cs_ptr) == B + 1
        assert self.block_cs_ptr[-1] == len(self.callsite_offsets)
        assert len(self.block_succ_ptr) == B + 1 and self.block_succ_ptr[-1] == len(self.succ_id)
        assert len(self.succ_prob) == len(self.succ_id) == len(self.succ_postlink)
        for ptr in (self.func_range_ptr, self.range_block_ptr, self.block_cs_ptr,
                    self.block_succ_ptr):
            assert ptr[0] == 0 and bool(np.all(np.diff(ptr) >= 0))

    ARRAY_FIELDS = (
        "func_address", "func_version", "func_feature", "func_source", "func_map_offset",
        "func_entry_count", "func_range_ptr", "range_base", "range_section",
        "range_num_blocks", "range_block_ptr", "block_id", "block_offset", "block_size",
        "block_md", "block_hash", "block_cs_ptr", "callsite_offsets", "block_freq",
        "block_postlink_freq", "block_succ_ptr", "succ_id", "succ_prob", "succ_postlink",
    )

    def equals(self, other: BlockMap, *, check_provenance: bool = True) -> bool:
        """Field-by-field equality (the hypothesis oracle for the fast decoder)."""
        return not self.differences(other, check_provenance=check_provenance)

    def differences(self, other: BlockMap, *, check_provenance: bool = True) -> list[str]:
        diffs = []
        for name in self.ARRAY_FIELDS:
            if not check_provenance and name in ("func_source", "func_map_offset"):
                continue
            a, b = getattr(self, name), getattr(other, name)
            if a.shape != b.shape or not np.array_equal(a.astype(np.uint64), b.astype(np.uint64)):
                diffs.append(name)
        if check_provenance and self.sources != other.sources:
            diffs.append("sources")
        return diffs

    def prefix(self, nf: int) -> BlockMap:
        """The first ``nf`` functions (with their ranges, blocks, callsites, successors)."""
        m = self
        out = BlockMap()
        nr = int(m.func_range_ptr[nf])
        nb = int(m.range_block_ptr[nr])
        ncs = int(m.block_cs_ptr[nb])
        ns = int(m.block_succ_ptr[nb])
        for name in BlockMap.ARRAY_FIELDS:
            a = getattr(m, name)
            if name == "func_range_ptr":
                setattr(out, name, a[:nf + 1])
            elif name == "range_block_ptr":
                setattr(out, name, a[:nr + 1])
            elif name in ("block_cs_ptr", "block_succ_ptr"):
                setattr(out, name, a[:nb + 1])
            elif name.startswith("func_"):
                setattr(out, name, a[:nf])
            elif name.startswith("range_"):
                setattr(out, name, a[:nr])
            elif name == "callsite_offsets":
                setattr(out, name, a[:ncs])
            elif name.startswith("succ_"):
                setattr(out, name, a[:ns])
            else:
                setattr(out, name, a[:nb])
        out.sources = list(m.sources)
        out.func_name = list(m.func_name[:nf])
        return out

    @staticmethod
    def concat(maps: Sequence[BlockMap]) -> BlockMap:
        """Join maps (e.g. one per map section) into one, re-basing the CSR pointers."""
        maps = [m for m in maps]
        if not maps:
            return BlockMap()
        out = BlockMap()
        sources: list[MapSource] = []
        src_index: list[np.ndarray] = []
        for m in maps:
            remap = np.array([_index_of(sources, s) for s in m.sources], dtype=np.int32)
            src_index.append(remap[m.func_source] if len(remap) else m.func_source)
        out.sources = sources
        for name in BlockMap.ARRAY_FIELDS:
            if name.endswith("_ptr"):
                continue
            if name == "func_source":
                out.func_source = (np.concatenate(src_index).astype("i4")
                                   if src_index else _u("i4"))
                continue
            setattr(out, name, np.concatenate([getattr(m, name) for m in maps]))
        for ptr, child in (("func_range_ptr", "range_base"), ("range_block_ptr", "block_id"),
                           ("block_cs_ptr", "callsite_offsets"), ("block_succ_ptr", "succ_id")):
            parts = [np.zeros(1, np.int64)]
            base = 0
            for m in maps:
                p = getattr(m, ptr)
                parts.append(p[1:] + base)
                base += len(getattr(m, child))
            setattr(out, ptr, np.concatenate(parts).astype(np.int64))
        out.func_name = [n for m in maps for n in (m.func_name or [None] * m.num_functions)]
        return out


def _index_of(sources: list[MapSource], s: MapSource) -> int:
    try:
        return sources.index(s)
    except ValueError:
        sources.append(s)
        return len(sources) - 1


@dataclass
class BlockRecord:
    """One block as a plain record (builder input, dump output)."""

    id: int
    offset: int  # absolute within the range
    size: int
    md: int
    hash: int = 0
    callsites: tuple[int, ...] = ()  # offsets from block start
    freq: int = 0
    postlink_freq: int = 0
    successors: tuple[tuple[int, int, int], ...] = ()  # (id, prob, postlink)


@dataclass
class RangeRecord:
    base: int
    blocks: list[BlockRecord]
    section: int = -1
    num_blocks: int | None = None  # declared count (OmitBBEntries); default len(blocks)


@dataclass
class FunctionRecord:
    address: int
    ranges: list[RangeRecord]
    version: int
    feature: int = 0
    source: int = 0
    map_offset: int = 0
    entry_count: int = 0
    name: str | None = None


class BlockMapBuilder:
    """Accumulate plain records and emit a columnar :class:`BlockMap`.

    The reference (construct) decoder and the writers use this; the fast decoder
    fills arrays directly and is checked equal to this path.
    """

    def __init__(self, sources: list[MapSource] | None = None) -> None:
        self.sources: list[MapSource] = list(sources or [])
        self.functions: list[FunctionRecord] = []

    def add_source(self, source: MapSource) -> int:
        return _index_of(self.sources, source)

    def add(self, fn: FunctionRecord) -> None:
        self.functions.append(fn)

    def build(self) -> BlockMap:
        fns = self.functions
        ranges = [r for f in fns for r in f.ranges]
        blocks = [b for r in ranges for b in r.blocks]
        m = BlockMap()
        m.sources = list(self.sources)
        m.func_address = np.array([f.address for f in fns], dtype="u8")
        m.func_version = np.array([f.version for f in fns], dtype="i2")
        m.func_feature = np.array([f.feature for f in fns], dtype="u2")
        m.func_source = np.array([f.source for f in fns], dtype="i4")
        m.func_map_offset = np.array([f.map_offset for f in fns], dtype="u8")
        m.func_entry_count = np.array([f.entry_count for f in fns], dtype="u8")
        m.func_range_ptr = _cumsum([len(f.ranges) for f in fns])
        m.range_base = np.array([r.base for r in ranges], dtype="u8")
        m.range_section = np.array([r.section for r in ranges], dtype="i4")
        m.range_num_blocks = np.array(
            [len(r.blocks) if r.num_blocks is None else r.num_blocks for r in ranges], dtype="u4")
        m.range_block_ptr = _cumsum([len(r.blocks) for r in ranges])
        m.block_id = np.array([b.id for b in blocks], dtype="u4")
        m.block_offset = np.array([b.offset for b in blocks], dtype="u8")
        m.block_size = np.array([b.size for b in blocks], dtype="u8")
        m.block_md = np.array([b.md for b in blocks], dtype="u1")
        m.block_hash = np.array([b.hash for b in blocks], dtype="u8")
        m.block_cs_ptr = _cumsum([len(b.callsites) for b in blocks])
        m.callsite_offsets = np.array([c for b in blocks for c in b.callsites], dtype="u4")
        m.block_freq = np.array([b.freq for b in blocks], dtype="u8")
        m.block_postlink_freq = np.array([b.postlink_freq for b in blocks], dtype="u8")
        m.block_succ_ptr = _cumsum([len(b.successors) for b in blocks])
        succ = [s for b in blocks for s in b.successors]
        m.succ_id = np.array([s[0] for s in succ], dtype="u4")
        m.succ_prob = np.array([s[1] for s in succ], dtype="u4")
        m.succ_postlink = np.array([s[2] for s in succ], dtype="u8")
        m.func_name = [f.name for f in fns]
        m.validate_shape()
        return m


def _cumsum(counts: list[int]) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    if counts:
        np.cumsum(counts, out=out[1:])
    return out


def function_records(m: BlockMap) -> Iterator[FunctionRecord]:
    """Inverse of :class:`BlockMapBuilder` (for writers, dumps and tests)."""
    for f in range(m.num_functions):
        ranges = []
        for r in m.function_ranges(f):
            blocks = []
            for b in m.range_blocks(r):
                blocks.append(BlockRecord(
                    id=int(m.block_id[b]), offset=int(m.block_offset[b]),
                    size=int(m.block_size[b]), md=int(m.block_md[b]),
                    hash=int(m.block_hash[b]),
                    callsites=tuple(int(c) for c in m.block_callsites(b)),
                    freq=int(m.block_freq[b]), postlink_freq=int(m.block_postlink_freq[b]),
                    successors=tuple(m.block_successors(b))))
            ranges.append(RangeRecord(base=int(m.range_base[r]), blocks=blocks,
                                      section=int(m.range_section[r]),
                                      num_blocks=int(m.range_num_blocks[r])))
        yield FunctionRecord(
            address=int(m.func_address[f]), ranges=ranges, version=int(m.func_version[f]),
            feature=int(m.func_feature[f]), source=int(m.func_source[f]),
            map_offset=int(m.func_map_offset[f]), entry_count=int(m.func_entry_count[f]),
            name=m.func_name[f] if f < len(m.func_name) else None)
