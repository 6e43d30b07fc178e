"""Aggregation: samples and LBR stacks -> per-block counts, edges, and the accounting.

The top-level package re-exports :func:`annotate` as ``bbmap.annotate(paths, binary)``.
"""

from __future__ import annotations

from bbmap.aggregate.api import Annotator, annotate, apply_inference, expand_inputs
from bbmap.aggregate.result import AnnotateResult

__all__ = ["annotate", "apply_inference", "AnnotateResult", "Annotator", "expand_inputs"]

