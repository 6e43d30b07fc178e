"""Aggregation: samples and LBR stacks -> per-block counts, edges, and the accounting.

``bbmap.annotate`` is also callable (``bbmap.annotate(paths, binary)``) so the name works
both as this package and as the function the top-level package re-exports.
"""

from __future__ import annotations

import sys
import types

from bbmap.annotate.api import Annotator, annotate, expand_inputs
from bbmap.annotate.result import AnnotateResult

__all__ = ["annotate", "AnnotateResult", "Annotator", "expand_inputs"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        return annotate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
