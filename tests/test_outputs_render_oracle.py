"""annotate's JSON and CSV bytes equal the renderers they replaced, on every corpus case.

The oracle is ``tests/oracles/render_oracle.py``: the per-block-dict JSON encoder and
``csv.writer`` renderers as they were before the columnar writer (issue 17), kept
verbatim.  Every profile of the corpus manifest (plain, callgraph, pipe, zstd, the
app + .so profile once per binary, LBR, IP-for-inference, Go) is annotated once with
inference off, once as the CLI does (inference ``auto``); ``--top`` cuts and the
``name:id`` edge endpoints of cross-function edges are covered by the same cases.
Names that JSON must escape and CSV must quote are put into a real result too.
"""

from __future__ import annotations

from functools import cache

import pytest
from helpers import CORPUS, load_manifest
from oracles import render_oracle

from bbmap.outputs.csvout import PREFIX_PICK_BYTES, render_csv
from bbmap.outputs.jsonout import render_json
from bbmap.run import annotate


def _cases() -> list:
    m = load_manifest()
    bins = {b["name"]: CORPUS / b["path"] for b in m.get("binaries", []) + m.get(
        "go_binaries", [])}
    out = []
    for kind in ("profiles", "ip_profiles", "go_profiles"):
        for p in m.get(kind, []):
            perf = CORPUS / p["path"]
            for bname in p.get("binaries", []):
                b = bins.get(bname)
                if b is not None and perf.exists() and b.exists():
                    out.append(pytest.param(str(perf), str(b), id=f"{p['name']}:{bname}"))
    return out


CASES = _cases()
needs_cases = pytest.mark.skipif(not CASES, reason="corpus not built")


@cache
def _result(perf: str, binary: str, inference: str):  # noqa: ANN202
    return annotate([perf], binary, inference=inference)


@pytest.mark.slow
@needs_cases
@pytest.mark.parametrize("inference", ["off", "auto"])
@pytest.mark.parametrize(("perf", "binary"), CASES)
def test_json_and_csv_equal_the_old_renderers(perf: str, binary: str, inference: str) -> None:
    r = _result(perf, binary, inference)
    for top in (None, 1, 3):
        assert render_json(r, top=top) == render_oracle.render_json(r, top=top)
        assert render_csv(r, top=top) == render_oracle.render_csv(r, top=top)


@needs_cases
def test_names_that_need_escaping_and_quoting() -> None:
    """JSON escapes (quotes, backslashes, control characters, non-ASCII kept as is) and
    CSV quoting (commas, quotes, newlines: C++ signatures have commas) of function
    names, in blocks and in ``name:id`` edge endpoints."""
    perf, binary = next(c.values for c in CASES if "lbr" in c.id and "pie" in c.id)
    r = annotate([perf], binary, inference="off")
    odd = ['f"q', "b\\s", "t\tab", "c,omma", "uni\u00e9\u4e2d", "nl\nx", "f(int, char)",
           "\x7f", 'both,"q"']
    names = list(r.functions.names)
    for i, k in enumerate(fv.key for fv in r.hot_functions()):
        names[k] = odd[i % len(odd)] + names[k]
    r.functions.names = names
    r.__dict__.pop("_columns", None)  # a cached property
    assert render_json(r) == render_oracle.render_json(r)
    assert render_csv(r) == render_oracle.render_csv(r)
    # names holding every control byte: CSV rows carry their own prefix (no marker byte)
    every = "".join(chr(c) for c in range(1, 32))
    r.functions.names = [every + n for n in names]
    assert render_csv(r) == render_oracle.render_csv(r)
    assert render_json(r) == render_oracle.render_json(r)
    # names longer than a row column takes (C++ templates): a marker byte per row,
    # replaced by the function's prefix once per function; with and without quoting
    long = "t<" + "x" * PREFIX_PICK_BYTES + ">"
    for pre in ("", every):
        r.functions.names = [pre + long + n for n in names]
        assert render_csv(r) == render_oracle.render_csv(r)
        assert render_json(r) == render_oracle.render_json(r)
