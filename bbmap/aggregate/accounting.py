"""Bloaty's invariant applied to samples: every sample and branch record in one bucket.

The buckets are ordered from most to least specific.  Totals are counted separately
from the buckets (as records are read), so :meth:`Accounting.check` compares two
independent tallies rather than a sum with itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bbmap.buckets import BRANCH_BUCKETS, BUCKETS, OTHER_DSO

# Where an address ended up (the resolver's code) is also the bucket index: one enumeration
# for the mapping layer, the index and accounting, declared in bbmap.buckets.
# Why a fall-through range between two consecutive LBR entries was not used.
RANGE_REASONS = ("valid", "not_in_block", "reversed", "cross_function", "cross_range",
                 "no_fall_through")
RANGE_LABELS = {
    "valid": "valid (counted)",
    "not_in_block": "an end not in a block of the binary",
    "reversed": "start after end",
    "cross_function": "ends in different functions",
    "cross_range": "ends in different ranges of one function",
    "no_fall_through": "a block before the end cannot fall through",
}


class AccountingError(AssertionError):
    """The buckets do not add up to the totals: a bug in bbmap, never bad input."""


@dataclass
class Accounting:
    """Bucket tallies plus independently counted totals."""

    total_samples: int = 0
    total_period: int = 0
    total_branches: int = 0
    total_ranges: int = 0
    samples: np.ndarray = field(default_factory=lambda: np.zeros(len(BUCKETS), np.int64))
    period: np.ndarray = field(default_factory=lambda: np.zeros(len(BUCKETS), np.uint64))
    branches: np.ndarray = field(
        default_factory=lambda: np.zeros(len(BRANCH_BUCKETS), np.int64))
    ranges: np.ndarray = field(default_factory=lambda: np.zeros(len(RANGE_REASONS), np.int64))
    dso_samples: dict[str, int] = field(default_factory=dict)
    dso_branches: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------- adding
    def add_samples(self, where: np.ndarray, period: np.ndarray,
                    count: np.ndarray | None = None) -> None:
        """One sample per row, or ``count[i]`` samples whose periods sum to ``period[i]``
        (distinct keys of a batch, bbmap.aggregate.distinct)."""
        rows = np.bincount(where, minlength=len(BUCKETS))
        if count is None:
            self.samples += rows[: len(BUCKETS)]
        else:  # float weights are exact: a batch's counts are far below 2**53
            self.samples += np.bincount(where, weights=count, minlength=len(BUCKETS)
                                        )[: len(BUCKETS)].astype(np.int64)
        # exact integer sums (a float bincount would round large periods)
        for k in np.flatnonzero(rows).tolist():
            self.period[k] += np.uint64(period[where == k].sum(dtype=np.uint64))

    def add_branches(self, where: np.ndarray) -> None:
        self.branches += np.bincount(where, minlength=len(BRANCH_BUCKETS))[: len(BRANCH_BUCKETS)]

    def add_ranges(self, reason: np.ndarray) -> None:
        self.ranges += np.bincount(reason, minlength=len(RANGE_REASONS))[: len(RANGE_REASONS)]

    @staticmethod
    def add_named(table: dict[str, int], dso: np.ndarray, names: list[str],
                  weights: np.ndarray | None = None) -> None:
        """Count DSO indexes (>= 0) by name into ``table`` (``weights``: samples per row)."""
        ok = dso >= 0
        dso = dso[ok]
        if not len(dso):
            return
        if weights is None:
            ids, counts = np.unique(dso, return_counts=True)
        else:
            w = np.bincount(dso, weights=weights[ok]).astype(np.int64)
            ids = np.flatnonzero(w)
            counts = w[ids]
        for i, c in zip(ids.tolist(), counts.tolist()):
            name = names[i] if i < len(names) else f"dso#{i}"
            table[name] = table.get(name, 0) + c

    def merge(self, other: Accounting) -> None:
        self.total_samples += other.total_samples
        self.total_period += other.total_period
        self.total_branches += other.total_branches
        self.total_ranges += other.total_ranges
        self.samples += other.samples
        self.period += other.period
        self.branches += other.branches
        self.ranges += other.ranges
        for mine, theirs in ((self.dso_samples, other.dso_samples),
                             (self.dso_branches, other.dso_branches)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v

    # ------------------------------------------------------------ checking
    def check(self) -> None:
        """Assert the invariant; a failure is a bbmap bug (raised, never printed as a result)."""
        problems = []
        if int(self.samples.sum()) != self.total_samples:
            problems.append(f"sample buckets {int(self.samples.sum())} != {self.total_samples}")
        if int(self.period.sum()) != self.total_period:
            problems.append(f"period buckets {int(self.period.sum())} != {self.total_period}")
        if int(self.branches.sum()) != self.total_branches:
            problems.append(f"branch buckets {int(self.branches.sum())} != "
                            f"{self.total_branches}")
        if int(self.ranges.sum()) != self.total_ranges:
            problems.append(f"range reasons {int(self.ranges.sum())} != {self.total_ranges}")
        if sum(self.dso_samples.values()) != int(self.samples[OTHER_DSO]):
            problems.append("named DSO samples do not add up to the other_dso bucket")
        if sum(self.dso_branches.values()) != int(self.branches[OTHER_DSO]):
            problems.append("named DSO branches do not add up to the other_dso bucket")
        if problems:
            raise AccountingError("accounting does not reconcile: " + "; ".join(problems))

    # ------------------------------------------------------------- views
    def sample_buckets(self) -> dict[str, int]:
        return {n: int(v) for n, v in zip(BUCKETS, self.samples)}

    def period_buckets(self) -> dict[str, int]:
        return {n: int(v) for n, v in zip(BUCKETS, self.period)}

    def branch_buckets(self) -> dict[str, int]:
        return {n: int(v) for n, v in zip(BRANCH_BUCKETS, self.branches)}

    def range_reasons(self) -> dict[str, int]:
        return {n: int(v) for n, v in zip(RANGE_REASONS, self.ranges)}

    def to_json(self) -> dict:
        return {
            "samples": self.total_samples,
            "period": self.total_period,
            "branches": self.total_branches,
            "buckets": {
                "samples": self.sample_buckets(),
                "period": self.period_buckets(),
                "branches": self.branch_buckets(),
                "other_dso_samples": dict(sorted(self.dso_samples.items(),
                                                 key=lambda kv: (-kv[1], kv[0]))),
                "other_dso_branches": dict(sorted(self.dso_branches.items(),
                                                  key=lambda kv: (-kv[1], kv[0]))),
            },
            "fall_through_ranges": {"total": self.total_ranges, **self.range_reasons()},
        }
