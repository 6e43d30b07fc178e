"""PerfWriter: valid perf.data (file or pipe mode, optional zstd) that real perf reads.

Everything except SAMPLE records is built with the construct declarations in
``bbmap.formats.perfdata``.  Samples use a precompiled ``struct`` packer for speed (the
writer must stream gigabyte LBR files); the tests prove its bytes equal to
``sample_struct(...).build``.  Records go straight to a temporary file beside the target,
so memory does not grow with the file; :meth:`close` writes the feature sections, then
the header, and renames the file into place (a reader sees the old file or the new one).
"""

from __future__ import annotations

import contextlib
import os
import platform
import struct
from collections.abc import Iterable, Sequence

import numpy as np
import zstandard

from bbmap.atomic import atomic_open
from bbmap.formats import perfdata as fmt
from bbmap.perf.records import SampleBatch

# perf 6.1 rejects attrs longer than its own struct (VER7, 128 bytes).
DEFAULT_ATTR_SIZE = 128
DEFAULT_SAMPLE_TYPE = fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
EVENT_ID = 1
_COMP_CHUNK = 32 << 10  # uncompressed bytes per COMPRESSED record (perf's buffer is mmap_len)
_COMP_MMAP_LEN = 129 * 4096
_MAX_COMP_PAYLOAD = 0xFFFF - 8
_PRECISE_IP_SHIFT = 15  # perf_event_attr: precise_ip is the 2-bit field at flag bit 15


def event_modifiers(event_name: str) -> str:
    """The modifier letters after the last ``:`` of a perf event name (``upp`` of
    ``instructions:upp``), "" without any; a PMU event ``cpu/event=0xc0/`` has none."""
    _, colon, mods = event_name.rpartition(":")
    return mods if colon and mods.isalpha() else ""


class PerfWriter:
    """Write one event's samples and side records; see ``spec/architecture.md``."""

    def __init__(self, path: str | os.PathLike, *, pipe: bool = False,
                 sample_type: int | None = None, branch_sample_type: int = 0,
                 event_name: str = "cycles:u", attr_type: int = 0, config: int = 0,
                 compress: bool = False, sample_period: int = 1,
                 attr_size: int = DEFAULT_ATTR_SIZE, hostname: str | None = None,
                 cmdline: Sequence[str] | None = None, precise_ip: int | None = None
                 ) -> None:
        """``event_name`` is also parsed the way ``perf record -e`` parses it: ``u``
        without ``k`` sets exclude_kernel and exclude_hv, each ``p`` raises precise_ip
        (``instructions:upp``: 2), unless ``precise_ip`` is given (0-3)."""
        if sample_type is None:
            sample_type = DEFAULT_SAMPLE_TYPE | (fmt.S_BRANCH_STACK if branch_sample_type else 0)
        unsupported = sample_type & ~(fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
                                      | fmt.S_BRANCH_STACK | fmt.S_CPU | fmt.S_ID
                                      | fmt.S_IDENTIFIER | fmt.S_ADDR | fmt.S_STREAM_ID)
        if unsupported:
            raise ValueError(f"the writer does not produce sample_type bits {unsupported:#x}")
        if branch_sample_type & fmt.BR_COUNTERS:
            raise ValueError("the writer does not produce branch counters")
        self.path = os.fspath(path)
        self.pipe = pipe
        self.sample_type = sample_type
        self.branch_sample_type = branch_sample_type
        self.event_name = event_name
        self.compress = compress
        self.hostname = hostname if hostname is not None else platform.node()
        self.cmdline = list(cmdline) if cmdline is not None else ["bbmap", "PerfWriter"]
        flags = (fmt.F_DISABLED | fmt.F_INHERIT | fmt.F_MMAP | fmt.F_COMM | fmt.F_SAMPLE_ID_ALL
                 | fmt.F_MMAP2 | fmt.F_COMM_EXEC)
        mods = event_modifiers(event_name)
        if "u" in mods and "k" not in mods:
            flags |= fmt.F_EXCLUDE_KERNEL | fmt.F_EXCLUDE_HV
        if precise_ip is None:
            precise_ip = mods.count("p")
        if not 0 <= precise_ip <= 3:
            raise ValueError(f"precise_ip {precise_ip} is not 0-3")
        flags |= precise_ip << _PRECISE_IP_SHIFT
        self.attr = {"type": attr_type, "size": attr_size, "config": config,
                     "sample_period": sample_period, "sample_type": sample_type,
                     "flags": flags, "branch_sample_type": branch_sample_type,
                     "sample_max_stack": 127 if sample_type & fmt.S_BRANCH_STACK else 0}
        self._attr_bytes = fmt.EventAttr.build(self.attr)
        self._trailer = fmt.sample_id_struct(sample_type)
        self._hw_idx = bool(branch_sample_type & fmt.BR_HW_INDEX)
        self._fixed = _fixed_packer(sample_type)
        self._build_ids: list[bytes] = []
        self._nsamples = 0
        self._stack = contextlib.ExitStack()
        self._fh = self._stack.enter_context(atomic_open(self.path, "wb"))
        self._pending = bytearray()  # records waiting for compression
        self._zc = zstandard.ZstdCompressor(level=3) if compress else None
        self._closed = False
        if pipe:
            self._fh.write(fmt.PipeHeader.build({"size": fmt.PIPE_HEADER_SIZE}))
            body = self._attr_bytes + struct.pack("<Q", EVENT_ID)
            self._fh.write(fmt.build_record(fmt.REC_HEADER_ATTR, body))
            for feat, payload in self._features(pipe_start=True):
                self._fh.write(fmt.build_record(
                    fmt.REC_HEADER_FEATURE, fmt.HeaderFeatureBody.build(
                        {"feat_id": feat, "data": payload})))
            self._data_offset = self._fh.tell()
        else:
            self._attrs_offset = fmt.FILE_HEADER_SIZE
            self._ids_offset = self._attrs_offset + len(self._attr_bytes) + 16
            self._data_offset = fmt.align(self._ids_offset + 8, 8)
            self._fh.write(b"\0" * self._data_offset)

    @property
    def bytes_written(self) -> int:
        """Bytes in the output so far (records still waiting for compression excluded)."""
        return self._fh.tell()

    # ------------------------------------------------------------------ records
    def _emit(self, rec: bytes) -> None:
        if self._zc is None:
            self._fh.write(rec)
            return
        self._pending += rec
        if len(self._pending) >= _COMP_CHUNK:
            self._flush_compressed()

    def _flush_compressed(self) -> None:
        if not self._pending:
            return
        frame = self._zc.compress(bytes(self._pending))
        self._pending.clear()
        for i in range(0, len(frame), _MAX_COMP_PAYLOAD):
            self._fh.write(fmt.build_record(fmt.REC_COMPRESSED, fmt.CompressedBody.build(
                {"data": frame[i:i + _MAX_COMP_PAYLOAD]})))

    def _sample_id(self, pid: int, tid: int, time: int) -> bytes:
        return self._trailer.build({"pid": pid, "tid": tid, "time": time, "id": EVENT_ID,
                                    "stream_id": EVENT_ID, "cpu": 0, "cpu_res": 0,
                                    "identifier": EVENT_ID})

    def add_comm(self, pid: int, tid: int, comm: str, time: int = 0, exec_: bool = False
                 ) -> None:
        body = fmt.CommBody.build({"pid": pid, "tid": tid, "comm": fmt.padded_name(comm)})
        misc = fmt.MISC_COMM_EXEC if exec_ else 0
        self._emit(fmt.build_record(fmt.REC_COMM, body + self._sample_id(pid, tid, time), misc))

    def add_mmap2(self, pid: int, tid: int, start: int, length: int, pgoff: int,
                  filename: str, prot: int = 5, flags: int = 2, build_id: str | None = None,
                  time: int = 0, cpumode: int = 2,
                  inode: tuple[int, int, int, int] | None = None) -> None:
        """``inode`` is (maj, min, ino, ino_generation) as another machine's perf recorded
        it; without it (and without ``build_id``) the fields are zero."""
        misc = cpumode
        if build_id is not None:
            raw = bytes.fromhex(build_id)[:20]
            u = {"build_id_size": len(raw), "build_id": raw.ljust(20, b"\0")}
            misc |= fmt.MISC_MMAP_BUILD_ID
        else:
            maj, mnr, ino, gen = inode or (0, 0, 0, 0)
            u = {"maj": maj, "min": mnr, "ino": ino, "ino_generation": gen}
        if not prot & fmt.PROT_EXEC:
            misc |= fmt.MISC_MMAP_DATA
        body = fmt.Mmap2Body.build({"pid": pid, "tid": tid, "start": start, "len": length,
                                    "pgoff": pgoff, "u": u, "prot": prot, "flags": flags,
                                    "filename": fmt.padded_name(filename)}, misc=misc)
        self._emit(fmt.build_record(fmt.REC_MMAP2, body + self._sample_id(pid, tid, time),
                                    misc))

    def add_mmap(self, pid: int, tid: int, start: int, length: int, pgoff: int,
                 filename: str, time: int = 0, cpumode: int = 2) -> None:
        body = fmt.MmapBody.build({"pid": pid, "tid": tid, "start": start, "len": length,
                                   "pgoff": pgoff, "filename": fmt.padded_name(filename)})
        self._emit(fmt.build_record(fmt.REC_MMAP, body + self._sample_id(pid, tid, time),
                                    cpumode))

    def _fork_exit(self, rtype: int, pid: int, ppid: int, tid: int, ptid: int, time: int
                   ) -> None:
        body = fmt.ForkExitBody.build({"pid": pid, "ppid": ppid, "tid": tid, "ptid": ptid,
                                       "time": time})
        self._emit(fmt.build_record(rtype, body + self._sample_id(pid, tid, time)))

    def add_fork(self, pid: int, ppid: int, tid: int | None = None, ptid: int | None = None,
                 time: int = 0) -> None:
        self._fork_exit(fmt.REC_FORK, pid, ppid, pid if tid is None else tid,
                        ppid if ptid is None else ptid, time)

    def add_exit(self, pid: int, ppid: int, tid: int | None = None, ptid: int | None = None,
                 time: int = 0) -> None:
        self._fork_exit(fmt.REC_EXIT, pid, ppid, pid if tid is None else tid,
                        ppid if ptid is None else ptid, time)

    def add_lost_samples(self, lost: int, pid: int = 0, tid: int = 0, time: int = 0) -> None:
        body = fmt.LostSamplesBody.build({"lost": lost})
        self._emit(fmt.build_record(fmt.REC_LOST_SAMPLES, body + self._sample_id(pid, tid,
                                                                                    time)))

    def add_finished_round(self) -> None:
        self._emit(fmt.build_record(fmt.REC_FINISHED_ROUND, b""))

    def sample_bytes(self, ip: int, pid: int, tid: int, time: int = 0, period: int = 1,
                     branches: Iterable[tuple[int, int, int]] | np.ndarray | None = None,
                     cpumode: int = 2, addr: int = 0, cpu: int = 0) -> bytes:
        """One SAMPLE record (the fast packer; equal to the construct build)."""
        fixed = self._fixed(ip=ip, pid=pid, tid=tid, time=time, addr=addr, cpu=cpu,
                            period=period)
        tail = b""
        if self.sample_type & fmt.S_BRANCH_STACK:
            if branches is None:
                arr = np.zeros((0, _BRANCH_FIELDS), np.uint64)
            else:
                arr = np.asarray(branches, dtype=np.uint64).reshape(-1, _BRANCH_FIELDS)
            tail = struct.pack("<Q", len(arr))
            if self._hw_idx:
                tail += struct.pack("<q", -1)
            tail += arr.astype("<u8").tobytes()
        body = fixed + tail
        size = fmt.EVENT_HEADER_SIZE + len(body)
        if size > 0xFFFF:
            raise ValueError(f"sample of {size} bytes exceeds perf's u16 record size")
        return _HDR.pack(fmt.REC_SAMPLE, cpumode, size) + body

    def add_sample(self, ip: int, pid: int, tid: int, time: int = 0, period: int = 1,
                   branches: Iterable[tuple[int, int, int]] | np.ndarray | None = None,
                   cpumode: int = 2, addr: int = 0, cpu: int = 0) -> None:
        rec = self.sample_bytes(ip, pid, tid, time, period, branches, cpumode, addr, cpu)
        self._nsamples += 1
        self._emit(rec)

    def add_batch(self, batch: SampleBatch) -> None:
        """Write every sample of a columnar batch (branches from its CSR columns)."""
        has_br = self.sample_type & fmt.S_BRANCH_STACK
        if has_br and len(batch.br_from):
            br = np.stack([batch.br_from, batch.br_to, batch.br_flags], axis=1)
        for i in range(len(batch)):
            b = br[batch.br_ptr[i]:batch.br_ptr[i + 1]] if has_br and len(batch.br_from) \
                else None
            self._emit(self.sample_bytes(int(batch.ip[i]), int(batch.pid[i]),
                                         int(batch.tid[i]), int(batch.time[i]),
                                         int(batch.period[i]), b, int(batch.cpumode[i])))
        self._nsamples += len(batch)

    def add_build_id(self, filename: str, build_id_hex: str, pid: int = -1, misc: int = 2
                     ) -> None:
        raw = bytes.fromhex(build_id_hex)[:20]
        raw_name = filename.encode("utf-8")
        # keep the record 8-byte aligned: perf 6.1 loses compressed pipe data otherwise
        name = raw_name.ljust(fmt.align(fmt.BUILD_ID_EVENT_FIXED + len(raw_name) + 1, 8)
                              - fmt.BUILD_ID_EVENT_FIXED, b"\0")
        ev = fmt.BuildIdEvent.build({
            "header": {"type": fmt.REC_HEADER_BUILD_ID, "misc": misc | fmt.MISC_BUILD_ID_SIZE,
                       "size": fmt.BUILD_ID_EVENT_FIXED + len(name)},
            "pid": pid, "data": raw.ljust(20, b"\0"), "bid_size": len(raw), "reserved1": 0,
            "reserved2": 0, "filename": name})
        if self.pipe and self._zc is not None:
            # perf 6.1 then fails to decompress the stream ("dst_size 0"): refuse, do not
            # write a file perf cannot read
            raise ValueError("build ids in compressed pipe-mode output are not supported")
        if self.pipe:
            self._emit(ev)
        else:
            self._build_ids.append(ev)

    # ------------------------------------------------------------------ features
    def _features(self, pipe_start: bool = False) -> list[tuple[int, bytes]]:
        feats: list[tuple[int, bytes]] = []
        if self._build_ids and not pipe_start:
            feats.append((fmt.FEAT_BUILD_ID, b"".join(self._build_ids)))
        feats.append((fmt.FEAT_HOSTNAME, fmt.HeaderString.build(self.hostname)))
        feats.append((fmt.FEAT_OSRELEASE, fmt.HeaderString.build(platform.release())))
        feats.append((fmt.FEAT_VERSION, fmt.HeaderString.build("bbmap")))
        feats.append((fmt.FEAT_ARCH, fmt.HeaderString.build(platform.machine())))
        ncpu = os.cpu_count() or 1
        feats.append((fmt.FEAT_NRCPUS, fmt.NrCpus.build({"nr_cpus_avail": ncpu,
                                                          "nr_cpus_online": ncpu})))
        feats.append((fmt.FEAT_CMDLINE, fmt.StringList.build(self.cmdline)))
        attr = fmt.EventAttr.parse(self._attr_bytes)
        feats.append((fmt.FEAT_EVENT_DESC, fmt.EventDesc.build({
            "nr": 1, "attr_size": len(self._attr_bytes),
            "events": [{"attr": attr, "nr_ids": 1, "name": self.event_name,
                        "ids": [EVENT_ID]}]})))
        if self.sample_type & fmt.S_BRANCH_STACK:
            feats.append((fmt.FEAT_BRANCH_STACK, b""))
        if self.compress:
            feats.append((fmt.FEAT_COMPRESSED, fmt.CompressedFeature.build({
                "version": 0, "type": fmt.COMP_ZSTD, "level": 3, "ratio": 0,
                "mmap_len": _COMP_MMAP_LEN})))
        return sorted(feats)

    # ------------------------------------------------------------------ finish
    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._zc is not None:
                self._flush_compressed()
            if not self.pipe:
                self._finish_file()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._stack.close()

    def _finish_file(self) -> None:
        fh = self._fh
        data_end = fh.tell()
        feats = self._features()
        table = bytearray()
        payloads = bytearray()
        base = data_end + 16 * len(feats)
        for _feat, payload in feats:
            table += fmt.FileSection.build({"offset": base + len(payloads),
                                            "size": len(payload)})
            payloads += payload
        fh.write(table)
        fh.write(payloads)
        bits = [0, 0, 0, 0]
        for feat, _ in feats:
            bits[feat // 64] |= 1 << (feat % 64)
        header = fmt.FileHeader.build({
            "size": fmt.FILE_HEADER_SIZE, "attr_size": len(self._attr_bytes) + 16,
            "attrs": {"offset": self._attrs_offset, "size": len(self._attr_bytes) + 16},
            "data": {"offset": self._data_offset, "size": data_end - self._data_offset},
            "event_types": {"offset": 0, "size": 0}, "adds_features": bits})
        fh.seek(0)
        fh.write(header)
        fh.write(self._attr_bytes)
        fh.write(fmt.FileSection.build({"offset": self._ids_offset, "size": 8}))
        fh.write(struct.pack("<Q", EVENT_ID))

    def abort(self) -> None:
        """Drop the partial output (the target file is left untouched)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):
                self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)

    def __enter__(self) -> PerfWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


_HDR = fmt.EVENT_HEADER_STRUCT
_BRANCH_FIELDS = len(fmt.BranchEntry.subcons)  # (from, to, flags)
# what the writer puts in the SAMPLE fields it has no argument for
_CONSTANT_FIELDS = {"identifier": EVENT_ID, "id": EVENT_ID, "stream_id": EVENT_ID,
                    "cpu_res": 0}


def _fixed_packer(sample_type: int):
    """A packer for the fixed-size SAMPLE fields that precede READ/CALLCHAIN/branches."""
    fields = fmt.sample_fixed_fields(sample_type)
    packer = struct.Struct("<" + "".join(code for _, code in fields))
    names = [n for n, _ in fields]

    def pack(**kw) -> bytes:
        kw.update(_CONSTANT_FIELDS)
        return packer.pack(*(kw[n] for n in names))

    return pack
