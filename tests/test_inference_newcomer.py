"""The newcomer case (corpus/newcomer, spec/corpus.md): a small C program with a hot loop
called 4 million times, built with the PGO analysis map from an instrumented run of the
same input, profiled with ``perf record -e cpu-clock:u``.  The compiler's beliefs are the
instrumented profile's exact counts, so every "mismatched" verdict would be a false alarm;
and every function with samples must get a non-zero count."""

from __future__ import annotations

import json

import pytest
from helpers import CORPUS, cli

from bbmap.run import annotate

BIN = CORPUS / "newcomer" / "newcomer.pie"
PERF = CORPUS / "newcomer" / "perf.data"
pytestmark = pytest.mark.skipif(not (BIN.exists() and PERF.exists()),
                                reason="corpus/newcomer not built")


def test_every_sampled_function_has_a_count() -> None:
    r = annotate([str(PERF)], str(BIN))
    assert r.count_source == "inferred" and r.sample_model["model"] == "time"
    hot = [fv for fv in r.hot_functions() if fv.samples > 0]
    assert {fv.name for fv in hot} >= {"collatz_steps", "bubble", "classify", "main"}
    for fv in hot:
        assert fv.count > 0, fv.name
    # classify runs once per collatz_steps call (main's loop): the call sites say so
    by = {fv.name: fv.count for fv in hot}
    assert by["collatz_steps"] == by["classify"] > 1000 * by["main"]


def test_verify_raises_no_false_alarm() -> None:
    code, out = cli("verify", str(BIN), "--profile", str(PERF), "--json")
    doc = json.loads(out)
    assert doc["count_source"] == "inferred"
    for table in ("branches", "blocks", "entries"):
        assert doc["summary"][table]["mismatched"] == 0, (table, doc["summary"][table])
