"""Code layout from execution counts: Ext-TSP block order, hot/cold splitting, function order.

The layer between aggregation and outputs (spec/layout.md):

* :mod:`~bbmap.layout.graph` -- per-function CFGs (blocks, sizes, counts, edges) and the
  calls between functions, from an ``AnnotateResult``;
* :mod:`~bbmap.layout.exttsp` -- the Ext-TSP score and the chain-merging optimiser (arrays
  in, arrays out);
* :mod:`~bbmap.layout.callchain` -- call-chain clustering (C3) of functions;
* :mod:`~bbmap.layout.cdsort` -- LLVM's cache-directed sort of functions;
* :mod:`~bbmap.layout.plan` -- clusters, splitting modes, function order, scores.
"""

from bbmap.layout.callchain import call_chain_order
from bbmap.layout.cdsort import CDSortConfig, cdsort_order
from bbmap.layout.exttsp import (
    LLVM,
    PROPELLER,
    ExtTspParams,
    ext_tsp_order,
    ext_tsp_score,
    ext_tsp_score_at,
)
from bbmap.layout.graph import FunctionCFG, ProgramCFG, build_program_cfg
from bbmap.layout.plan import FunctionLayout, LayoutPlan, plan_layout

__all__ = ["LLVM", "PROPELLER", "CDSortConfig", "ExtTspParams", "FunctionCFG",
           "FunctionLayout", "LayoutPlan", "ProgramCFG", "build_program_cfg",
           "call_chain_order", "cdsort_order", "ext_tsp_order", "ext_tsp_score",
           "ext_tsp_score_at", "plan_layout"]
