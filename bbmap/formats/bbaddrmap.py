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
carrying the byte offset, with LLVM's message texts where LLVM has one.  The construct
types (:class:`Count`, :class:`Version`, :class:`Feature`) and the structs are built on
first use (:func:`bbmap.formats.lazy_declarations`): the fast decoder needs only the
constants.
"""

from __future__ import annotations

from functools import lru_cache, reduce
from operator import or_
from typing import TYPE_CHECKING, Any

from bbmap.formats import lazy_declarations

if TYPE_CHECKING:
    from construct import Construct

SHT_LLVM_BB_ADDR_MAP_V0 = 0x6FFF4C08
SHT_LLVM_BB_ADDR_MAP = 0x6FFF4C0A
BB_INFO_SECTION = ".bb_info"  # PROGBITS: found by name, the only way it can be found

# ---------------------------------------------------------------- versions
# (llvm/include/llvm/Object/ELFTypes.h, BBAddrMap; LLVM 15-22 readers)
VERSION_UNVERSIONED = 0  # SHT_LLVM_BB_ADDR_MAP_V0: no version byte, offsets from the start
VERSION_BLOCK_IDS = 2  # first version with block IDs whose feature bits shape the record
VERSION_FEATURE_U16 = 5  # the feature field is a u16 from here on (a u8 before)
MAX_VERSION = 5

# ---------------------------------------------------------------- BBAddrMap::Features
FEAT_FUNC_ENTRY_COUNT = 0x01
FEAT_BB_FREQ = 0x02
FEAT_BR_PROB = 0x04
FEAT_MULTI_BB_RANGE = 0x08
FEAT_OMIT_BB_ENTRIES = 0x10
FEAT_CALLSITE_OFFSETS = 0x20
FEAT_BB_HASH = 0x40
FEAT_POST_LINK_CFG = 0x80
FEATURE_NAMES = {
    "func_entry_count": FEAT_FUNC_ENTRY_COUNT,
    "bb_freq": FEAT_BB_FREQ,
    "br_prob": FEAT_BR_PROB,
    "multi_bb_range": FEAT_MULTI_BB_RANGE,
    "omit_bb_entries": FEAT_OMIT_BB_ENTRIES,
    "callsite_offsets": FEAT_CALLSITE_OFFSETS,
    "bb_hash": FEAT_BB_HASH,
    "post_link_cfg": FEAT_POST_LINK_CFG,
}
KNOWN_FEATURES = reduce(or_, FEATURE_NAMES.values())
# the PGO analysis map follows the ranges when any of these is set
FEAT_PGO_ANALYSIS = FEAT_FUNC_ENTRY_COUNT | FEAT_BB_FREQ | FEAT_BR_PROB
# ... and has one entry per block when any of these is
FEAT_PGO_BLOCKS = FEAT_BB_FREQ | FEAT_BR_PROB
# Which version each feature bit needs (LLVM 22 ``Features`` checks); 1 ignores them all.
FEATURE_MIN_VERSION = {FEAT_FUNC_ENTRY_COUNT: 2, FEAT_BB_FREQ: 2, FEAT_BR_PROB: 2,
                       FEAT_MULTI_BB_RANGE: 2, FEAT_OMIT_BB_ENTRIES: 2,
                       FEAT_CALLSITE_OFFSETS: 3, FEAT_BB_HASH: 4, FEAT_POST_LINK_CFG: 5}

# ---------------------------------------------------------------- BBEntry::Metadata
MD_HAS_RETURN = 0x01
MD_HAS_TAIL_CALL = 0x02
MD_IS_EH_PAD = 0x04
MD_CAN_FALL_THROUGH = 0x08
MD_HAS_INDIRECT_BRANCH = 0x10
MD_NAMES = {
    "has_return": MD_HAS_RETURN,
    "has_tail_call": MD_HAS_TAIL_CALL,
    "is_eh_pad": MD_IS_EH_PAD,
    "can_fall_through": MD_CAN_FALL_THROUGH,
    "has_indirect_branch": MD_HAS_INDIRECT_BRANCH,
}
KNOWN_METADATA = reduce(or_, MD_NAMES.values())
METADATA_MAX = 0xFF  # the ULEB must fit BBEntry::Metadata's 8 bits ("invalid encoding")

# ---------------------------------------------------------------- field sizes
BLOCK_HASH_BYTES = 8  # FEAT_BB_HASH: a u64 after each entry
UINT32_MAX = 0xFFFFFFFF  # IDs, offsets, sizes, callsite offsets, probabilities are 32-bit
# ULEB fields of one block entry: [id] offset size metadata (no id before version 2) ...
ENTRY_ULEBS = 4
ENTRY_ULEBS_NO_ID = 3
# ... and with FEAT_CALLSITE_OFFSETS: id offset count (count x delta) size metadata
CALLSITE_ENTRY_ULEBS = 5
CALLSITE_COUNT_INDEX = 2  # the count's place among those ULEBs (after id, offset)
# a successor's probability is a numerator over BranchProbability's denominator
# (llvm/Support/BranchProbability.h)
PROB_ONE = 1 << 31
# one successor of the PGO analysis map: id probability [post-link frequency]
SUCCESSOR_ULEBS = 2
# a ``.bb_info`` function: the entry block (size, metadata) has no offset field
BB_INFO_ENTRY_BLOCK_ULEBS = 2


def effective_feature(version: int, feature: int) -> int:
    """The feature bits that shape the layout: none before version 2 (LLVM 15/16)."""
    return feature if version >= VERSION_BLOCK_IDS else 0


def min_block_bytes(version: int, feature: int) -> int:
    """The fewest bytes one block entry can take: the bound for absurd counts."""
    eff = effective_feature(version, feature)
    if eff & FEAT_OMIT_BB_ENTRIES:
        return 0
    n = ENTRY_ULEBS if version >= VERSION_BLOCK_IDS else ENTRY_ULEBS_NO_ID
    if eff & FEAT_CALLSITE_OFFSETS:
        n += 1
    if eff & FEAT_BB_HASH:
        n += BLOCK_HASH_BYTES
    return n


def _declare() -> dict[str, Any]:
    """The construct types of this module (built once, on first use: bbmap.formats)."""
    from construct import Construct, Int8ul, Int16ub, Int16ul
    from construct.core import stream_size, stream_tell

    from bbmap.formats.leb128 import ULEB, Fixed, MapFault

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
                raise MapFault(f"invalid zero number of {self.what} at offset {start:#x}",
                               start, path)
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
            wide = context.version >= VERSION_FEATURE_U16
            f = (self.u16 if wide else self.u8)._parse(stream, context, path)
            if context.version >= VERSION_BLOCK_IDS and f & ~KNOWN_FEATURES:
                raise MapFault(f"invalid encoding for BBAddrMap::Features: {f:#x}", start, path)
            return f

        def _build(self, obj, stream, context, path):
            wide = context.version >= VERSION_FEATURE_U16
            return (self.u16 if wide else self.u8)._build(obj, stream, context, path)

    for cls in (Count, Version, Feature):  # named as if declared at module level
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return {"Count": Count, "Version": Version, "Feature": Feature}


CONSTRUCT_TYPES = ("Count", "Version", "Feature")
__getattr__, _declared = lazy_declarations(globals(), _declare, CONSTRUCT_TYPES)


def _eff(c) -> int:
    return c._root.eff


def _total_blocks(c) -> int:
    return sum(len(r.blocks) if r.blocks is not None else 0 for r in c._root.ranges)


def _address(address_size: int, little: bool) -> Construct:
    """A pointer-sized field in the file's byte order."""
    from construct import Int32ub, Int32ul, Int64ub, Int64ul

    from bbmap.formats.leb128 import Fixed

    return Fixed({(8, True): Int64ul, (8, False): Int64ub,
                  (4, True): Int32ul, (4, False): Int32ub}[address_size, little])


@lru_cache(maxsize=8)
def function_struct(versioned: bool = True, address_size: int = 8, little: bool = True):
    """One function record of a map section (``versioned=False``: the V0 type)."""
    from construct import (
        Array,
        Computed,
        If,
        Int64ub,
        Int64ul,
        PrefixedArray,
        Rebuild,
        Struct,
        Tell,
        len_,
        this,
    )

    from bbmap.formats.leb128 import ULEB32, ULEB64, Fixed

    types = _declared()
    Count, Version, Feature = types["Count"], types["Version"], types["Feature"]  # noqa: N806
    addr = _address(address_size, little)
    u64 = Fixed(Int64ul if little else Int64ub)
    entry = Struct(
        "id" / If(lambda c: c._root.version >= VERSION_BLOCK_IDS, ULEB32),
        "offset" / ULEB32,
        "callsites" / If(lambda c: _eff(c) & FEAT_CALLSITE_OFFSETS,
                         PrefixedArray(Count("callsite", 1), ULEB32)),  # running deltas
        "size" / ULEB32,  # v2+: plus the last callsite offset
        "metadata" / ULEB32,
        "hash" / If(lambda c: _eff(c) & FEAT_BB_HASH, u64),
    )
    bb_range = Struct(
        "address_offset" / Tell,
        "base_address" / addr,
        "num_blocks" / Count("BB entries",
                             lambda c: min_block_bytes(c._root.version, c._root.feature)),
        "blocks" / If(lambda c: not _eff(c) & FEAT_OMIT_BB_ENTRIES,
                      Array(this.num_blocks, entry)),
    )
    successor = Struct(
        "id" / ULEB32,
        "probability" / ULEB32,
        "postlink_freq" / If(lambda c: _eff(c) & FEAT_POST_LINK_CFG, ULEB32),
    )
    pgo_block = Struct(
        "freq" / If(lambda c: _eff(c) & FEAT_BB_FREQ, ULEB64),
        "postlink_freq" / If(lambda c: _eff(c) & FEAT_POST_LINK_CFG, ULEB32),
        "successors" / If(lambda c: _eff(c) & FEAT_BR_PROB,
                          PrefixedArray(Count("successor", SUCCESSOR_ULEBS, bits=64), successor)),
    )
    pgo = Struct(
        "entry_count" / If(lambda c: _eff(c) & FEAT_FUNC_ENTRY_COUNT, ULEB64),
        "blocks" / If(lambda c: _eff(c) & FEAT_PGO_BLOCKS, Array(_total_blocks, pgo_block)),
    )
    if not versioned:
        return Struct(
            "offset" / Tell,
            "version" / Computed(VERSION_UNVERSIONED),
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
        "num_ranges" / If(this.eff & FEAT_MULTI_BB_RANGE, Rebuild(
            Count("BB ranges", address_size + 1, nonzero=True), len_(this.ranges))),
        "ranges" / Array(lambda c: c.num_ranges if c.eff & FEAT_MULTI_BB_RANGE else 1,
                         bb_range),
        "pgo" / If(lambda c: c.eff & FEAT_PGO_ANALYSIS, pgo),
    )


@lru_cache(maxsize=8)
def bb_info_struct(address_size: int = 8, little: bool = True):
    """One function of the 2020 ``.bb_info`` proposal: the entry block has no offset."""
    from construct import Array, Struct, Tell, this

    from bbmap.formats.leb128 import ULEB32

    Count = _declared()["Count"]  # noqa: N806
    addr = _address(address_size, little)
    block = Struct("offset" / ULEB32, "size" / ULEB32, "metadata" / ULEB32)
    return Struct(
        "offset" / Tell,
        "address_offset" / Tell,
        "address" / addr,
        "num_blocks" / Count("basic blocks", BB_INFO_ENTRY_BLOCK_ULEBS, nonzero=True),
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
