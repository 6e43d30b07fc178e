"""perf.data on disk, declared once in construct: parse *and* build use these structs.

Layouts follow ``tools/perf/Documentation/perf.data-file-format.txt``, the kernel's
``include/uapi/linux/perf_event.h`` and perf's ``util/header.c`` (see spec/perf-data.md).
Only little-endian files are declared: an opposite-endian file is rejected by the reader.

The reader uses these structs for everything that is rare (headers, attrs, features,
side records); SAMPLE records are decoded by the vectorized fast path in
``bbmap.perf.samples``, which the tests prove equal to :func:`sample_struct`.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from construct import (
    Adapter,
    Array,
    Bytes,
    Const,
    Construct,
    Container,
    FixedSized,
    GreedyBytes,
    GreedyRange,
    If,
    IfThenElse,
    Int8ul,
    Int16ul,
    Int32sl,
    Int32ul,
    Int64sl,
    Int64ul,
    Padding,
    Prefixed,
    PrefixedArray,
    StreamError,
    Struct,
    ValidationError,
    this,
)

MAGIC = b"PERFILE2"
MAGIC_SWAPPED = b"2ELIFREP"  # the u64 magic written by an opposite-endian host
FILE_HEADER_SIZE = 104
FILE_HEADER_SIZE_OLD = 72  # before adds_features existed
PIPE_HEADER_SIZE = 16

# ------------------------------------------------------------------ record types
RECORD_NAMES: dict[int, str] = {
    1: "MMAP", 2: "LOST", 3: "COMM", 4: "EXIT", 5: "THROTTLE", 6: "UNTHROTTLE", 7: "FORK",
    8: "READ", 9: "SAMPLE", 10: "MMAP2", 11: "AUX", 12: "ITRACE_START", 13: "LOST_SAMPLES",
    14: "SWITCH", 15: "SWITCH_CPU_WIDE", 16: "NAMESPACES", 17: "KSYMBOL", 18: "BPF_EVENT",
    19: "CGROUP", 20: "TEXT_POKE", 21: "AUX_OUTPUT_HW_ID", 22: "CALLCHAIN_DEFERRED",
    # perf-synthesized (user) records, named as perf prints them
    64: "ATTR", 65: "EVENT_TYPE", 66: "TRACING_DATA", 67: "BUILD_ID", 68: "FINISHED_ROUND",
    69: "ID_INDEX", 70: "AUXTRACE_INFO", 71: "AUXTRACE", 72: "AUXTRACE_ERROR",
    73: "THREAD_MAP", 74: "CPU_MAP", 75: "STAT_CONFIG", 76: "STAT", 77: "STAT_ROUND",
    78: "EVENT_UPDATE", 79: "TIME_CONV", 80: "FEATURE", 81: "COMPRESSED", 82: "FINISHED_INIT",
    83: "COMPRESSED2", 84: "BPF_METADATA",
}
REC_MMAP, REC_LOST, REC_COMM, REC_EXIT, REC_THROTTLE, REC_UNTHROTTLE, REC_FORK = 1, 2, 3, 4, 5, 6, 7
REC_SAMPLE, REC_MMAP2, REC_LOST_SAMPLES = 9, 10, 13
REC_HEADER_ATTR, REC_HEADER_EVENT_TYPE, REC_HEADER_TRACING_DATA = 64, 65, 66
REC_HEADER_BUILD_ID, REC_FINISHED_ROUND, REC_ID_INDEX = 67, 68, 69
REC_AUXTRACE, REC_EVENT_UPDATE, REC_TIME_CONV, REC_HEADER_FEATURE = 71, 78, 79, 80
EVENT_UPDATE_NAME = 2
REC_COMPRESSED, REC_FINISHED_INIT, REC_COMPRESSED2 = 81, 82, 83
USER_TYPE_START = 64

# mmap(2) bits in MMAP2 records (prot, flags); an MMAP record is executable unless MMAP_DATA
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_SHARED, MAP_PRIVATE = 1, 2

# header.misc bits
MISC_CPUMODE_MASK = 0x7
# ... the cpumode values under that mask (PERF_RECORD_MISC_*), named as perf prints them
CPUMODE_UNKNOWN, CPUMODE_KERNEL, CPUMODE_USER, CPUMODE_HYPERVISOR = 0, 1, 2, 3
CPUMODE_GUEST_KERNEL, CPUMODE_GUEST_USER = 4, 5
CPUMODE_NAMES = {CPUMODE_UNKNOWN: "unknown", CPUMODE_KERNEL: "kernel", CPUMODE_USER: "user",
                 CPUMODE_HYPERVISOR: "hypervisor", CPUMODE_GUEST_KERNEL: "guest_kernel",
                 CPUMODE_GUEST_USER: "guest_user"}
MISC_PROC_MAP_PARSE_TIMEOUT = 1 << 12
MISC_MMAP_DATA = 1 << 13
MISC_COMM_EXEC = 1 << 13
MISC_EXACT_IP = 1 << 14
MISC_MMAP_BUILD_ID = 1 << 14
MISC_BUILD_ID_SIZE = 1 << 15  # perf userspace: build_id_event carries its real size

# ------------------------------------------------------------------ sample_type bits
S_IP, S_TID, S_TIME, S_ADDR, S_READ, S_CALLCHAIN = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
S_ID, S_CPU, S_PERIOD, S_STREAM_ID, S_RAW = 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10
S_BRANCH_STACK, S_REGS_USER, S_STACK_USER, S_WEIGHT = 1 << 11, 1 << 12, 1 << 13, 1 << 14
S_DATA_SRC, S_IDENTIFIER, S_TRANSACTION, S_REGS_INTR = 1 << 15, 1 << 16, 1 << 17, 1 << 18
S_PHYS_ADDR, S_AUX, S_CGROUP, S_DATA_PAGE_SIZE = 1 << 19, 1 << 20, 1 << 21, 1 << 22
S_CODE_PAGE_SIZE, S_WEIGHT_STRUCT = 1 << 23, 1 << 24
S_WEIGHT_TYPE = S_WEIGHT | S_WEIGHT_STRUCT
SAMPLE_TYPE_NAMES = {
    "IP": S_IP, "TID": S_TID, "TIME": S_TIME, "ADDR": S_ADDR, "READ": S_READ,
    "CALLCHAIN": S_CALLCHAIN, "ID": S_ID, "CPU": S_CPU, "PERIOD": S_PERIOD,
    "STREAM_ID": S_STREAM_ID, "RAW": S_RAW, "BRANCH_STACK": S_BRANCH_STACK,
    "REGS_USER": S_REGS_USER, "STACK_USER": S_STACK_USER, "WEIGHT": S_WEIGHT,
    "DATA_SRC": S_DATA_SRC, "IDENTIFIER": S_IDENTIFIER, "TRANSACTION": S_TRANSACTION,
    "REGS_INTR": S_REGS_INTR, "PHYS_ADDR": S_PHYS_ADDR, "AUX": S_AUX, "CGROUP": S_CGROUP,
    "DATA_PAGE_SIZE": S_DATA_PAGE_SIZE, "CODE_PAGE_SIZE": S_CODE_PAGE_SIZE,
    "WEIGHT_STRUCT": S_WEIGHT_STRUCT,
}

# read_format bits
R_TOTAL_TIME_ENABLED, R_TOTAL_TIME_RUNNING, R_ID, R_GROUP, R_LOST = 1, 2, 4, 8, 16

# branch_sample_type bits that change the record layout
BR_ANY = 1 << 3
BR_HW_INDEX = 1 << 17
BR_COUNTERS = 1 << 19

# attr flag bits (offset 40)
F_DISABLED, F_INHERIT, F_MMAP, F_COMM, F_FREQ = 1 << 0, 1 << 1, 1 << 8, 1 << 9, 1 << 10
F_SAMPLE_ID_ALL, F_EXCLUDE_KERNEL, F_EXCLUDE_HV = 1 << 18, 1 << 5, 1 << 6
F_MMAP2, F_COMM_EXEC = 1 << 23, 1 << 24
# precise_ip: two bits (0 arbitrary skid ... 3 zero skid), perf's ``p`` modifiers
F_PRECISE_IP_SHIFT, F_PRECISE_IP_MASK = 15, 3

# feature bits (util/header.h)
HEADER_FEATURE_NAMES: dict[int, str] = {
    1: "tracing_data", 2: "build_id", 3: "hostname", 4: "osrelease", 5: "version", 6: "arch",
    7: "nrcpus", 8: "cpudesc", 9: "cpuid", 10: "total_mem", 11: "cmdline", 12: "event_desc",
    13: "cpu_topology", 14: "numa_topology", 15: "branch_stack", 16: "pmu_mappings",
    17: "group_desc", 18: "auxtrace", 19: "stat", 20: "cache", 21: "sample_time",
    22: "mem_topology", 23: "clockid", 24: "dir_format", 25: "bpf_prog_info", 26: "bpf_btf",
    27: "compressed", 28: "cpu_pmu_caps", 29: "clock_data", 30: "hybrid_topology",
    31: "pmu_caps",
}
FEAT_BUILD_ID, FEAT_HOSTNAME, FEAT_OSRELEASE, FEAT_VERSION, FEAT_ARCH = 2, 3, 4, 5, 6
FEAT_NRCPUS, FEAT_CPUDESC, FEAT_CPUID, FEAT_TOTAL_MEM, FEAT_CMDLINE = 7, 8, 9, 10, 11
FEAT_EVENT_DESC, FEAT_BRANCH_STACK, FEAT_GROUP_DESC = 12, 15, 17
FEAT_SAMPLE_TIME, FEAT_CLOCKID = 21, 23
FEAT_COMPRESSED, FEAT_CPU_PMU_CAPS = 27, 28
HEADER_LAST_FEATURE = 32
HEADER_FEAT_BITS = 256
NAME_ALIGN = 64
COMP_ZSTD = 1


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ------------------------------------------------------------------ fixed layouts for fast paths
def field_offset(st: Struct, name: str) -> int:
    """Byte offset of field ``name`` in ``st`` (every field before it fixed-size)."""
    at = 0
    for sc in st.subcons:
        if getattr(sc, "name", None) == name:
            return at
        at += sc.sizeof()
    raise KeyError(name)


def struct_format(st: Struct) -> str:
    """The :mod:`struct` format of a fixed little-endian Struct of integers and padding,
    so a fast path unpacks exactly the fields the declaration names."""
    out = "<"
    for sc in st.subcons:
        inner = getattr(sc, "subcon", sc)
        fmtstr = getattr(inner, "fmtstr", None)
        if fmtstr is not None:
            if fmtstr[0] not in "<=":
                raise ValueError(f"{st}: field {sc.name} is not little-endian")
            out += fmtstr[1:]
        elif getattr(sc, "name", None) is None:  # Padding
            out += "x" * sc.sizeof()
        else:
            raise ValueError(f"{st}: field {sc.name} has no struct format")
    return out


# ------------------------------------------------------------------ small helpers
class _Text(Adapter):
    """NUL-terminated bytes as str; undecodable bytes become U+FFFD (perf prints them raw)."""

    def _decode(self, obj, context, path):
        return obj.decode("utf-8", "replace")

    def _encode(self, obj, context, path):
        return obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)


class _PaddedText(Adapter):
    """Bytes up to the first NUL (the rest is padding) as str."""

    def _decode(self, obj, context, path):
        return obj.split(b"\0", 1)[0].decode("utf-8", "replace")

    def _encode(self, obj, context, path):
        return obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)


def padded_name(name: str | bytes, alignment: int = 8) -> bytes:
    """``name`` NUL-terminated and zero-padded to ``alignment`` (kernel: ALIGN(len+1, 8))."""
    raw = name.encode("utf-8") if isinstance(name, str) else bytes(name)
    return raw + b"\0" * (align(len(raw) + 1, alignment) - len(raw))


# A name that fills the rest of its record: NUL-terminated, zero-padded to 8 bytes.
RecordName = _PaddedText(GreedyBytes)

FileSection = Struct("offset" / Int64ul, "size" / Int64ul)

FileHeader = Struct(
    "magic" / Const(MAGIC),
    "size" / Int64ul,
    "attr_size" / Int64ul,
    "attrs" / FileSection,
    "data" / FileSection,
    "event_types" / FileSection,
    "adds_features" / Array(4, Int64ul),
)
assert FileHeader.sizeof() == FILE_HEADER_SIZE

PipeHeader = Struct("magic" / Const(MAGIC), "size" / Int64ul)

EventHeader = Struct("type" / Int32ul, "misc" / Int16ul, "size" / Int16ul)
EVENT_HEADER_SIZE = EventHeader.sizeof()
EVENT_HEADER_STRUCT = struct.Struct(struct_format(EventHeader))  # (type, misc, size)
U64_STRUCT = struct.Struct("<Q")  # perf.data is little-endian (an opposite-endian file is refused)
U32_STRUCT = struct.Struct("<I")
SIZE_AT = field_offset(EventHeader, "size")  # where a record's u16 size sits
MISC_AT = field_offset(EventHeader, "misc")

# ------------------------------------------------------------------ perf_event_attr
# Every field up to PERF_ATTR_SIZE_VER8 (136 bytes).  Older, shorter attrs are zero-filled;
# longer (newer) ones keep their unknown tail in ``extra``.
EventAttrFields = Struct(
    "type" / Int32ul,
    "size" / Int32ul,
    "config" / Int64ul,
    "sample_period" / Int64ul,  # or sample_freq when flags & F_FREQ
    "sample_type" / Int64ul,
    "read_format" / Int64ul,
    "flags" / Int64ul,
    "wakeup_events" / Int32ul,
    "bp_type" / Int32ul,
    "config1" / Int64ul,
    "config2" / Int64ul,  # VER1 (72)
    "branch_sample_type" / Int64ul,  # VER2 (80)
    "sample_regs_user" / Int64ul,  # VER3 (96)
    "sample_stack_user" / Int32ul,
    "clockid" / Int32sl,
    "sample_regs_intr" / Int64ul,  # VER4 (104)
    "aux_watermark" / Int32ul,  # VER5 (112)
    "sample_max_stack" / Int16ul,
    "reserved_2" / Int16ul,
    "aux_sample_size" / Int32ul,  # VER6 (120)
    "aux_action" / Int32ul,
    "sig_data" / Int64ul,  # VER7 (128)
    "config3" / Int64ul,  # VER8 (136)
)
ATTR_SIZE_KNOWN = EventAttrFields.sizeof()  # 136
ATTR_SIZE_VER0 = 64
ATTR_SIZE_MAX = 4096  # beyond this an attr is corrupt, not merely newer


class _EventAttrAdapter(Adapter):
    """``attr.size`` bytes <-> a full Container (missing fields zero, unknown tail in ``extra``)."""

    def _decode(self, obj, context, path):
        raw = obj.raw
        attr = EventAttrFields.parse(raw[:ATTR_SIZE_KNOWN].ljust(ATTR_SIZE_KNOWN, b"\0"))
        attr.size = len(raw)
        attr.extra = raw[ATTR_SIZE_KNOWN:]
        return attr

    def _encode(self, obj, context, path):
        size = obj.get("size") or ATTR_SIZE_KNOWN
        fields = {k: obj.get(k, 0) for k in ATTR_FIELD_NAMES}
        fields["size"] = size
        raw = EventAttrFields.build(fields) + bytes(obj.get("extra", b""))
        raw = raw[:size].ljust(size, b"\0")
        return Container(_peek=size, raw=raw)


ATTR_FIELD_NAMES = [sc.name for sc in EventAttrFields.subcons]


def _attr_size(ctx) -> int:
    size = ctx._peek
    return ATTR_SIZE_VER0 if size == 0 else size


class _PeekAttrSize(Construct):
    """Read ``attr.size`` (offset 4) without consuming it; nothing is built."""

    def _parse(self, stream, context, path):
        pos = stream.tell()
        head = stream.read(8)
        stream.seek(pos)
        if len(head) < 8:
            raise StreamError("attr header truncated", path=path)
        size = int.from_bytes(head[4:8], "little")
        if size > ATTR_SIZE_MAX:
            raise ValidationError(f"attr.size {size} is larger than {ATTR_SIZE_MAX}", path=path)
        return size

    def _build(self, obj, stream, context, path):
        return obj

    def _sizeof(self, context, path):
        return 0


EventAttr = _EventAttrAdapter(Struct("_peek" / _PeekAttrSize(), "raw" / Bytes(_attr_size)))

# One entry of the attrs section: attr then a section holding its u64 ids.
FileAttr = Struct("attr" / EventAttr, "ids" / FileSection)

# ------------------------------------------------------------------ feature payloads
class _HeaderString(Adapter):
    """perf_header_string: ``u32 len; char str[len]`` with len = ALIGN(strlen+1, 64)."""

    def _decode(self, obj, context, path):
        return obj.split(b"\0", 1)[0].decode("utf-8", "replace")

    def _encode(self, obj, context, path):
        return padded_name(obj, NAME_ALIGN)


HeaderString = _HeaderString(Prefixed(Int32ul, GreedyBytes))
StringList = PrefixedArray(Int32ul, HeaderString)
NrCpus = Struct("nr_cpus_avail" / Int32ul, "nr_cpus_online" / Int32ul)
CompressedFeature = Struct(
    "version" / Int32ul, "type" / Int32ul, "level" / Int32ul, "ratio" / Int32ul,
    "mmap_len" / Int32ul)
EventDescEntry = Struct(
    "attr" / FixedSized(this._.attr_size, EventAttr),
    "nr_ids" / Int32ul,
    "name" / HeaderString,
    "ids" / Array(this.nr_ids, Int64ul),
)
EventDesc = Struct(
    "nr" / Int32ul, "attr_size" / Int32ul, "events" / Array(this.nr, EventDescEntry))
PmuCaps = PrefixedArray(Int32ul, Struct("name" / HeaderString, "value" / HeaderString))
SampleTime = Struct("first" / Int64ul, "last" / Int64ul)
GroupDesc = PrefixedArray(Int32ul, Struct(
    "name" / HeaderString, "leader_idx" / Int32ul, "nr_members" / Int32ul))

# build_id_event: header, pid, 20 id bytes + size byte (or 24 bytes of id), filename.
BUILD_ID_BYTES = 20  # perf's field for an id (BUILD_ID_SIZE); shorter ids are zero-padded
BuildIdHead = Struct(
    "header" / EventHeader,
    "pid" / Int32sl,
    "data" / Bytes(BUILD_ID_BYTES),
    "bid_size" / Int8ul,
    "reserved1" / Int8ul,
    "reserved2" / Int16ul,
)
BUILD_ID_EVENT_FIXED = BuildIdHead.sizeof()
BuildIdEvent = Struct(
    *BuildIdHead.subcons,
    "filename" / FixedSized(this.header.size - BUILD_ID_EVENT_FIXED, RecordName),
)


def build_id_hex(ev) -> str:
    """The id as perf prints it: ``size`` bytes when the size bit is set, else trailing
    zero words trimmed (quipper's rule; lld's 8-byte ids are stored zero-padded)."""
    if ev.header.misc & MISC_BUILD_ID_SIZE and 0 < ev.bid_size <= BUILD_ID_BYTES:
        return ev.data[: ev.bid_size].hex()
    data = ev.data
    while len(data) >= 4 and data[-4:] == b"\0\0\0\0":
        data = data[:-4]
    return data.hex()


# ------------------------------------------------------------------ record bodies
# Bodies start after the 8-byte header.  Where a sample_id trailer may follow, the reader
# slices it off first (its size is known from the attr), so names are GreedyBytes.
# The fixed parts are declared on their own too: the fast side-record path unpacks them.
MmapHead = Struct(
    "pid" / Int32sl, "tid" / Int32sl, "start" / Int64ul, "len" / Int64ul, "pgoff" / Int64ul)
MmapBody = Struct(*MmapHead.subcons, "filename" / RecordName)
Mmap2BuildId = Struct("build_id_size" / Int8ul, Padding(3), "build_id" / Bytes(BUILD_ID_BYTES))
Mmap2Inode = Struct("maj" / Int32ul, "min" / Int32ul, "ino" / Int64ul,
                    "ino_generation" / Int64ul)
assert Mmap2BuildId.sizeof() == Mmap2Inode.sizeof()  # a union in the kernel's struct
Mmap2Prot = Struct("prot" / Int32ul, "flags" / Int32ul)
Mmap2Body = Struct(
    *MmapHead.subcons,
    "u" / IfThenElse(this._params.misc & MISC_MMAP_BUILD_ID, Mmap2BuildId, Mmap2Inode),
    *Mmap2Prot.subcons,
    "filename" / RecordName)
CommHead = Struct("pid" / Int32sl, "tid" / Int32sl)
CommBody = Struct(*CommHead.subcons, "comm" / RecordName)
ForkExitBody = Struct(
    "pid" / Int32sl, "ppid" / Int32sl, "tid" / Int32sl, "ptid" / Int32sl, "time" / Int64ul)
LostBody = Struct("id" / Int64ul, "lost" / Int64ul)
LostSamplesBody = Struct("lost" / Int64ul)
ThrottleBody = Struct("time" / Int64ul, "id" / Int64ul, "stream_id" / Int64ul)
IdIndexEntry = Struct("id" / Int64ul, "idx" / Int64ul, "cpu" / Int64ul, "tid" / Int64ul)
IdIndexBody = Struct("nr" / Int64ul, "entries" / Array(this.nr, IdIndexEntry))
TimeConvBody = Struct(
    "time_shift" / Int64ul, "time_mult" / Int64ul, "time_zero" / Int64ul,
    "ext" / If(this._params.size >= 8 + 48, Struct(
        "time_cycles" / Int64ul, "time_mask" / Int64ul,
        "cap_user_time_zero" / Int8ul, "cap_user_time_short" / Int8ul, Padding(6))))
HeaderAttrBody = Struct("attr" / EventAttr, "ids" / GreedyRange(Int64ul))
EventTypeBody = Struct("event_id" / Int64ul, "name" / FixedSized(64, RecordName))
TracingDataBody = Struct("size" / Int32ul, Padding(4))
HeaderFeatureBody = Struct("feat_id" / Int64ul, "data" / GreedyBytes)
EventUpdateHead = Struct("type" / Int64ul, "id" / Int64ul)  # then the update's payload
EventUpdateBody = Struct(*EventUpdateHead.subcons, "data" / GreedyBytes)
CompressedBody = Struct("data" / GreedyBytes)
Compressed2Body = Struct(
    "data_size" / Int64ul, "data" / Bytes(this.data_size), "padding" / GreedyBytes)


def compressed2_record(data: bytes) -> bytes:
    """A COMPRESSED2 record: header.size padded to 8, data_size excluding the padding."""
    pad = b"\0" * (align(16 + len(data), 8) - 16 - len(data))
    return build_record(REC_COMPRESSED2, Compressed2Body.build(
        {"data_size": len(data), "data": data, "padding": pad}))
AuxtraceBody = Struct(
    "size" / Int64ul, "offset" / Int64ul, "reference" / Int64ul,
    "idx" / Int32ul, "tid" / Int32ul, "cpu" / Int32ul, "reserved" / Int32ul)
FinishedRoundBody = Struct()

RECORD_BODIES: dict[int, Construct] = {
    REC_MMAP: MmapBody, REC_MMAP2: Mmap2Body, REC_COMM: CommBody, REC_FORK: ForkExitBody,
    REC_EXIT: ForkExitBody, REC_LOST: LostBody, REC_LOST_SAMPLES: LostSamplesBody,
    REC_THROTTLE: ThrottleBody, REC_UNTHROTTLE: ThrottleBody, REC_ID_INDEX: IdIndexBody,
    REC_TIME_CONV: TimeConvBody, REC_HEADER_ATTR: HeaderAttrBody,
    REC_HEADER_EVENT_TYPE: EventTypeBody, REC_HEADER_TRACING_DATA: TracingDataBody,
    REC_HEADER_FEATURE: HeaderFeatureBody, REC_COMPRESSED: CompressedBody,
    REC_COMPRESSED2: Compressed2Body, REC_AUXTRACE: AuxtraceBody,
    REC_FINISHED_ROUND: FinishedRoundBody, REC_FINISHED_INIT: FinishedRoundBody,
}

# ------------------------------------------------------------------ SAMPLE fields
BranchEntry = Struct("from_" / Int64ul, "to" / Int64ul, "flags" / Int64ul)
BRANCH_ENTRY_SIZE = BranchEntry.sizeof()
BRANCH_COUNTER_SIZE = Int64ul.sizeof()  # PERF_SAMPLE_BRANCH_COUNTERS: one u64 per entry

# perf_branch_entry.flags: mispred:1 predicted:1 in_tx:1 abort:1 cycles:16 type:4 ...
# (include/uapi/linux/perf_event.h); ``type`` is filled with PERF_SAMPLE_BRANCH_TYPE_SAVE
BRF_MISPRED, BRF_PREDICTED, BRF_IN_TX, BRF_ABORT = 1, 2, 4, 8
BRF_CYCLES_SHIFT, BRF_CYCLES_MASK = 4, 0xFFFF
BRF_TYPE_SHIFT, BRF_TYPE_MASK = 20, 0xF
# enum perf_branch_type
BR_TYPE_COND, BR_TYPE_UNCOND, BR_TYPE_IND, BR_TYPE_CALL, BR_TYPE_IND_CALL = 1, 2, 3, 4, 5
BR_TYPE_RET, BR_TYPE_SYSCALL, BR_TYPE_SYSRET, BR_TYPE_COND_CALL, BR_TYPE_COND_RET = 6, 7, 8, 9, 10


@lru_cache(maxsize=256)
def sample_struct(sample_type: int, read_format: int = 0, branch_sample_type: int = 0,
                  nr_regs_user: int = 0, nr_regs_intr: int = 0,
                  branch_counters: bool = False) -> Struct:
    """The SAMPLE body (after the header) for one attr, fields in the kernel's order.

    ``branch_counters`` is true when any event in the sample's group asked for
    PERF_SAMPLE_BRANCH_COUNTERS; ``nr_regs_*`` are popcounts of the regs masks.
    """
    st = sample_type
    rf = read_format

    def has(bit: int) -> bool:
        return bool(st & bit)

    read_one = Struct(
        "value" / Int64ul,
        "time_enabled" / If(bool(rf & R_TOTAL_TIME_ENABLED), Int64ul),
        "time_running" / If(bool(rf & R_TOTAL_TIME_RUNNING), Int64ul),
        "id" / If(bool(rf & R_ID), Int64ul),
        "lost" / If(bool(rf & R_LOST), Int64ul))
    read_group = Struct(
        "nr" / Int64ul,
        "time_enabled" / If(bool(rf & R_TOTAL_TIME_ENABLED), Int64ul),
        "time_running" / If(bool(rf & R_TOTAL_TIME_RUNNING), Int64ul),
        "values" / Array(this.nr, Struct(
            "value" / Int64ul,
            "id" / If(bool(rf & R_ID), Int64ul),
            "lost" / If(bool(rf & R_LOST), Int64ul))))
    branch_stack = Struct(
        "nr" / Int64ul,
        "hw_idx" / If(bool(branch_sample_type & BR_HW_INDEX), Int64sl),
        "entries" / Array(this.nr, BranchEntry),
        "counters" / If(branch_counters, Array(this.nr, Int64ul)))

    def regs(n: int) -> Struct:
        return Struct("abi" / Int64ul, "regs" / If(this.abi != 0, Array(n, Int64ul)))

    return Struct(
        "identifier" / If(has(S_IDENTIFIER), Int64ul),
        "ip" / If(has(S_IP), Int64ul),
        "pid" / If(has(S_TID), Int32sl),
        "tid" / If(has(S_TID), Int32sl),
        "time" / If(has(S_TIME), Int64ul),
        "addr" / If(has(S_ADDR), Int64ul),
        "id" / If(has(S_ID), Int64ul),
        "stream_id" / If(has(S_STREAM_ID), Int64ul),
        "cpu" / If(has(S_CPU), Int32ul),
        "cpu_res" / If(has(S_CPU), Int32ul),
        "period" / If(has(S_PERIOD), Int64ul),
        "read" / If(has(S_READ), read_group if rf & R_GROUP else read_one),
        "callchain" / If(has(S_CALLCHAIN), PrefixedArray(Int64ul, Int64ul)),
        "raw" / If(has(S_RAW), Struct("size" / Int32ul, "data" / Bytes(this.size))),
        "branch_stack" / If(has(S_BRANCH_STACK), branch_stack),
        "regs_user" / If(has(S_REGS_USER), regs(nr_regs_user)),
        "stack_user" / If(has(S_STACK_USER), Struct(
            "size" / Int64ul, "data" / Bytes(this.size),
            "dyn_size" / If(this.size != 0, Int64ul))),
        "weight" / If(bool(st & S_WEIGHT_TYPE), Int64ul),
        "data_src" / If(has(S_DATA_SRC), Int64ul),
        "transaction" / If(has(S_TRANSACTION), Int64ul),
        "regs_intr" / If(has(S_REGS_INTR), regs(nr_regs_intr)),
        "phys_addr" / If(has(S_PHYS_ADDR), Int64ul),
        "cgroup" / If(has(S_CGROUP), Int64ul),
        "data_page_size" / If(has(S_DATA_PAGE_SIZE), Int64ul),
        "code_page_size" / If(has(S_CODE_PAGE_SIZE), Int64ul),
        "aux" / If(has(S_AUX), Struct("size" / Int64ul, "data" / Bytes(this.size))),
    )


def sample_fixed_fields(sample_type: int) -> list[tuple[str, str]]:
    """(name, struct code) of the fixed-size SAMPLE fields before the first variable one
    (READ), as :func:`sample_struct` declares them: a writer's fast packer uses these."""
    out = []
    for sc in sample_struct(sample_type).subcons:
        if sc.name == "read":
            break
        cond, field = sc.subcon.condfunc, sc.subcon.thensubcon  # If(bool, FormatField)
        if cond(None) if callable(cond) else cond:
            out.append((sc.name, field.fmtstr[1:]))
    return out


@lru_cache(maxsize=256)
def sample_id_struct(sample_type: int) -> Struct:
    """The ``sample_id_all`` trailer on non-SAMPLE records (IDENTIFIER is the *last* u64)."""
    st = sample_type
    return Struct(
        "pid" / If(bool(st & S_TID), Int32sl),
        "tid" / If(bool(st & S_TID), Int32sl),
        "time" / If(bool(st & S_TIME), Int64ul),
        "id" / If(bool(st & S_ID), Int64ul),
        "stream_id" / If(bool(st & S_STREAM_ID), Int64ul),
        "cpu" / If(bool(st & S_CPU), Int32ul),
        "cpu_res" / If(bool(st & S_CPU), Int32ul),
        "identifier" / If(bool(st & S_IDENTIFIER), Int64ul),
    )


@lru_cache(maxsize=256)
def sample_id_time_offset(sample_type: int) -> int:
    """Byte offset of ``time`` in the sample_id trailer (which must have S_TIME)."""
    return field_offset(sample_id_struct(sample_type), "time")


def sample_id_size(sample_type: int) -> int:
    """Bytes of the sample_id trailer (perf's ``evsel__id_hdr_size``)."""
    bits = (S_TID, S_TIME, S_ID, S_STREAM_ID, S_CPU, S_IDENTIFIER)
    return 8 * sum(1 for b in bits if sample_type & b)


def id_pos(sample_type: int) -> int:
    """u64 index of the event id in a SAMPLE body, or -1 (``__perf_evsel__calc_id_pos``)."""
    if sample_type & S_IDENTIFIER:
        return 0
    if not sample_type & S_ID:
        return -1
    return sum(1 for b in (S_IP, S_TID, S_TIME, S_ADDR) if sample_type & b)


def is_pos(sample_type: int) -> int:
    """u64 index of the id counted from the *end* of a non-SAMPLE record, or -1."""
    if sample_type & S_IDENTIFIER:
        return 1
    if not sample_type & S_ID:
        return -1
    return 1 + (1 if sample_type & S_CPU else 0) + (1 if sample_type & S_STREAM_ID else 0)


def build_record(rtype: int, body: bytes, misc: int = 0) -> bytes:
    """Header + body; the body length must leave the record size representable in u16."""
    size = EVENT_HEADER_SIZE + len(body)
    if size > 0xFFFF:
        raise ValueError(f"record of {size} bytes does not fit perf's u16 size field")
    return EventHeader.build({"type": rtype, "misc": misc, "size": size}) + body

