"""Feature payloads (file-mode sections after the data, pipe-mode HEADER_FEATURE records).

Each known payload is parsed with its construct declaration; a payload that does not
parse becomes a diagnostic naming its feature and offset, and the other features stay.
Unknown feature ids are recorded as present and otherwise skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from construct import ConstructError

from bbmap.errors import Diagnostics
from bbmap.formats import perfdata as fmt


@dataclass(frozen=True)
class BuildIdEntry:
    pid: int
    misc: int
    build_id: str  # hex, as perf buildid-list prints it
    filename: str

    @property
    def cpumode(self) -> int:
        return self.misc & fmt.MISC_CPUMODE_MASK

    def to_json(self) -> dict:
        return {"build_id": self.build_id, "filename": self.filename, "pid": self.pid,
                "cpumode": self.cpumode}


def parse_build_ids(data: bytes, diag: Diagnostics, file: str, section: str, base: int
                    ) -> list[BuildIdEntry]:
    """A run of build_id_event records; stops (with a warning) at the first bad one."""
    out: list[BuildIdEntry] = []
    off = 0
    while off + fmt.EVENT_HEADER_SIZE <= len(data):
        size = int.from_bytes(data[off + 6:off + 8], "little")
        if size < fmt.BUILD_ID_EVENT_FIXED or off + size > len(data):
            if any(data[off:]):  # all-zero tail: writer padding
                diag.warn(f"bad build-id entry size {size}; {len(data) - off} bytes skipped",
                          file=file, section=section, offset=base + off)
            break
        ev = fmt.BuildIdEvent.parse(data[off:off + size])
        out.append(BuildIdEntry(ev.pid, ev.header.misc, fmt.build_id_hex(ev), ev.filename))
        off += size
    return out


def parse_feature(feat: int, data: bytes, diag: Diagnostics, file: str, base: int,
                  features: dict, build_ids: list[BuildIdEntry]) -> None:
    """Parse one feature payload into ``features`` (or ``build_ids``)."""
    name = fmt.HEADER_FEATURE_NAMES.get(feat, f"feature_{feat}")
    section = f"feature {name}"
    try:
        if feat == fmt.FEAT_BUILD_ID:
            build_ids.extend(parse_build_ids(data, diag, file, section, base))
            features[name] = True
        elif feat in (fmt.FEAT_HOSTNAME, fmt.FEAT_OSRELEASE, fmt.FEAT_VERSION, fmt.FEAT_ARCH,
                      fmt.FEAT_CPUDESC, fmt.FEAT_CPUID):
            features[name] = fmt.HeaderString.parse(data)
        elif feat == fmt.FEAT_NRCPUS:
            c = fmt.NrCpus.parse(data)
            features[name] = {"avail": c.nr_cpus_avail, "online": c.nr_cpus_online}
        elif feat == fmt.FEAT_TOTAL_MEM:
            features[name] = int.from_bytes(data[:8], "little")
        elif feat == fmt.FEAT_CMDLINE:
            features[name] = list(fmt.StringList.parse(data))
        elif feat == fmt.FEAT_EVENT_DESC:
            ed = fmt.EventDesc.parse(data)
            features[name] = [{"name": e.name, "ids": list(e.ids), "type": e.attr.type,
                               "config": e.attr.config} for e in ed.events]
        elif feat == fmt.FEAT_CPU_PMU_CAPS:
            features[name] = {c.name: c.value for c in fmt.PmuCaps.parse(data)}
        elif feat == fmt.FEAT_COMPRESSED:
            c = fmt.CompressedFeature.parse(data)
            features[name] = {"version": c.version, "type": "zstd" if c.type == fmt.COMP_ZSTD
                              else c.type, "level": c.level, "ratio": c.ratio,
                              "mmap_len": c.mmap_len}
        elif feat == fmt.FEAT_GROUP_DESC:
            features[name] = [{"name": g.name, "leader": g.leader_idx,
                               "members": g.nr_members} for g in fmt.GroupDesc.parse(data)]
        elif feat == fmt.FEAT_SAMPLE_TIME:
            c = fmt.SampleTime.parse(data)
            features[name] = {"first": c.first, "last": c.last}
        elif feat == fmt.FEAT_CLOCKID:
            features[name] = int.from_bytes(data[:8], "little")
        else:
            features[name] = True
    except (ConstructError, UnicodeDecodeError, ValueError) as e:
        diag.warn(f"cannot parse feature payload: {type(e).__name__}", file=file,
                  section=section, offset=base)
