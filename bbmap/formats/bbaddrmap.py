"""Every basic-block address map layout LLVM has emitted, declared once (parse and build).

* ``SHT_LLVM_BB_ADDR_MAP_V0`` (0x6fff4c08, LLVM 12-14): no header; offsets from the
  function start.
* ``SHT_LLVM_BB_ADDR_MAP`` (0x6fff4c0a): a version byte and a feature field per
  function record -- u8 for versions 1-4, u16 for version 5; version 1 (LLVM 15/16)
  has no block IDs and its feature byte is ignored by its readers; 2+ add IDs, and the
  feature bits add entry counts, frequencies, branch probabilities, multiple ranges,
  omitted entries, callsite offsets, block hashes and post-link CFG counts.
* ``.bb_info`` (the July 2020 proposal, seed 004): like V0 but the entry block has no
  offset field ("as it is always zero").

Features change from function to function, so each record is parsed on its own:
:func:`function_struct` returns the struct for one record.  Addresses are pointer
sized in the file's byte order.  Faults raise :class:`~bbmap.formats.leb128.MapFault`
carrying the byte offset, with LLVM's message texts where LLVM has one.
"""

from __future__ import annotations

from functools import lru_cache

from construct import (
    Array,
    Computed,
    Construct,
    If,
    Int8ul,
    Int16ub,
    Int16ul,
    Int32ub,
    Int32ul,
    Int64ub,
    Int64ul,
    PrefixedArray,
    Rebuild,
    Struct,
    Tell,
    len_,
    this,
)
from construct.core import stream_size, stream_tell

from bbmap.formats.leb128 import ULEB, ULEB32, ULEB64, Fixed, MapFault, encode_uleb

SHT_LLVM_BB_ADDR_MAP_V0 = 0x6FFF4C08
SHT_LLVM_BB_ADDR_MAP = 0x6FFF4C0A
BB_INFO_SECTION = ".bb_info"  # PROGBITS: found by name, the only way it can be found

# Which feature bits each version admits (LLVM 22 ``Features`` checks); 1 ignores them.
FEATURE_MIN_VERSION = {0x01: 2, 0x02: 2, 0x04: 2, 0x08: 2, 0x10: 2, 0x20: 3, 0x40: 4, 0x80: 5}
KNOWN_FEATURES = 0xFF
KNOWN_METADATA = 0x1F
MAX_VERSION = 5


def effective_feature(version: int, feature: int) -> int:
    """The feature bits that shape the layout: none before version 2 (LLVM 15/16)."""
    return feature if version >= 2 else 0


def min_block_bytes(version: int, feature: int) -> int:
    """The fewest bytes one block entry can take: the bound for absurd counts."""
    eff = effective_feature(version, feature)
    if eff & 0x10:
        return 0
    n = 4 if version >= 2 else 3
    if eff & 0x20:
        n += 1
    if eff & 0x40:
        n += 8
    return n


def _remaining(stream, path) -> int:
    return stream_size(stream) - stream_tell(stream, path)


class Count(Construct):
    """ULEB32 count of items each taking at least ``min_bytes(ctx)`` bytes.

    A count the remaining bytes cannot hold is refused before anything is allocated
    (``nonzero`` also refuses 0: LLVM's "invalid zero number of BB ranges").
    """

    def __init__(self, what: str, min_bytes, nonzero: bool = False, bits: int = 32) -> None:
        super().__init__()
        self.uleb = ULEB(bits)
        self.what = what
        self.min_bytes = min_bytes
        self.nonzero = nonzero

    def _parse(self, stream, context, path):
        start = stream_tell(stream, path)
        n = self.uleb._parse(stream, context, path)
        if self.nonzero and n == 0:
            raise MapFault(f"invalid zero number of {self.what} at offset {start:#x}", start, path)
        need = self.min_bytes(context) if callable(self.min_bytes) else self.min_bytes
        left = _remaining(stream, path)
        if need and n * need > left:
            raise MapFault(f"{self.what} count {n} needs at least {n * need} bytes but only "
                           f"{left} remain", start, path)
        return n

    def _build(self, obj, stream, context, path):
        return self.uleb._build(obj, stream, context, path)


class Version(Construct):
    """The version byte: 1..5 (1 is accepted as LLVM 15/16 did; 22 refuses it)."""

    def _parse(self, stream, context, path):
        start = stream_tell(stream, path)
        v = Fixed(Int8ul)._parse(stream, context, path)
        if not 1 <= v <= MAX_VERSION:
            raise MapFault(f"unsupported SHT_LLVM_BB_ADDR_MAP version: {v}", start, path)
        return v

    def _build(self, obj, stream, context, path):
        return Fixed(Int8ul)._build(obj, stream, context, path)


class Feature(Construct):
    """u8 (versions 1-4) or u16 (5); bits no LLVM defines are refused (layout unknown)."""

    def __init__(self, little: bool) -> None:
        super().__init__()
        self.u16 = Fixed(Int16ul if little else Int16ub)
        self.u8 = Fixed(Int8ul)

    def _parse(self, stream, context, path):
        start = stream_tell(stream, path)
        f = (self.u16 if context.version >= 5 else self.u8)._parse(stream, context, path)
        if context.version >= 2 and f & ~KNOWN_FEATURES:
            raise MapFault(f"invalid encoding for BBAddrMap::Features: {f:#x}", start, path)
        return f

    def _build(self, obj, stream, context, path):
        return (self.u16 if context.version >= 5 else self.u8)._build(obj, stream, context, path)


def _eff(c) -> int:
    return c._root.eff


def _total_blocks(c) -> int:
    return sum(len(r.blocks) if r.blocks is not None else 0 for r in c._root.ranges)


@lru_cache(maxsize=8)
def function_struct(versioned: bool = True, address_size: int = 8, little: bool = True):
    """One function record of a map section (``versioned=False``: the V0 type)."""
    addr = Fixed({(8, True): Int64ul, (8, False): Int64ub,
                  (4, True): Int32ul, (4, False): Int32ub}[address_size, little])
    u64 = Fixed(Int64ul if little else Int64ub)
    entry = Struct(
        "id" / If(lambda c: c._root.version >= 2, ULEB32),
        "offset" / ULEB32,
        "callsites" / If(lambda c: _eff(c) & 0x20,
                         PrefixedArray(Count("callsite", 1), ULEB32)),  # running deltas
        "size" / ULEB32,  # v2+: plus the last callsite offset
        "metadata" / ULEB32,
        "hash" / If(lambda c: _eff(c) & 0x40, u64),
    )
    bb_range = Struct(
        "address_offset" / Tell,
        "base_address" / addr,
        "num_blocks" / Count("BB entries",
                             lambda c: min_block_bytes(c._root.version, c._root.feature)),
        "blocks" / If(lambda c: not _eff(c) & 0x10, Array(this.num_blocks, entry)),
    )
    successor = Struct(
        "id" / ULEB32,
        "probability" / ULEB32,
        "postlink_freq" / If(lambda c: _eff(c) & 0x80, ULEB32),
    )
    pgo_block = Struct(
        "freq" / If(lambda c: _eff(c) & 0x02, ULEB64),
        "postlink_freq" / If(lambda c: _eff(c) & 0x80, ULEB32),
        "successors" / If(lambda c: _eff(c) & 0x04,
                          PrefixedArray(Count("successor", 2, bits=64), successor)),
    )
    pgo = Struct(
        "entry_count" / If(lambda c: _eff(c) & 0x01, ULEB64),
        "blocks" / If(lambda c: _eff(c) & 0x06, Array(_total_blocks, pgo_block)),
    )
    if not versioned:
        return Struct(
            "offset" / Tell,
            "version" / Computed(0),
            "feature" / Computed(0),
            "eff" / Computed(0),
            "ranges" / Array(1, bb_range),
            "pgo" / Computed(None),
        )
    return Struct(
        "offset" / Tell,
        "version" / Version(),
        "feature" / Feature(little),
        "eff" / Computed(lambda c: effective_feature(c.version, c.feature)),
        "num_ranges" / If(this.eff & 0x08, Rebuild(
            Count("BB ranges", address_size + 1, nonzero=True), len_(this.ranges))),
        "ranges" / Array(lambda c: c.num_ranges if c.eff & 0x08 else 1, bb_range),
        "pgo" / If(lambda c: c.eff & 0x07, pgo),
    )


@lru_cache(maxsize=8)
def bb_info_struct(address_size: int = 8, little: bool = True):
    """One function of the 2020 ``.bb_info`` proposal: the entry block has no offset."""
    addr = Fixed({(8, True): Int64ul, (8, False): Int64ub,
                  (4, True): Int32ul, (4, False): Int32ub}[address_size, little])
    block = Struct("offset" / ULEB32, "size" / ULEB32, "metadata" / ULEB32)
    return Struct(
        "offset" / Tell,
        "address_offset" / Tell,
        "address" / addr,
        "num_blocks" / Count("basic blocks", 2, nonzero=True),  # entry block: 2 bytes
        "entry_size" / ULEB32,
        "entry_metadata" / ULEB32,
        "blocks" / Array(this.num_blocks - 1, block),
    )


def callsite_offsets(deltas: list[int] | None) -> list[int]:
    """Running sums of the encoded callsite deltas (offsets from the block start)."""
    out, acc = [], 0
    for d in deltas or ():
        acc += d
        out.append(acc)
    return out


def callsite_deltas(offsets: list[int] | tuple[int, ...]) -> list[int]:
    out, prev = [], 0
    for o in offsets:
        out.append(o - prev)
        prev = o
    return out


__all__ = ["SHT_LLVM_BB_ADDR_MAP", "SHT_LLVM_BB_ADDR_MAP_V0", "BB_INFO_SECTION", "Count",
           "FEATURE_MIN_VERSION", "KNOWN_FEATURES", "KNOWN_METADATA", "MAX_VERSION",
           "MapFault", "bb_info_struct", "callsite_deltas", "callsite_offsets",
           "effective_feature", "encode_uleb", "function_struct", "min_block_bytes"]
