"""One perf event as bbmap sees it: the decoded perf_event_attr, its ids and its name."""

from __future__ import annotations

from dataclasses import dataclass, field

from bbmap.formats import perfdata as fmt

# perf's names for the generic events (tools/perf/util/evsel.c tables).
_HW_NAMES = ["cycles", "instructions", "cache-references", "cache-misses", "branches",
             "branch-misses", "bus-cycles", "stalled-cycles-frontend",
             "stalled-cycles-backend", "ref-cycles"]
_SW_NAMES = ["cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
             "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy",
             "bpf-output", "cgroup-switches"]


def default_event_name(attr_type: int, config: int, flags: int = 0) -> str:
    """A name like perf's when the file carries none (no EVENT_DESC): ``cycles:u``."""
    if attr_type == 0 and config < len(_HW_NAMES):
        base = _HW_NAMES[config]
    elif attr_type == 1 and config < len(_SW_NAMES):
        base = _SW_NAMES[config]
    elif attr_type == 2:
        base = f"tracepoint:{config}"
    else:
        base = f"raw:{attr_type}:{config:#x}"
    excl_k = bool(flags & fmt.F_EXCLUDE_KERNEL)
    excl_u = bool(flags & (1 << 4))
    mods = "u" if excl_k and not excl_u else "k" if excl_u and not excl_k else ""
    # perf's ``p`` modifiers: what the sample model reads (bbmap.inference.events)
    mods += "p" * ((flags >> fmt.F_PRECISE_IP_SHIFT) & fmt.F_PRECISE_IP_MASK)
    return f"{base}:{mods}" if mods else base


@dataclass
class EventAttr:
    """A decoded ``perf_event_attr`` plus the sample ids that point at it."""

    type: int
    config: int
    sample_type: int
    read_format: int
    flags: int
    sample_period: int
    branch_sample_type: int
    sample_regs_user: int
    sample_regs_intr: int
    size: int  # attr.size on disk
    ids: list[int] = field(default_factory=list)
    name: str = ""
    raw: dict = field(default_factory=dict, repr=False)  # every construct field

    @classmethod
    def from_container(cls, c, ids: list[int] | None = None, name: str | None = None
                       ) -> EventAttr:
        return cls(
            type=c.type, config=c.config, sample_type=c.sample_type, read_format=c.read_format,
            flags=c.flags, sample_period=c.sample_period, branch_sample_type=c.branch_sample_type,
            sample_regs_user=c.sample_regs_user, sample_regs_intr=c.sample_regs_intr,
            size=c.size, ids=list(ids or []),
            name=name or default_event_name(c.type, c.config, c.flags),
            raw={k: c[k] for k in fmt.ATTR_FIELD_NAMES})

    @property
    def sample_id_all(self) -> bool:
        return bool(self.flags & fmt.F_SAMPLE_ID_ALL)

    @property
    def freq(self) -> bool:
        return bool(self.flags & fmt.F_FREQ)

    @property
    def sample_type_names(self) -> list[str]:
        return [n for n, b in fmt.SAMPLE_TYPE_NAMES.items() if self.sample_type & b]

    def to_json(self) -> dict:
        return {
            "name": self.name, "type": self.type, "config": self.config,
            "size": self.size, "sample_type": self.sample_type,
            "sample_type_names": self.sample_type_names, "read_format": self.read_format,
            "branch_sample_type": self.branch_sample_type,
            "sample_period" if not self.freq else "sample_freq": self.sample_period,
            "sample_id_all": self.sample_id_all, "ids": len(self.ids),
        }
