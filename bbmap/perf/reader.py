"""PerfData: a streaming, columnar reader of perf.data (file mode and pipe mode).

The file is mmapped; records are walked by a tight loop over their 8-byte headers and
SAMPLE records are collected as offsets and decoded in bulk by :mod:`bbmap.perf.samples`.
Side records (mmap, comm, fork, exit) are decoded with the construct declarations.
:meth:`PerfData.stream` yields :class:`SideRecords` and :class:`SampleBatch` in stream
order, at most ``chunk_samples`` samples at a time, so memory stays bounded whatever the
file size.  Bad input never raises past the constructor: what can be trusted is kept and
each fault becomes a diagnostic naming the file, the part and the byte offset.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field

import numpy as np
from construct import ConstructError

from bbmap.arrays import expand_ranges
from bbmap.errors import BBMapError, Diagnostics, library_words
from bbmap.formats import perfdata as fmt
from bbmap.perf.attrs import EventAttr
from bbmap.perf.compressed import InflateError, RecordInflater
from bbmap.perf.features import BuildIdEntry, parse_build_ids, parse_feature
from bbmap.perf.records import (
    SampleBatch,
    SideRecords,
)
from bbmap.perf.samples import SampleLayout, decode_samples, gather_u16, sample_ids
from bbmap.perf.side import BadRecord, decode_side

_HDR = fmt.EVENT_HEADER_STRUCT
_EH = fmt.EVENT_HEADER_SIZE
_RELEASE_STEP = 32 << 20  # give read pages back to the OS every 32 MiB
_U64, _U32 = fmt.U64_STRUCT, fmt.U32_STRUCT
_MAX_ATTRS = 4096
_SIDE_TYPES = frozenset((fmt.REC_MMAP, fmt.REC_MMAP2, fmt.REC_COMM, fmt.REC_FORK, fmt.REC_EXIT))
_HEADER_TYPES = frozenset((fmt.REC_HEADER_ATTR, fmt.REC_HEADER_FEATURE, fmt.REC_HEADER_BUILD_ID,
                           fmt.REC_EVENT_UPDATE, fmt.REC_HEADER_EVENT_TYPE))
_FILE_HEADER = {name: fmt.field_offset(fmt.FileHeader, name)
                for name in ("size", "attr_size", "attrs", "data")}
_SECTION = fmt.FileSection.sizeof()  # (offset, size) of a file section or feature
_SECTION_STRUCT = struct.Struct(fmt.struct_format(fmt.FileSection))
_LOST_AT = _EH + fmt.field_offset(fmt.LostBody, "lost")
_LOST_SAMPLES_AT = _EH + fmt.field_offset(fmt.LostSamplesBody, "lost")
_COMPRESSED2_DATA_AT = _EH + fmt.field_offset(fmt.Compressed2Body, "data")
_ID_INDEX_ENTRY = fmt.IdIndexEntry.sizeof()
_EVENT_UPDATE_HEAD = struct.Struct(fmt.struct_format(fmt.EventUpdateHead))


@dataclass
class _Stream:
    """Mutable state of one pass over the records."""

    chunk: int
    branches: bool
    seq: int = 0
    offs: list = field(default_factory=list)  # SAMPLE offsets in the current buffer
    seqs: list = field(default_factory=list)
    runs: list = field(default_factory=list)  # (offsets, seqs) arrays of same-size runs
    nruns: int = 0
    parts: list = field(default_factory=list)  # decoded SampleBatch pieces not yet yielded
    nparts: int = 0
    side: list = field(default_factory=list)
    counts: list = field(default_factory=lambda: [0] * 256)
    other_counts: dict = field(default_factory=dict)
    inflater: RecordInflater | None = None
    compressed_broken: bool = False
    bad_samples: int = 0
    first_bad_sample: tuple | None = None
    unknown_id_samples: int = 0
    bad_side: int = 0


def _same_size_run(st: _Stream, mv, off: int, size: int, seq: int, k: int) -> int:
    """How many of the next ``k`` records from ``off`` are samples of ``size`` bytes (all
    their headers checked at once); they join the stream's runs, numbered from ``seq``,
    after the single samples collected so far."""
    types = np.ndarray((k,), "<u4", mv, off, (size,))
    sizes = np.ndarray((k,), "<u2", mv, off + fmt.SIZE_AT, (size,))
    good = (types == fmt.REC_SAMPLE) & (sizes == size)
    m = k if good.all() else int(np.argmin(good))
    if st.offs:
        st.runs.append((np.array(st.offs, np.int64), np.array(st.seqs, np.int64)))
        st.nruns += len(st.offs)
        st.offs.clear()
        st.seqs.clear()
    st.runs.append((off + size * np.arange(m, dtype=np.int64),
                    seq + np.arange(m, dtype=np.int64)))
    st.nruns += m
    st.counts[fmt.REC_SAMPLE] += m
    return m


# a pipe read once per process: (st_dev, st_ino) -> its copy in an unnamed temporary file,
# so a second pass over the same pipe (spec/annotate.md) reads the same bytes
_SPOOLS: dict[tuple[int, int], object] = {}


def _spooled(fh, path: str):  # noqa: ANN001, ANN202 - binary file objects
    """A regular file holding what ``fh`` (a pipe, FIFO or device) yields, to be mmapped.
    The first 8 bytes are checked before anything else is read, so an endless stream
    that is not perf data (``/dev/zero``) is refused at once."""
    st = os.fstat(fh.fileno())
    key = (st.st_dev, st.st_ino)
    with fh:
        if key not in _SPOOLS:
            magic = fh.read(8)
            if magic not in (fmt.MAGIC, fmt.MAGIC_SWAPPED, b"PERFFILE"):
                if len(magic) < 8:
                    raise BBMapError(f"not perf data: only {len(magic)} bytes", file=path,
                                     offset=0)
                raise BBMapError(f"not perf data: magic {magic!r}", file=path,
                                 section="file header", offset=0)
            import shutil  # (a pipe's profile only: with tempfile, 2.7 ms of start-up)
            import tempfile

            tmp = tempfile.TemporaryFile(prefix="bbmap-pipe-")  # noqa: SIM115 - kept
            tmp.write(magic)
            shutil.copyfileobj(fh, tmp, 1 << 20)
            tmp.flush()
            _SPOOLS[key] = tmp
        return os.fdopen(os.dup(_SPOOLS[key].fileno()), "rb")


class PerfData:
    """A perf.data file; see ``spec/architecture.md`` for the contract."""

    # samples of one layout decode straight into their batch (_decode_one_layout); False:
    # through the general per-layout scatter (the reference tests hold it equal to)
    one_layout_fast = True

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.diagnostics = Diagnostics()
        self.attrs: list[EventAttr] = []
        self.features: dict = {}
        self.build_ids: list[BuildIdEntry] = []
        self.record_counts: dict[str, int] = {}
        self.lost = 0  # events lost (PERF_RECORD_LOST)
        self.lost_samples = 0  # samples lost (PERF_RECORD_LOST_SAMPLES)
        self.header: dict = {}
        self._id_keys = np.zeros(0, np.uint64)
        self._id_vals = np.zeros(0, np.int16)
        self._ids_dirty = False
        # header records already applied (a second stream() must not add them again)
        self._header_seen: set[int | tuple[int, int]] = set()
        self._released = 0
        self.position = 0  # byte offset the stream has decoded up to (progress)
        self.time_conv: dict | None = None  # from TIME_CONV
        self.id_index: dict[int, tuple[int, int, int]] = {}  # id -> (idx, cpu, tid)
        self.trust_end: int | None = None  # byte offset where a damaged stream stops
        try:
            # "-" is standard input, as for perf's -i -
            fh = open("/dev/stdin" if self.path == "-" else self.path, "rb")  # noqa: SIM115
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                fh = _spooled(fh, self.path)  # a pipe (perf record -o - | bbmap ...)
        except OSError as e:
            raise BBMapError(f"cannot open: {e.strerror}", file=self.path) from None
        with fh:
            self.file_size = os.fstat(fh.fileno()).st_size
            if self.file_size < fmt.PIPE_HEADER_SIZE:
                raise BBMapError(f"not perf data: only {self.file_size} bytes", file=self.path,
                                 offset=0)
            self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._mv = memoryview(self._mm)
        self._np = np.frombuffer(self._mm, dtype=np.uint8)
        magic = bytes(self._mv[:8])
        if magic == fmt.MAGIC_SWAPPED:
            raise BBMapError("opposite-endian (big-endian) perf.data is not supported",
                             file=self.path, section="file header", offset=0)
        if magic == b"PERFFILE":
            raise BBMapError("legacy v1 perf.data (magic PERFFILE) is not supported",
                             file=self.path, section="file header", offset=0)
        if magic != fmt.MAGIC:
            raise BBMapError(f"not perf data: magic {magic!r}", file=self.path,
                             section="file header", offset=0)
        hsize = _U64.unpack_from(self._mv, _FILE_HEADER["size"])[0]
        if hsize == fmt.PIPE_HEADER_SIZE:
            self.mode = "pipe"
            self._data_start, self._data_end = fmt.PIPE_HEADER_SIZE, self.file_size
            self._prescan_pipe()
        elif hsize in (fmt.FILE_HEADER_SIZE, fmt.FILE_HEADER_SIZE_OLD):
            self.mode = "file"
            self._read_file_header(hsize)
        else:
            raise BBMapError(f"unknown header size {hsize}", file=self.path,
                             section="file header", offset=8)

    def close(self) -> None:
        """Unmap the file (batches already yielded hold copies and stay valid)."""
        self._np = np.zeros(0, np.uint8)
        with contextlib.suppress(BufferError, ValueError):
            self._mv.release()
            self._mm.close()

    def __enter__(self) -> PerfData:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ header
    def _read_file_header(self, hsize: int) -> None:
        if self.file_size < hsize:
            raise BBMapError(f"file header truncated ({self.file_size} bytes)", file=self.path,
                             section="file header", offset=0)
        raw = bytes(self._mv[:hsize]).ljust(fmt.FILE_HEADER_SIZE, b"\0")
        h = fmt.FileHeader.parse(raw)
        self.header = {"size": hsize, "attr_size": h.attr_size,
                       "attrs": {"offset": h.attrs.offset, "size": h.attrs.size},
                       "data": {"offset": h.data.offset, "size": h.data.size}}
        if h.attr_size == 0:
            raise BBMapError("attr_size is 0", file=self.path, section="file header",
                             offset=_FILE_HEADER["attr_size"])
        if h.attrs.size and not (fmt.ATTR_SIZE_VER0 + _SECTION <= h.attr_size
                                 <= fmt.ATTR_SIZE_MAX + _SECTION
                                 and h.attrs.size % h.attr_size == 0):
            # no event could be read: every sample would be dropped; say so, keep the rest
            self.diagnostics.error(
                f"attr_size {h.attr_size:#x} does not divide the attrs section "
                f"({h.attrs.size:#x} bytes) into perf_event_attr entries "
                f"({fmt.ATTR_SIZE_VER0 + _SECTION} to {fmt.ATTR_SIZE_MAX + _SECTION} bytes "
                "each): no event can be read, so no sample can be decoded",
                file=self.path, section="file header", offset=_FILE_HEADER["attr_size"])
            nattrs = 0
        else:
            nattrs = h.attrs.size // h.attr_size
        if nattrs > _MAX_ATTRS or h.attrs.offset + h.attrs.size > self.file_size:
            raise BBMapError(f"attrs section ({nattrs} entries at {h.attrs.offset:#x}) lies "
                             "outside the file", file=self.path, section="file header",
                             offset=_FILE_HEADER["attrs"])
        for i in range(nattrs):
            pos = h.attrs.offset + i * h.attr_size
            where = {"file": self.path, "section": f"attr {i}", "offset": pos}
            try:
                attr = fmt.EventAttr.parse(bytes(self._mv[pos:pos + h.attr_size]))
                ids_sec = fmt.FileSection.parse(
                    bytes(self._mv[pos + attr.size:pos + attr.size + _SECTION]))
            except ConstructError as e:
                raise BBMapError(f"cannot decode perf_event_attr: {_short(e)}", **where) from None
            ids: list[int] = []
            if ids_sec.size:
                if ids_sec.offset + ids_sec.size > self.file_size or ids_sec.size % 8:
                    self.diagnostics.warn(f"ids section {ids_sec.offset:#x}+{ids_sec.size} "
                                          "lies outside the file; ids ignored", **where)
                else:
                    ids = np.frombuffer(self._mm, "<u8", ids_sec.size // 8,
                                        ids_sec.offset).tolist()
            self._add_attr(EventAttr.from_container(attr, ids))
        start, size = h.data.offset, h.data.size
        if start < hsize or start > self.file_size:
            raise BBMapError(f"data section offset {start:#x} outside the file",
                             file=self.path, section="file header",
                             offset=_FILE_HEADER["data"])
        finalized = size != 0
        end = start + size if finalized else self.file_size
        if not finalized:
            self.diagnostics.warn("header never finalized (data size 0; perf killed?); "
                                  "reading records to the end of the file",
                                  file=self.path, section="file header",
                                  offset=_FILE_HEADER["data"] + fmt.field_offset(
                                      fmt.FileSection, "size"))
        elif end > self.file_size:
            self.diagnostics.warn(f"data section ends at {end:#x} but the file has "
                                  f"{self.file_size:#x} bytes; records after that are lost",
                                  file=self.path, section="data", offset=self.file_size)
            end = self.file_size
            finalized = False
        self._data_start, self._data_end = start, end
        if finalized and hsize == fmt.FILE_HEADER_SIZE:
            self._read_feature_sections(h, end)
        self._name_events_from_desc()

    def _read_feature_sections(self, h, table: int) -> None:
        bits = [b for b in range(fmt.HEADER_FEAT_BITS)
                if h.adds_features[b // 64] >> (b % 64) & 1]
        for i, bit in enumerate(bits):
            pos = table + _SECTION * i
            if pos + _SECTION > self.file_size:
                self.diagnostics.warn(f"feature table truncated ({len(bits) - i} of "
                                      f"{len(bits)} entries missing)", file=self.path,
                                      section="feature table", offset=pos)
                return
            off, size = _SECTION_STRUCT.unpack_from(self._mv, pos)
            if bit >= fmt.HEADER_LAST_FEATURE:
                continue
            if off + size > self.file_size:
                self.diagnostics.warn(f"feature {fmt.HEADER_FEATURE_NAMES.get(bit, bit)} section "
                                      "lies outside the file", file=self.path,
                                      section="feature table", offset=pos)
                continue
            parse_feature(bit, bytes(self._mv[off:off + size]), self.diagnostics, self.path,
                          off, self.features, self.build_ids)

    def _name_events_from_desc(self) -> None:
        desc = self.features.get("event_desc")
        if not isinstance(desc, list):
            return
        by_id = {i: d["name"] for d in desc for i in d["ids"]}
        for k, a in enumerate(self.attrs):
            names = {by_id[i] for i in a.ids if i in by_id}
            if len(names) == 1:
                a.name = names.pop()
            elif len(desc) == len(self.attrs):
                a.name = desc[k]["name"]

    def _add_attr(self, attr: EventAttr) -> None:
        self.attrs.append(attr)
        self._ids_dirty = True

    def _id_table(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids_dirty:
            pairs = sorted({(i, k) for k, a in enumerate(self.attrs) for i in a.ids})
            self._id_keys = np.array([p[0] for p in pairs], np.uint64)
            self._id_vals = np.array([p[1] for p in pairs], np.int16)
            self._ids_dirty = False
        return self._id_keys, self._id_vals

    def event_of_id(self, ident: int) -> int:
        if len(self.attrs) == 1 or ident == 0:
            return 0
        keys, vals = self._id_table()
        i = int(np.searchsorted(keys, np.uint64(ident)))
        return int(vals[i]) if i < len(keys) and keys[i] == ident else -1

    # ------------------------------------------------------------------ pipe mode
    def _prescan_pipe(self) -> None:
        """Read the synthesized header records at the start so ``attrs`` is known now."""
        mv, off, end = self._mv, self._data_start, self._data_end
        while off + _EH <= end:
            typ, misc, size = _HDR.unpack_from(mv, off)
            if size < _EH or off + size > end:
                break
            if typ == fmt.REC_SAMPLE or typ < fmt.USER_TYPE_START and self.attrs:
                break
            nxt = off + size + _payload_after(typ, mv, off, size)
            if typ in _HEADER_TYPES:
                self._header_record(typ, misc, mv, off, size, None)
                self._header_seen.add(off)
            off = nxt
        if not self.attrs:
            self.diagnostics.warn("pipe-mode data has no HEADER_ATTR before its first record",
                                  file=self.path, section="data", offset=off)
        self._name_events_from_desc()

    def _header_record(self, typ: int, misc: int, mv, off: int, size: int, origin) -> None:
        body = bytes(mv[off + _EH:off + size])
        where = self._where(off, origin)
        try:
            if typ == fmt.REC_HEADER_ATTR:
                b = fmt.HeaderAttrBody.parse(body)
                self._add_attr(EventAttr.from_container(b.attr, list(b.ids)))
            elif typ == fmt.REC_HEADER_FEATURE:
                b = fmt.HeaderFeatureBody.parse(body)
                if b.feat_id < fmt.HEADER_LAST_FEATURE:
                    parse_feature(b.feat_id, b.data, self.diagnostics, self.path,
                                  off + _EH + fmt.field_offset(fmt.HeaderFeatureBody, "data"),
                                  self.features, self.build_ids)
            elif typ == fmt.REC_HEADER_BUILD_ID:
                self.build_ids.extend(parse_build_ids(bytes(mv[off:off + size]),
                                                      self.diagnostics, self.path,
                                                      "HEADER_BUILD_ID", off))
            elif typ == fmt.REC_EVENT_UPDATE and len(body) >= _EVENT_UPDATE_HEAD.size:
                utype, ident = _EVENT_UPDATE_HEAD.unpack_from(body)
                if utype == fmt.EVENT_UPDATE_NAME:
                    k = self.event_of_id(ident)
                    if k >= 0 and k < len(self.attrs):
                        self.attrs[k].name = fmt.RecordName.parse(
                            body[_EVENT_UPDATE_HEAD.size:])
        except ConstructError as e:
            self.diagnostics.warn(f"cannot decode {fmt.RECORD_NAMES.get(typ, typ)} record: "
                                  f"{_short(e)}", **where)

    def _info_record(self, typ: int, mv, off: int, size: int, origin) -> None:
        """TIME_CONV (perf time <-> TSC) and ID_INDEX (id -> cpu/tid), kept for callers."""
        body = bytes(mv[off + _EH:off + size])
        try:
            if typ == fmt.REC_TIME_CONV:
                b = fmt.TimeConvBody.parse(body, size=size)
                self.time_conv = {"time_shift": b.time_shift, "time_mult": b.time_mult,
                                  "time_zero": b.time_zero}
                if b.ext is not None:
                    self.time_conv.update(time_cycles=b.ext.time_cycles,
                                          time_mask=b.ext.time_mask)
            else:
                nr = _U64.unpack_from(body)[0] if len(body) >= _U64.size else 0
                if nr > (len(body) - _U64.size) // _ID_INDEX_ENTRY:
                    raise ValueError(f"ID_INDEX claims {nr} entries")
                for e in fmt.IdIndexBody.parse(body).entries:
                    self.id_index[e.id] = (e.idx, e.cpu, e.tid)
        except (ConstructError, ValueError) as e:
            self.diagnostics.warn(f"cannot decode {fmt.RECORD_NAMES[typ]} record: {_short(e)}",
                                  **self._where(off, origin))

    def _where(self, off: int, origin) -> dict:
        if origin is None:
            return {"file": self.path, "section": "data", "offset": off}
        return {"file": self.path, "section": f"COMPRESSED record at {origin:#x}, "
                "decompressed stream", "offset": off}

    # ------------------------------------------------------------------ streaming
    def stream(self, chunk_samples: int = 65536, *, branches: bool = True
               ) -> Iterator[SampleBatch | SideRecords]:
        """Yield side records and sample batches in stream order (bounded memory)."""
        st = _Stream(chunk=max(1, int(chunk_samples)), branches=branches)
        self.lost = self.lost_samples = 0
        self._released = 0
        self.position = 0
        yield from self._walk(st, self._mv, self._np, self._data_start, self._data_end, None)
        yield from self._flush_samples(st, self._np)
        if st.side:
            yield SideRecords(st.side)
            st.side = []
        self._finish(st)

    def _finish(self, st: _Stream) -> None:
        counts = {fmt.RECORD_NAMES.get(t, f"UNKNOWN_{t}"): n
                  for t, n in enumerate(st.counts) if n}
        for t, n in st.other_counts.items():
            counts[fmt.RECORD_NAMES.get(t, f"UNKNOWN_{t}")] = n
        self.record_counts = counts
        w = {"file": self.path, "section": "data"}
        if st.bad_samples:
            off, origin = st.first_bad_sample
            self.diagnostics.warn(f"{st.bad_samples} SAMPLE record(s) too short for their "
                                  "sample_type were dropped (first here)",
                                  **self._where(off, origin))
        if st.unknown_id_samples:
            self.diagnostics.warn(f"{st.unknown_id_samples} SAMPLE record(s) with an id no "
                                  "attr claims were dropped", **w)
        if st.bad_side:
            self.diagnostics.warn(f"{st.bad_side} side record(s) could not be decoded and "
                                  "were skipped", **w)
        if st.inflater is not None and st.inflater.carry:
            self.diagnostics.warn(f"compressed stream ends inside a record "
                                  f"({len(st.inflater.carry)} bytes dropped)", **w)
        # a second pass finds the same faults: report each once
        self.diagnostics.items = list(dict.fromkeys(self.diagnostics.items))

    def progress_fraction(self) -> float | None:
        """How far through the data section the stream is (0..1), file mode only (a pipe's
        length is unknown; compressed records count where they start)."""
        if self.mode != "file" or self._data_end <= self._data_start:
            return None
        done = self.position - self._data_start
        return min(1.0, max(0.0, done / (self._data_end - self._data_start)))

    def samples(self, chunk_samples: int = 65536, *, branches: bool = True
                ) -> Iterator[SampleBatch]:
        """Only the sample batches of :meth:`stream`."""
        for item in self.stream(chunk_samples, branches=branches):
            if isinstance(item, SampleBatch):
                yield item

    def read_all(self) -> None:
        """Walk the whole stream once (fills record_counts, lost, pipe-mode features)."""
        for _ in self.stream(branches=False):
            pass

    def _walk(self, st: _Stream, mv, npbuf, start: int, end: int, origin
              ) -> Iterator[SampleBatch | SideRecords]:
        """Walk one buffer's records; returns the offset where walking stopped."""
        off = start
        seq = st.seq
        counts = st.counts
        offs, seqs = st.offs, st.seqs
        offs_append, seqs_append = offs.append, seqs.append
        chunk = st.chunk - st.nparts
        unpack = _HDR.unpack_from
        last_size, probe, cooldown = -1, 64, 0
        while True:
            if off + _EH > end:
                if off < end and origin is None:
                    self._truncated(st, off, end, "a partial record header")
                break
            typ, misc, size = unpack(mv, off)
            nxt = off + size
            if typ == fmt.REC_SAMPLE and size >= _EH and nxt <= end:
                if st.side:
                    st.seq = seq
                    yield SideRecords(st.side)
                    st.side = []
                if size == last_size and cooldown <= 0:
                    # a run of same-size samples: check the next headers all at once
                    k = min(probe, (end - off) // size, chunk - len(offs) - st.nruns)
                    if k >= 8:
                        m = _same_size_run(st, mv, off, size, seq, k)
                        seq += m
                        off += m * size
                        if m == k:
                            probe = min(probe * 4, 1 << 16)
                        else:
                            probe, cooldown = 64, 16
                        if st.nruns + len(offs) >= chunk:
                            st.seq = seq
                            yield from self._flush_samples(st, npbuf, origin)
                            chunk = st.chunk
                            if origin is None:
                                self._release(off)
                        continue
                cooldown -= 1
                last_size = size
                counts[fmt.REC_SAMPLE] += 1
                offs_append(off)
                seqs_append(seq)
                seq += 1
                if len(offs) + st.nruns >= chunk:
                    st.seq = seq
                    yield from self._flush_samples(st, npbuf, origin)
                    chunk = st.chunk
                    if origin is None:
                        self._release(off)
                off = nxt
                continue
            last_size = -1
            if size < _EH:
                if origin is None:
                    self._stop(st, off, f"record size {size} (type {typ}) is below 8; "
                               "the rest of the stream cannot be trusted", origin)
                else:
                    self._stop(st, off, f"record size {size} (type {typ}) is below 8; "
                               "the rest of the compressed stream is skipped", origin)
                    st.compressed_broken = True
                break
            nxt += _payload_after(typ, mv, off, size)
            if nxt > end:
                if origin is None:
                    self._truncated(st, off, end, f"a {fmt.RECORD_NAMES.get(typ, typ)} "
                                    f"record of {nxt - off} bytes")
                break
            if typ < 256:
                counts[typ] += 1
            else:
                st.other_counts[typ] = st.other_counts.get(typ, 0) + 1
            st.seq = seq + 1
            new_chunk = yield from self._other_record(st, typ, misc, mv, npbuf, off, size, seq,
                                                      origin)
            seq = st.seq
            if new_chunk is not None:
                chunk = new_chunk
            off = nxt
        st.seq = seq
        if origin is not None:
            # samples of a decompressed buffer must be decoded before the buffer goes away
            yield from self._flush_samples(st, npbuf, origin, decode_only=True)
        return off

    def _other_record(self, st: _Stream, typ: int, misc: int, mv, npbuf, off: int,
                      size: int, seq_here: int, origin
                      ) -> Generator[SampleBatch | SideRecords, None, int | None]:
        """One record other than a sample, numbered ``seq_here`` (``st.seq`` is the next
        number): side records are kept in stream order after the samples before them,
        compressed ones walked, the rest read into the reader's fields.  Returns the
        walk's new sample budget when samples were flushed (None: unchanged)."""
        if typ in _SIDE_TYPES:
            new_chunk = None
            if st.offs or st.runs or st.parts:
                yield from self._flush_samples(st, npbuf, origin)
                new_chunk = st.chunk
            rec = self._side_record(st, typ, misc, mv, off, size, seq_here, origin)
            if rec is not None:
                st.side.append(rec)
            if origin is None and off - self._released >= _RELEASE_STEP:
                self._release(off)  # (pages fault back in if still needed)
            return new_chunk
        if typ in (fmt.REC_COMPRESSED, fmt.REC_COMPRESSED2):
            yield from self._flush_samples(st, npbuf, origin, decode_only=True)
            if origin is None:
                self.position = off
            yield from self._compressed(st, typ, mv, off, size)
            if origin is None and off - self._released >= _RELEASE_STEP:
                self._release(off)
            return st.chunk - st.nparts
        if typ == fmt.REC_TIME_CONV or typ == fmt.REC_ID_INDEX:
            self._info_record(typ, mv, off, size, origin)
        elif typ == fmt.REC_LOST and size >= _LOST_AT + _U64.size:
            self.lost += _U64.unpack_from(mv, off + _LOST_AT)[0]
        elif typ == fmt.REC_LOST_SAMPLES and size >= _LOST_SAMPLES_AT + _U64.size:
            self.lost_samples += _U64.unpack_from(mv, off + _LOST_SAMPLES_AT)[0]
        elif typ in _HEADER_TYPES:
            key = off if origin is None else (origin, off)
            if key not in self._header_seen:
                self._header_seen.add(key)
                self._header_record(typ, misc, mv, off, size, origin)
        return None

    def _release(self, upto: int) -> None:
        """Drop mapped pages already decoded (copies were taken), so RSS stays bounded."""
        upto &= ~(mmap.PAGESIZE - 1)
        if upto - self._released >= _RELEASE_STEP:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                self._mm.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
            self._released = upto

    def _truncated(self, st: _Stream, off: int, end: int, what: str) -> None:
        self.trust_end = off
        self.diagnostics.warn(f"stream truncated: {what} runs past the end at {end:#x}; "
                              "every complete record before this offset was kept",
                              file=self.path, section="data", offset=off)

    def _stop(self, st: _Stream, off: int, msg: str, origin) -> None:
        if origin is None:
            self.trust_end = off
        self.diagnostics.error(msg, **self._where(off, origin))

    def _compressed(self, st: _Stream, typ: int, mv, off: int, size: int):
        if st.compressed_broken:
            return
        if st.inflater is None:
            mmap_len = (self.features.get("compressed") or {}).get("mmap_len", 0)
            st.inflater = RecordInflater(max(64 << 20, 4 * int(mmap_len or 0)))
        if typ == fmt.REC_COMPRESSED2:
            at = _COMPRESSED2_DATA_AT
            if size < at:
                return
            dsize = _U64.unpack_from(mv, off + _EH)[0]
            payload = mv[off + at:off + at + min(dsize, size - at)]
        else:
            payload = mv[off + _EH:off + size]
        try:
            inner = st.inflater.inflate(payload)
        except InflateError as e:
            st.compressed_broken = True
            self.diagnostics.error(f"{e}; the rest of the compressed stream is skipped",
                                   file=self.path, section="data", offset=off)
            return
        inner_np = np.frombuffer(inner, np.uint8)
        stop = yield from self._walk(st, memoryview(inner), inner_np, 0, len(inner), off)
        if not st.compressed_broken and stop < len(inner):
            st.inflater.keep(inner[stop:])

    # ------------------------------------------------------------------ samples
    def _flush_samples(self, st: _Stream, npbuf, origin=None, decode_only: bool = False
                       ) -> Iterator[SampleBatch]:
        if st.offs or st.runs:
            if st.offs:
                st.runs.append((np.array(st.offs, np.int64), np.array(st.seqs, np.int64)))
            if len(st.runs) == 1:
                offs, seqs = st.runs[0]
            else:
                offs = np.concatenate([r[0] for r in st.runs])
                seqs = np.concatenate([r[1] for r in st.runs])
            if origin is None and len(offs):
                self.position = max(self.position, int(offs[-1]))  # progress (file mode)
            part = self._decode_part(st, npbuf, offs, seqs, origin)
            st.offs.clear()
            st.seqs.clear()
            st.runs = []
            st.nruns = 0
            if part is not None and len(part):
                st.parts.append(part)
                st.nparts += len(part)
        if st.parts and (not decode_only or st.nparts >= st.chunk):
            batch = SampleBatch.concat(st.parts)
            st.parts = []
            st.nparts = 0
            yield batch

    def _decode_part(self, st: _Stream, buf: np.ndarray, offs: np.ndarray, seqs: np.ndarray,
                     origin) -> SampleBatch | None:
        n = len(offs)
        if not self.attrs:
            st.unknown_id_samples += n
            return None
        if len(self.attrs) == 1:
            ev = np.zeros(n, np.int16)
        else:
            ids = sample_ids(buf, offs, self.attrs[0].sample_type)
            keys, vals = self._id_table()
            i = np.minimum(np.searchsorted(keys, ids), max(len(keys) - 1, 0))
            found = (keys[i] == ids) if len(keys) else np.zeros(n, bool)
            ev = np.where(found, vals[i] if len(keys) else 0, -1).astype(np.int16)
            ev[ids == 0] = 0
        misc = gather_u16(buf, offs + fmt.MISC_AT)
        keep = ev >= 0
        nkeep = int(keep.sum())
        st.unknown_id_samples += n - nkeep
        evs = [0] if len(self.attrs) == 1 else \
            np.flatnonzero(np.bincount(ev[keep].astype(np.int64))).tolist()
        layouts: dict[SampleLayout, list[int]] = {}
        for k in evs:
            layouts.setdefault(self._layout(k), []).append(k)
        if len(layouts) == 1 and nkeep == n and self.one_layout_fast:
            return self._decode_one_layout(st, buf, offs, seqs, origin, ev, misc, layouts)
        out = SampleBatch(
            seq=seqs, pid=np.full(n, -1, np.int32), tid=np.full(n, -1, np.int32),
            time=np.zeros(n, np.uint64), cpumode=(misc & fmt.MISC_CPUMODE_MASK).astype(np.uint8),
            ip=np.zeros(n, np.uint64), period=np.zeros(n, np.uint64), event=ev)
        counts = np.zeros(n, np.int64)
        pieces = []
        for layout, evs in layouts.items():
            idx = np.flatnonzero(np.isin(ev, evs))
            d = decode_samples(buf, offs[idx], layout, st.branches)
            out.ip[idx] = d.ip
            out.pid[idx] = d.pid
            out.tid[idx] = d.tid
            out.time[idx] = d.time
            if layout.sample_type & fmt.S_PERIOD:
                out.period[idx] = d.period
            else:
                out.period[idx] = np.array([self.attrs[k].sample_period for k in evs],
                                           np.uint64)[np.searchsorted(evs, ev[idx])]
            if d.bad.any():
                nbad = int(d.bad.sum())
                if st.first_bad_sample is None:
                    st.first_bad_sample = (int(offs[idx][d.bad][0]), origin)
                st.bad_samples += nbad
                keep[idx[d.bad]] = False
            counts[idx] = np.diff(d.br_ptr)
            pieces.append((idx, d))
        if len(pieces) == 1 and len(pieces[0][0]) == n:  # one layout, every sample: the
            out.br_ptr = pieces[0][1].br_ptr  # decoded columns are the batch's (no copy)
            out.br_from, out.br_to, out.br_flags = (pieces[0][1].br_from,
                                                     pieces[0][1].br_to, pieces[0][1].br_flags)
            return out if keep.all() else out.select(keep)
        br_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=br_ptr[1:])
        total = int(br_ptr[-1])
        out.br_from = np.zeros(total, np.uint64)
        out.br_to = np.zeros(total, np.uint64)
        out.br_flags = np.zeros(total, np.uint64)
        for idx, d in pieces:
            c = np.diff(d.br_ptr)
            tot = int(d.br_ptr[-1])
            if not tot:
                continue
            dest = expand_ranges(br_ptr[idx], c)
            out.br_from[dest] = d.br_from
            out.br_to[dest] = d.br_to
            out.br_flags[dest] = d.br_flags
        out.br_ptr = br_ptr
        if not keep.all():
            out = out.select(keep)
        return out

    def _decode_one_layout(self, st: _Stream, buf: np.ndarray, offs: np.ndarray,
                           seqs: np.ndarray, origin, ev: np.ndarray, misc: np.ndarray,
                           layouts: dict[SampleLayout, list[int]]) -> SampleBatch:
        """:meth:`_decode_part` when every sample has a known event of one layout (one
        event, the usual case): the decoded columns are the batch's, with no scatter
        through an index of every sample."""
        [(layout, evs)] = layouts.items()
        n = len(offs)
        d = decode_samples(buf, offs, layout, st.branches)
        if layout.sample_type & fmt.S_PERIOD:
            period = d.period
        elif len(evs) == 1:
            period = np.full(n, self.attrs[evs[0]].sample_period, np.uint64)
        else:
            period = np.array([self.attrs[k].sample_period for k in evs],
                              np.uint64)[np.searchsorted(evs, ev)]
        # absent fields are one shared zero column in ``d``: each gets its own
        ip = d.ip if layout.sample_type & fmt.S_IP else np.zeros(n, np.uint64)
        time = d.time if layout.sample_type & fmt.S_TIME else np.zeros(n, np.uint64)
        out = SampleBatch(seq=seqs, pid=d.pid, tid=d.tid, time=time,
                          cpumode=(misc & fmt.MISC_CPUMODE_MASK).astype(np.uint8), ip=ip,
                          period=period, event=ev, br_ptr=d.br_ptr, br_from=d.br_from,
                          br_to=d.br_to, br_flags=d.br_flags)
        if d.bad.any():
            if st.first_bad_sample is None:
                st.first_bad_sample = (int(offs[d.bad][0]), origin)
            st.bad_samples += int(d.bad.sum())
            out = out.select(~d.bad)
        return out

    def _layout(self, k: int) -> SampleLayout:
        """The SAMPLE layout of attr ``k``; branch counters follow the whole group (perf's
        ``evsel__has_branch_counters``), groups coming from the GROUP_DESC feature."""
        group = [k]
        for g in self.features.get("group_desc") or []:
            lo, n = g.get("leader", -1), g.get("members", 0)
            if lo <= k < lo + n:
                group = list(range(lo, min(lo + n, len(self.attrs))))
        counters = any(self.attrs[j].branch_sample_type & fmt.BR_COUNTERS for j in group)
        return SampleLayout.of(self.attrs[k], counters)

    # ------------------------------------------------------------------ side records
    def _trailer_attr(self, mv, off: int, size: int) -> EventAttr | None:
        a0 = self.attrs[0] if self.attrs else None
        if a0 is None or not a0.sample_id_all:
            return None
        if len(self.attrs) > 1 and a0.sample_type & fmt.S_IDENTIFIER and size >= _EH + _U64.size:
            # IDENTIFIER is the trailer's last u64
            k = self.event_of_id(_U64.unpack_from(mv, off + size - _U64.size)[0])
            if k > 0:
                return self.attrs[k]
        return a0

    def _side_record(self, st: _Stream, typ: int, misc: int, mv, off: int, size: int,
                     seq: int, origin):
        attr = self._trailer_attr(mv, off, size)
        sample_type = attr.sample_type if attr is not None else -1
        try:
            return decode_side(typ, misc, mv, off, size, sample_type, seq)
        except (ConstructError, ValueError, struct.error) as e:
            st.bad_side += 1
            if st.bad_side == 1:
                why = f" ({e})" if isinstance(e, BadRecord) else ""
                self.diagnostics.warn(f"cannot decode {fmt.RECORD_NAMES[typ]} record of "
                                      f"{size} bytes{why}; skipped", **self._where(off, origin))
            return None


def _payload_after(typ: int, mv, off: int, size: int) -> int:
    """Bytes that follow a record outside its ``size``: AUXTRACE data, TRACING_DATA."""
    if typ == fmt.REC_AUXTRACE and size >= _EH + _U64.size:
        return _U64.unpack_from(mv, off + _EH + fmt.field_offset(fmt.AuxtraceBody, "size"))[0]
    if typ == fmt.REC_HEADER_TRACING_DATA and size >= _EH + _U32.size:
        return fmt.align(_U32.unpack_from(mv, off + _EH)[0], 8)
    return 0


def _short(e: Exception) -> str:
    """An exception met while decoding, in bbmap's words (no construct parse path)."""
    if isinstance(e, BadRecord) or type(e) is ValueError:  # raised by bbmap, in its words
        return str(e).splitlines()[0][:200]
    return library_words(e)[:200]
