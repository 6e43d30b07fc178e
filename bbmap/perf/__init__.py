"""perf.data: a streaming columnar reader, a writer, and the ``perf-info`` summary."""

from bbmap.perf.attrs import EventAttr
from bbmap.perf.features import BuildIdEntry
from bbmap.perf.reader import PerfData
from bbmap.perf.records import (
    CommRecord,
    ExitRecord,
    ForkRecord,
    MmapRecord,
    SampleBatch,
    SideRecords,
)

__all__ = ["PerfData", "SampleBatch", "SideRecords", "MmapRecord", "CommRecord", "ForkRecord",
           "ExitRecord", "EventAttr", "BuildIdEntry"]
