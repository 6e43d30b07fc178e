"""Aggregation: samples and LBR stacks -> per-block counts, edges, and the accounting.

The run that feeds it (read, resolve, count, diagnose, fit, infer) is ``bbmap/run.py``;
the top-level package re-exports its :func:`~bbmap.run.annotate` as ``bbmap.annotate``.
"""

from __future__ import annotations

from bbmap.aggregate.annotator import Annotator
from bbmap.aggregate.result import AnnotateResult

__all__ = ["AnnotateResult", "Annotator"]
