"""What a run is asked to do, and what it says it did: the options of every command that
reads profiles against a binary (annotate, layout, cfg, report, fleet, verify --profile),
their choices, and a result's status.

Declared once here, light (no numpy, no formats), so the CLI builds its choices and help
from these constants at ``--help`` time and the library checks its arguments against the
same ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How far a result can be trusted (``AnnotateResult.status``).  A ``StrEnum``: its
    value is what JSON and text reports print."""

    OK = "ok"
    PARTIAL = "partial"  # some inputs mapped, some did not (the warnings say which)
    NOTHING_MAPPED = "nothing_mapped"  # no sample or branch landed in a block
    REFUSED = "refused"  # the profile does not fit the binary's instructions (fit.py)


# the statuses whose output would be empty or wrong: the CLI writes nothing and exits 1
FAILED_STATUSES = frozenset({Status.NOTHING_MAPPED, Status.REFUSED})

# annotate --format: what ``bbmap.run.render`` writes (aggregate: the CLI's Parquet file)
ANNOTATE_FORMATS = ("text", "json", "csv", "propeller", "symorder", "aggregate", "fdata",
                    "bolt-preagg", "match-infer", "bolt-yaml")
# written from the instruction-address aggregates alone (spec/bolt.md)
BOLT_FORMATS = ("fdata", "bolt-preagg")
# the derived work (``AnnotateOptions.deriving``) an output reads; an output not listed
# reads all of it.  The CLI refuses a flag of work an output does not read.
OUTPUT_DERIVES: dict[str, tuple[str, ...]] = {
    "aggregate": (),  # the raw counts: nothing is derived
    "fdata": ("force",),  # instruction addresses (inference off); the fit still judges
    "bolt-preagg": ("force",),
}
# annotate's options that only some formats read (CLI parameter name -> those formats)
ANNOTATE_FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {
    "top": ("text", "json", "csv"),  # the functions listed
    "cluster_version": ("propeller",),
}
# --inference: never, when the profiles have no branch stacks, always
INFERENCE_MODES = ("off", "auto", "on")
# --sample-model: "auto" (by the event, bbmap.inference.events) or a model of
# bbmap.inference.weights
SAMPLE_MODEL_CHOICES = ("auto", "precise", "time", "insn")
# --inference-solver: the min-cost flow solvers of bbmap.inference.solvers
SOLVER_CHOICES = ("auto", "ortools", "builtin", "scipy")
# --duplicate-lbr -> the Annotator's drop_duplicate_newest
DUPLICATE_LBR: dict[str, bool | None] = {"auto": None, "drop": True, "keep": False}
# a profile whose misses (IPs off instruction starts, sources that are not branches,
# targets mid-block) pass this share of its evidence does not fit the binary
# (bbmap.aggregate.fit)
MISMATCH_THRESHOLD = 0.30


@dataclass(frozen=True)
class AnnotateOptions:
    """Every option of one annotate run.  The first group changes the raw counts (it is
    what an aggregate records and what fleet workers are given); the second is derived
    work done when a result is made (never stored in an aggregate)."""

    # --- counting: what is read and how it is resolved
    name_override: str | None = None  # the binary's name as the profile mapped it
    pid: int | None = None  # only this process's samples
    demangle: bool = True
    debug_dirs: tuple[str, ...] = ()  # where a separate debug file is searched
    drop_duplicate_newest: bool | None = None  # the duplicated newest LBR entry (auto)
    event: str | None = None  # only this event's samples
    chunk_samples: int = 65536  # samples per batch read (bounds memory)
    cluster_stats: bool = False  # per-stack moments for verify --profile
    keep_going: bool = False  # an unreadable profile is named, not fatal
    addresses: bool = False  # the instruction-address aggregates (BOLT's formats)
    address_only: bool = False  # only those (--format fdata / bolt-preagg)
    # --- deriving: done on the merged raw counts
    inference: str = "auto"  # one of INFERENCE_MODES
    solver: str = "auto"  # one of SOLVER_CHOICES
    sample_model: str = "auto"  # one of SAMPLE_MODEL_CHOICES
    force: bool = False  # keep a result that does not fit the binary
    disasm_cache: bool = False  # inference reads the on-disk disassembly cache

    def counting(self) -> dict[str, Any]:
        """The options that change raw counts, as keyword arguments of
        ``bbmap.run.Session`` (what fleet ships to its workers)."""
        return {"name_override": self.name_override, "pid": self.pid,
                "demangle": self.demangle, "debug_dirs": self.debug_dirs,
                "drop_duplicate_newest": self.drop_duplicate_newest, "event": self.event}

    def deriving(self) -> dict[str, Any]:
        """The options of the result's derived work (``Session.result``)."""
        return {"inference": self.inference, "solver": self.solver, "force": self.force,
                "disasm_cache": self.disasm_cache, "sample_model": self.sample_model}

    def replace(self, **changes: Any) -> AnnotateOptions:
        return AnnotateOptions(**{**asdict(self), **changes})

    @classmethod
    def from_cli(cls, *, name: str | None, pid: int | None, no_demangle: bool,
                 debug_dirs: tuple[str, ...], duplicate_lbr: str, inference: str = "auto",
                 inference_solver: str = "auto", force: bool = False,
                 event: str | None = None, no_cache: bool = False,
                 sample_model: str = "auto", **more: Any) -> AnnotateOptions:
        """The profile options as the CLI parsed them (``bbmap.cli.profile_args``); the
        CLI keeps the disassembly cache unless ``--no-cache``."""
        return cls(name_override=name, pid=pid, demangle=not no_demangle,
                   debug_dirs=tuple(debug_dirs),
                   drop_duplicate_newest=DUPLICATE_LBR[duplicate_lbr],
                   inference=inference, solver=inference_solver, force=force, event=event,
                   disasm_cache=not no_cache, sample_model=sample_model, **more)
