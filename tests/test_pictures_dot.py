"""DOT output on real corpus inputs: graphviz parses it (when installed), every block is a
node named by its ID, counted edges carry their counts, C++ names are quoted, and the
output is deterministic."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from dataclasses import replace

import pytest
from helpers import CASES, EH, LBR, function_blocks, needs_corpus, result_of

from bbmap.outputs.dot import quote, render_dot

DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="graphviz (dot) not installed")


def run_dot(text: str) -> str:
    p = subprocess.run([DOT, "-Tsvg"], input=text, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def graphs(text: str) -> list[str]:
    """Split the concatenated digraphs (each starts at column 0 with ``digraph``)."""
    parts = re.split(r"(?m)^(?=digraph )", text)
    return [p for p in parts if p.startswith("digraph ")]


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_block_is_a_node(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    text = render_dot(r, top=4)
    hot = [fv for fv in r.hot_functions(4) if len(fv.blocks)]
    gs = graphs(text)
    assert len(gs) == len(hot)
    m = r.block_map
    for g, fv in zip(gs, hot):
        assert g.startswith(f"digraph {quote(fv.name)} {{")
        for b in function_blocks(r, fv.key):
            node = re.search(rf'^    b{b} \[label="bb (\d+)  (0x[0-9a-f]+) ', g, re.M)
            assert node, (fv.name, b)
            assert int(node.group(1)) == int(m.block_id[b])
            assert int(node.group(2), 16) == int(r.block_start[b])
        assert g.count("subgraph cluster_") == sum(
            len(m.function_ranges(f)) for f in r.functions.bmfuncs[fv.key])


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles not built")
@pytest.mark.parametrize("case", LBR[:3], ids=[c[0] for c in LBR[:3]])
def test_counted_edges(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    text = render_dot(r, top=3)
    for fv in r.hot_functions(3):
        own = set(function_blocks(r, fv.key))
        inside = sorted((e for e in fv.edges.tolist() if int(r.edge_to[e]) in own),
                        key=lambda e: -int(r.edge_count[e]))
        for e in inside[:8]:
            s, d, n = int(r.edge_from[e]), int(r.edge_to[e]), int(r.edge_count[e])
            assert f'  b{s} -> b{d} [label="{n:,}"' in text


@needs_dot
@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_graphviz_parses_and_names_every_block(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    hot = [fv for fv in r.hot_functions(3) if len(fv.blocks)]
    for g, fv in zip(graphs(render_dot(r, top=3)), hot):
        svg = run_dot(g)
        titles = set(re.findall(r"<title>(b\d+)</title>", svg))
        assert titles == {f"b{b}" for b in function_blocks(r, fv.key)}


@pytest.mark.skipif(not EH, reason="corpus C++ EH profile not built")
def test_cpp_and_hostile_names_quoted():
    _, perf, binary = EH[0]
    r = result_of(perf, binary)
    cpp = [fv.key for fv in r.hot_functions(30) if "<" in fv.name or "&" in fv.name]
    assert cpp
    text = render_dot(r, cpp)
    r2 = replace(r, functions=copy.copy(r.functions))
    r2.functions.names = list(r.functions.names)
    r2.functions.names[cpp[0]] = 'q"uote\\back\nline<&>'
    hostile = render_dot(r2, [cpp[0]])
    assert 'digraph "q\\"uote\\\\back\\nline<&>" {' in hostile
    if DOT:
        for g in graphs(text) + [hostile]:
            run_dot(g)


def test_quote():
    assert quote('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd?"'


@needs_corpus
def test_deterministic():
    _, perf, binary = CASES[0]
    from bbmap.run import annotate

    assert render_dot(annotate([perf], binary)) == render_dot(result_of(perf, binary))
