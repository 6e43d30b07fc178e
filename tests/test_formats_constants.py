"""The fast paths and the construct declarations agree on every constant they share.

construct is the spec; the numpy/struct fast paths (map decoder and writer, SAMPLE and
side-record decoders, perf writer) take field sizes, feature bits and masks from named
constants.  Each named constant is measured here *from the declaration* (bytes built or
sizes taken through construct), so a fast path and its declaration cannot drift apart
without a failure; and the fast-path modules may not spell a mask as a bare number.
"""

from __future__ import annotations

import ast
import itertools
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bbmap
from bbmap.binary import decode_fast, writer
from bbmap.binary.writer import encode_map
from bbmap.formats import bbaddrmap as bam
from bbmap.formats import leb128
from bbmap.formats import perfdata as fmt
from bbmap.model import VERSION_BB_INFO, BlockRecord, FunctionRecord, RangeRecord
from bbmap.perf import samples, side
from bbmap.perf import writer as perf_writer

PACKAGE = Path(bbmap.__file__).parent


# ---------------------------------------------------------------------- block maps
def _one_block(version: int, feature: int = 0, callsites=(), successors=()) -> bytes:
    """One function, one block, every value below 128 (one byte per ULEB), via construct."""
    b = BlockRecord(id=1, offset=2, size=3 + (callsites[-1] if callsites else 0), md=1,
                    hash=0x1122334455667788, callsites=tuple(callsites), freq=5,
                    successors=tuple(successors))
    fn = FunctionRecord(address=0x1000, ranges=[RangeRecord(base=0x1000, blocks=[b])],
                        version=version, feature=feature)
    sh = bam.SHT_LLVM_BB_ADDR_MAP_V0 if version == bam.VERSION_UNVERSIONED \
        else bam.SHT_LLVM_BB_ADDR_MAP
    return encode_map([fn], sh_type=sh)


ADDR = 8  # 64-bit test binaries


def _entry_bytes(version: int, feature: int = 0, **kw) -> int:
    data = _one_block(version, feature, **kw)
    header = 0 if version == bam.VERSION_UNVERSIONED else 1 + _feature_width(version)
    return len(data) - header - ADDR - 1  # minus the address and the block count


def _feature_width(version: int) -> int:
    """The feature field's width, measured through the construct Feature type."""
    return len(bam.Feature(True).build(0, version=version))


def test_feature_field_width_changes_at_the_named_version():
    for v in range(1, bam.MAX_VERSION + 1):
        assert _feature_width(v) == (2 if v >= bam.VERSION_FEATURE_U16 else 1)
    assert len(_one_block(bam.VERSION_FEATURE_U16)) == len(_one_block(4)) + 1


def test_entry_ulebs():
    assert _entry_bytes(bam.VERSION_UNVERSIONED) == bam.ENTRY_ULEBS_NO_ID
    assert _entry_bytes(1) == bam.ENTRY_ULEBS_NO_ID
    for v in range(bam.VERSION_BLOCK_IDS, bam.MAX_VERSION + 1):
        assert _entry_bytes(v) == bam.ENTRY_ULEBS
    assert _entry_bytes(bam.VERSION_BLOCK_IDS - 1) != bam.ENTRY_ULEBS


def test_callsite_entry_and_count_position():
    v = bam.FEATURE_MIN_VERSION[bam.FEAT_CALLSITE_OFFSETS]
    for n in (0, 1, 3):
        cs = tuple(range(1, n + 1))
        assert _entry_bytes(v, bam.FEAT_CALLSITE_OFFSETS, callsites=cs) \
            == bam.CALLSITE_ENTRY_ULEBS + n
        data = _one_block(v, bam.FEAT_CALLSITE_OFFSETS, callsites=cs)
        entry = data[1 + _feature_width(v) + ADDR + 1:]
        assert entry[bam.CALLSITE_COUNT_INDEX] == n


def test_hash_bytes():
    v = bam.FEATURE_MIN_VERSION[bam.FEAT_BB_HASH]
    assert _entry_bytes(v, bam.FEAT_BB_HASH) - _entry_bytes(v) == bam.BLOCK_HASH_BYTES


def test_successor_ulebs():
    v = bam.VERSION_BLOCK_IDS
    one = len(_one_block(v, bam.FEAT_BR_PROB, successors=[(1, 7, 0)]))
    two = len(_one_block(v, bam.FEAT_BR_PROB, successors=[(1, 7, 0), (2, 9, 0)]))
    assert two - one == bam.SUCCESSOR_ULEBS
    p = bam.FEAT_POST_LINK_CFG
    vp = bam.FEATURE_MIN_VERSION[p]
    one = len(_one_block(vp, bam.FEAT_BR_PROB | p, successors=[(1, 7, 3)]))
    two = len(_one_block(vp, bam.FEAT_BR_PROB | p, successors=[(1, 7, 3), (2, 9, 3)]))
    assert two - one == bam.SUCCESSOR_ULEBS + 1


def test_bb_info_entry_block():
    b = [BlockRecord(id=0, offset=0, size=3, md=1)]
    fn = FunctionRecord(address=0x1000, ranges=[RangeRecord(base=0x1000, blocks=b)],
                        version=VERSION_BB_INFO)
    assert len(encode_map([fn], version=VERSION_BB_INFO)) == ADDR + 1 + \
        bam.BB_INFO_ENTRY_BLOCK_ULEBS


def test_feature_and_metadata_masks_cover_the_named_bits():
    bits = list(bam.FEATURE_NAMES.values())
    assert len(set(bits)) == len(bits) and all(b & (b - 1) == 0 for b in bits)
    assert sum(bits) == bam.KNOWN_FEATURES
    assert set(bam.FEATURE_MIN_VERSION) == set(bits)
    assert bam.FEAT_PGO_BLOCKS | bam.FEAT_FUNC_ENTRY_COUNT == bam.FEAT_PGO_ANALYSIS
    mds = list(bam.MD_NAMES.values())
    assert sum(mds) == bam.KNOWN_METADATA and bam.KNOWN_METADATA <= bam.METADATA_MAX
    # the fast walker's "needs the general walk" mask is every known bit but callsites
    assert decode_fast._GENERAL_FEATURES == bam.KNOWN_FEATURES & ~bam.FEAT_CALLSITE_OFFSETS


@pytest.mark.parametrize("feature", list(bam.FEATURE_NAMES.values()))
def test_each_feature_bit_shapes_the_construct_record(feature):
    """A named bit the declaration ignored would be a name for nothing."""
    v = bam.FEATURE_MIN_VERSION[feature]
    base = bam.FEAT_BB_FREQ if feature == bam.FEAT_POST_LINK_CFG else 0  # post-link needs PGO

    def body(feat: int) -> bytes:
        return _one_block(v, feat)[1 + _feature_width(v):]

    assert body(base | feature) != body(base)


def test_leb128_constants():
    assert leb128.encode_uleb(leb128.LEB_PAYLOAD) == bytes([leb128.LEB_PAYLOAD])
    assert leb128.encode_uleb(leb128.LEB_PAYLOAD + 1) == bytes([leb128.LEB_MORE, 1])
    assert leb128.LEB_MORE == 1 << leb128.LEB_GROUP_BITS
    assert len(leb128.encode_uleb(2**64 - 1)) == leb128.MAX_ULEB_BYTES
    assert leb128.decode_sleb(bytes([leb128.SLEB_SIGN]), 0) == (-leb128.SLEB_SIGN, 1)


# ---------------------------------------------------------------------- perf.data
def test_record_header_and_branch_entry():
    assert fmt.EVENT_HEADER_STRUCT.size == fmt.EventHeader.sizeof() == fmt.EVENT_HEADER_SIZE
    raw = fmt.EventHeader.build({"type": 9, "misc": 0x4002, "size": 0x1234})
    assert struct.unpack_from("<H", raw, fmt.SIZE_AT)[0] == 0x1234
    assert struct.unpack_from("<H", raw, fmt.MISC_AT)[0] == 0x4002
    assert fmt.BranchEntry.sizeof() == fmt.BRANCH_ENTRY_SIZE
    entry = fmt.BranchEntry.build({"from_": 1, "to": 2, "flags": 3})
    assert [struct.unpack_from("<Q", entry, at)[0]
            for at in (samples._FROM_AT, samples._TO_AT, samples._FLAGS_AT)] == [1, 2, 3]
    assert perf_writer._BRANCH_FIELDS * 8 == fmt.BRANCH_ENTRY_SIZE
    assert fmt.BuildIdHead.sizeof() == fmt.BUILD_ID_EVENT_FIXED


def test_branch_flag_fields():
    word = (5 << fmt.BRF_TYPE_SHIFT) | (77 << fmt.BRF_CYCLES_SHIFT) | fmt.BRF_MISPRED
    assert (word >> fmt.BRF_TYPE_SHIFT) & fmt.BRF_TYPE_MASK == fmt.BR_TYPE_IND_CALL
    assert (word >> fmt.BRF_CYCLES_SHIFT) & fmt.BRF_CYCLES_MASK == 77
    # the fields do not overlap: mispred, predicted, in_tx, abort, cycles, type
    masks = [fmt.BRF_MISPRED, fmt.BRF_PREDICTED, fmt.BRF_IN_TX, fmt.BRF_ABORT,
             fmt.BRF_CYCLES_MASK << fmt.BRF_CYCLES_SHIFT, fmt.BRF_TYPE_MASK << fmt.BRF_TYPE_SHIFT]
    assert sum(masks) == (1 << 24) - 1


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=80, max_size=80))
def test_side_record_structs_read_the_declared_fields(raw):
    """The struct packers of the fast side-record path unpack what construct parses."""
    for packer, decl in ((side._MMAP_HEAD, fmt.MmapHead), (side._MMAP2_PROT, fmt.Mmap2Prot),
                         (side._COMM_HEAD, fmt.CommHead), (side._FORK, fmt.ForkExitBody)):
        c = decl.parse(raw)
        assert packer.unpack_from(raw) == tuple(v for k, v in c.items() if k != "_io")
    no_name = {"pid": 0, "tid": 0, "start": 0, "len": 0, "pgoff": 0, "prot": 0, "flags": 0,
               "u": {"maj": 0, "min": 0, "ino": 0, "ino_generation": 0}, "filename": ""}
    fixed = len(fmt.Mmap2Body.build(no_name, misc=0))
    assert fixed == side._MMAP2_NAME_AT - fmt.EVENT_HEADER_SIZE


@pytest.mark.parametrize("bits", range(64))
def test_sample_id_trailer_size(bits):
    flags = (fmt.S_TID, fmt.S_TIME, fmt.S_ID, fmt.S_STREAM_ID, fmt.S_CPU, fmt.S_IDENTIFIER)
    st_ = sum(f for i, f in enumerate(flags) if bits >> i & 1)
    assert fmt.sample_id_size(st_) == fmt.sample_id_struct(st_).sizeof()


@pytest.mark.parametrize("combo", list(itertools.product([0, 1], repeat=5)))
def test_writer_packs_the_declared_sample_prefix(combo):
    bits = (fmt.S_IP, fmt.S_TID, fmt.S_TIME, fmt.S_CPU, fmt.S_PERIOD)
    st_ = sum(b for b, on in zip(bits, combo) if on) | fmt.S_IDENTIFIER
    pack = perf_writer._fixed_packer(st_)
    got = pack(ip=0x401000, pid=7, tid=8, time=99, addr=0, cpu=3, period=5)
    decl = fmt.sample_struct(st_)
    values = dict.fromkeys((sc.name for sc in decl.subcons), None)
    values.update(identifier=perf_writer.EVENT_ID, ip=0x401000, pid=7, tid=8, time=99,
                  addr=0, id=0, stream_id=0, cpu=3, cpu_res=0, period=5)
    want = decl.build(values)
    assert got == want


# ---------------------------------------------------------------------- no bare masks
FAST_PATHS = ["binary/decode_fast.py", "binary/decode_assemble.py", "binary/decode_ref.py",
              "binary/writer.py", "binary/relocs.py", "binary/uleb_tokens.py", "formats/elf.py",
              "binary/mapinput.py", "perf/samples.py", "perf/side.py", "perf/reader.py",
              "perf/writer.py", "aggregate/lbr.py", "formats/bbaddrmap.py"]


@pytest.mark.parametrize("module", FAST_PATHS)
def test_masks_are_names(module):
    """``x & 0x20`` in a fast path is a second declaration of a bit: name it instead."""
    tree = ast.parse((PACKAGE / module).read_text())
    bare = [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitAnd | ast.BitOr)
            and any(isinstance(s, ast.Constant) and isinstance(s.value, int) and s.value > 1
                    for s in (n.left, n.right))]
    assert bare == []


def test_fast_paths_import_the_declared_names():
    for name in ("ENTRY_ULEBS", "CALLSITE_ENTRY_ULEBS", "BLOCK_HASH_BYTES", "FEAT_BB_HASH",
                 "KNOWN_METADATA", "VERSION_FEATURE_U16"):
        assert getattr(decode_fast, name) is getattr(bam, name)
    assert writer.FEAT_CALLSITE_OFFSETS is bam.FEAT_CALLSITE_OFFSETS


# ---------------------------------------------------------------- lazily built declarations
LAZY_FORMAT_MODULES = ("bbmap.formats.bbaddrmap", "bbmap.formats.leb128", "bbmap.formats.go")


@pytest.mark.parametrize("name", LAZY_FORMAT_MODULES)
def test_lazy_declarations_build_exactly_the_names_they_promise(name):
    """A format module whose construct types are built on first use (spec/startup.md)
    lists them in ``CONSTRUCT_TYPES``: its ``_declare`` builds exactly those, each named
    as if declared at module level, and ``from module import NAME`` finds each."""
    import importlib

    mod = importlib.import_module(name)
    built = mod._declare()
    assert sorted(built) == sorted(mod.CONSTRUCT_TYPES)
    for n in mod.CONSTRUCT_TYPES:
        value = getattr(mod, n)
        assert type(value).__qualname__ == type(built[n]).__qualname__
        if isinstance(value, type):
            assert (value.__module__, value.__qualname__) == (name, n)
    with pytest.raises(AttributeError):
        _ = mod.NO_SUCH_NAME


def test_format_constants_import_without_construct():
    """The constants the fast paths use come from the format modules without construct
    (~7 ms of start-up): a fresh interpreter imports them and construct stays unloaded
    until a declaration is used."""
    import subprocess
    import sys

    code = ("import sys; from bbmap.formats import bbaddrmap, leb128, go, elf; "
            "assert 'construct' not in sys.modules, 'at import'; "
            "bbaddrmap.FEAT_BB_HASH, leb128.LEB_MORE, go.BUILDINFO_MAGIC; "
            "assert 'construct' not in sys.modules; "
            "from bbmap.formats.leb128 import ULEB32; assert 'construct' in sys.modules; "
            "print(ULEB32.parse(bytes([leb128.LEB_MORE | 1, 1])))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(1 | 1 << leb128.LEB_GROUP_BITS)
