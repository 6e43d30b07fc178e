"""Aggregation: samples and LBR stacks -> per-block counts, edges, and the accounting.

The top-level package re-exports :func:`annotate` as ``bbmap.annotate(paths, binary)``.
"""

from __future__ import annotations

from bbmap.aggregate.api import Annotator, annotate, expand_inputs
from bbmap.aggregate.result import AnnotateResult

__all__ = ["annotate", "AnnotateResult", "Annotator", "expand_inputs"]

