"""Review regressions: LBR aggregation (spec/annotate.md, "LBR branch records")."""

from __future__ import annotations

from test_annotate_core import _loop_stacks
from test_annotate_helpers import batch, block_map, resolver, symbols

from bbmap.aggregate.api import Annotator


def _b(quirk: bool):
    stacks = _loop_stacks(64, quirk)
    return batch([s[0][1] for s in stacks], stacks=stacks)


def test_quirk_warning_evidence_comes_from_a_batch_that_showed_the_quirk():
    # batch 1 shows the quirk (p0 = 1.0), batch 2 does not (p0 = 0.0): the warning's
    # evidence ("entries 0 and 1 are equal in X% ...") must be the quirk's, not batch 2's
    a = Annotator(block_map(), symbols())
    r = resolver()
    a.add_batch(_b(True), r)
    a.add_batch(_b(False), r)
    assert a.branches.quirk_batches == 1
    assert a.branches.quirk_evidence is not None and a.branches.quirk_evidence[0] == 1.0
    # the same across files: a quirk profile merged with a later profile without it
    top = Annotator(block_map(), symbols())
    for q in (True, False):
        sub = top.fresh()
        sub.add_batch(_b(q), r)
        top.merge(sub)
    assert top.branches.quirk_batches == 1 and top.branches.quirk_evidence[0] == 1.0
