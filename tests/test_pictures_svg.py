"""SVG pictures on real corpus inputs: one box per block with the right IDs, heat colours
monotone in the count, the heaviest LBR edges drawn, cross-range edges, marks, the
overview strip, escaping of C++ names, and byte-identical output."""

from __future__ import annotations

import copy
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from helpers import CASES, EH, LBR, NS, function_blocks, needs_corpus, pictures, result_of

from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH, MD_HAS_RETURN
from bbmap.outputs.picture import HeatScale, luminance
from bbmap.outputs.svg import esc, render_svg
from bbmap.run import annotate

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")


@cache
def svg_of(perf: str, binary: str, top: int = 4) -> str:
    return render_svg(result_of(perf, binary), top=top)


def blocks_in(g: ET.Element) -> list[ET.Element]:
    return [b for b in g.iter(f"{NS}g") if b.get("class") == "block"]


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_one_box_per_block_with_ids(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    svg = svg_of(perf, binary)
    pics = pictures(svg)
    hot = [fv for fv in r.hot_functions(4) if len(fv.blocks)]
    assert hot and len(pics) == len(hot)
    m = r.block_map
    for fv in hot:
        g = pics[fv.name]
        boxes = blocks_in(g)
        want = function_blocks(r, fv.key)
        assert sorted(int(b.get("data-index")) for b in boxes) == sorted(want)
        for b in boxes:
            i = int(b.get("data-index"))
            assert int(b.get("data-block")) == int(m.block_id[i])
            assert int(b.get("data-samples")) == int(r.block_samples[i])
            rects = [x for x in b.iter(f"{NS}rect") if x.get("class") == "blk"]
            assert len(rects) == 1
            # the label shows the ID and the address
            texts = ["".join(t.itertext()) for t in b.iter(f"{NS}text")]
            assert str(int(m.block_id[i])) in texts
            assert f"{int(r.block_start[i]):#x}" in texts


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_colours_monotone_in_count(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    for g in pictures(svg_of(perf, binary)).values():
        key = "data-count" if r.has_lbr else "data-samples"
        pairs = []
        for b in blocks_in(g):
            rect = next(x for x in b.iter(f"{NS}rect") if x.get("class") == "blk")
            pairs.append((int(b.get(key)), rect.get("fill")))
        pairs.sort()
        lum = [luminance(fill) for _, fill in pairs]
        assert all(a >= b - 1e-9 for a, b in zip(lum, lum[1:])), pairs
        fill_of: dict[int, str] = {}
        for v, fill in pairs:
            assert fill_of.setdefault(v, fill) == fill  # one colour per value
        if pairs[-1][0] > 0:
            assert pairs[-1][1] != pairs[0][1] or pairs[0][0] == pairs[-1][0]


def test_heat_scale_monotone_everywhere():
    for vmax in (1, 7, 100, 21_252, 10**9):
        scale = HeatScale("count", vmax)
        vals = sorted(set(np.unique(np.geomspace(1, vmax, 400).astype(np.int64)).tolist()
                          + [0, 1, 2, vmax]))
        lum = [luminance(scale.fill(v)) for v in vals]
        assert all(a >= b - 1e-9 for a, b in zip(lum, lum[1:]))
        assert scale.fill(0) == "#ffffff" and scale.fill(vmax) == "#800014"
        assert scale.ticks(220)[-1] == vmax


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles not built")
@pytest.mark.parametrize("case", LBR[:3], ids=[c[0] for c in LBR[:3]])
def test_top_lbr_edges_drawn(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    assert r.has_lbr and len(r.edge_count)
    m = r.block_map
    pics = pictures(svg_of(perf, binary))
    for fv in r.hot_functions(4):
        if not len(fv.blocks):
            continue
        g = pics[fv.name]
        drawn = {(e.get("data-from"), e.get("data-to"), e.get("data-count"))
                 for e in g.iter() if "edge" in (e.get("class") or "")
                 and e.get("data-count")}
        own = set(function_blocks(r, fv.key))
        inside = [e for e in fv.edges.tolist() if int(r.edge_to[e]) in own]
        inside.sort(key=lambda e: -int(r.edge_count[e]))
        assert inside
        for e in inside[:8]:
            want = (str(int(m.block_id[r.edge_from[e]])), str(int(m.block_id[r.edge_to[e]])),
                    str(int(r.edge_count[e])))
            assert want in drawn, (fv.name, want)


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles not built")
def test_cross_range_edges_visible():
    multi = [c for c in LBR if "list" in c[0]]
    if not multi:
        pytest.skip("no multi-range LBR profile in the corpus")
    _, perf, binary = multi[0]
    r = result_of(perf, binary)
    svg = svg_of(perf, binary)
    crossing = 0
    m = r.block_map
    for name, g in pictures(svg).items():
        cols = [t for t in g.iter(f"{NS}text") if t.get("class") == "colhead"]
        paths = [p for p in g.iter(f"{NS}path") if "cross" in (p.get("class") or "")]
        key = r.functions.names.index(name)
        own = function_blocks(r, key)
        rng = {b: int(m.block_range(b)) for b in own}
        want = {(int(r.edge_from[e]), int(r.edge_to[e])) for e in range(len(r.edge_from))
                if int(r.edge_from[e]) in rng and int(r.edge_to[e]) in rng
                and rng[int(r.edge_from[e])] != rng[int(r.edge_to[e])]}
        assert len(paths) == len(want)
        if want:
            assert len(cols) >= 4  # two header lines per range column
        crossing += len(paths)
    assert crossing > 0


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_metadata_marks(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    m = r.block_map
    for g in pictures(svg_of(perf, binary)).values():
        for b in blocks_in(g):
            md = int(m.block_md[int(b.get("data-index"))])
            badges = ["".join(t.itertext()) for t in b.iter(f"{NS}text")
                      if t.get("class") == "badget"]
            walls = [x for x in b.iter(f"{NS}rect") if x.get("class") == "wall"]
            assert ("ret" in badges) == bool(md & MD_HAS_RETURN)
            assert bool(walls) == (not md & MD_CAN_FALL_THROUGH)


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_overview_one_row_per_function_one_cell_per_block(case):
    _, perf, binary = case
    r = result_of(perf, binary)
    root = ET.fromstring(svg_of(perf, binary))
    rows = [g for g in root.iter(f"{NS}g") if g.get("class") == "fnrow"]
    hot = r.hot_functions(4)
    assert [g.get("data-name") for g in rows] == [fv.name for fv in hot]
    for g, fv in zip(rows, hot):
        cells = [c for c in g.iter(f"{NS}rect") if c.get("class") == "cell"]
        assert sorted(int(c.get("data-block")) for c in cells) == sorted(
            int(r.block_map.block_id[b]) for b in function_blocks(r, fv.key))


@needs_corpus
@pytest.mark.parametrize("case", CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_deterministic(case):
    _, perf, binary = case
    a = render_svg(annotate([perf], binary), top=4)
    b = render_svg(annotate([perf], binary), top=4)
    assert a == b
    assert a == svg_of(perf, binary)


@pytest.mark.skipif(not EH, reason="corpus C++ EH profile not built")
def test_cpp_names_escaped():
    _, perf, binary = EH[0]
    r = result_of(perf, binary)
    names = [fv.name for fv in r.hot_functions(30)]
    cpp = [n for n in names if "<" in n or "&" in n]
    assert cpp, names
    keys = [r.functions.names.index(n) for n in cpp]
    svg = render_svg(r, keys, overview=True, top=30)
    pics = pictures(svg)  # parses
    for n in cpp:
        assert n in pics  # attribute round-trips exactly
        assert f'data-name="{n}"' not in svg
    # a hostile name: quotes, markup, an XML-forbidden control character
    r2 = replace(r, functions=copy.copy(r.functions))
    r2.functions.names = list(r.functions.names)
    evil = "a<b>&c\"d'e\x07f]]>"
    r2.functions.names[keys[0]] = evil
    svg2 = render_svg(r2, [keys[0]])
    g = pictures(svg2)
    assert list(g) == [evil.replace("\x07", "?")]
    assert "\x07" not in svg2 and "]]>" not in svg2


def test_esc():
    assert esc("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#x27;"
    assert esc("x\x00y\ud800") == "x?y?"
    ET.fromstring(f"<t a=\"{esc(chr(1) + '<&>')}\">{esc('&<')}</t>")


@needs_corpus
def test_requested_function_and_empty_result():
    _, perf, binary = CASES[0]
    r = result_of(perf, binary)
    key = r.hot_functions(1)[0].key
    svg = render_svg(r, [key])
    assert list(pictures(svg)) == [r.functions.names[key]]
    assert 'class="overview"' not in svg
    assert re.search(r'<svg [^>]*width="\d+" height="\d+"', svg)


@needs_corpus
def test_big_function_keeps_every_block_and_thins_cold_ones(monkeypatch):
    import bbmap.outputs.svg as svgmod

    case = next((c for c in CASES if c in LBR), CASES[0])
    _, perf, binary = case
    r = result_of(perf, binary)
    fv = max((fv for fv in r.hot_functions(6) if len(fv.blocks)), key=lambda f: len(f.blocks))
    monkeypatch.setattr(svgmod, "COMPACT_BLOCKS", 2)
    g = pictures(render_svg(r, [fv.key]))[fv.name]
    boxes = blocks_in(g)
    assert sorted(int(b.get("data-index")) for b in boxes) == sorted(function_blocks(r, fv.key))
    vals = r.block_count if r.has_lbr else r.block_samples
    for b in boxes:
        rect = next(x for x in b.iter(f"{NS}rect") if x.get("class") == "blk")
        if vals[int(b.get("data-index"))] > 0:
            assert float(rect.get("height")) >= svgmod.MIN_H
            assert [t for t in b.iter(f"{NS}text")]  # hot blocks keep their label


@needs_corpus
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_overview_cells_fill_the_strip_and_hot_cells_stay_visible(case):
    from bbmap.outputs.picture import PictureContext
    from bbmap.outputs.svg import MIN_HOT_CELL, _cell_widths

    _, perf, binary = case
    r = result_of(perf, binary)
    ctx = PictureContext.of(r, "auto", None)
    for fv in r.hot_functions(6):
        blk = function_blocks(r, fv.key)
        if not blk:
            continue
        for avail in (620.0, 60.0):
            w = _cell_widths(ctx, blk, avail)
            assert sum(w.values()) == pytest.approx(avail)
            hot = [b for b in blk if ctx.values[b] > 0]
            if hot and MIN_HOT_CELL * len(hot) <= avail * 0.5:
                assert min(w[b] for b in hot) >= MIN_HOT_CELL - 0.01


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles not built")
def test_edge_cap_is_said_in_the_picture_and_dot_keeps_every_edge():
    from bbmap.outputs.dot import render_dot
    from bbmap.outputs.picture import PictureContext, function_data
    from bbmap.outputs.svg import _function_svg

    _, perf, binary = LBR[0]
    r = result_of(perf, binary)
    ctx = PictureContext.of(r, "auto", None)
    fv = max(r.hot_functions(6), key=lambda f: len(f.edges))
    full = function_data(ctx, fv.key, max_edges=None)
    assert len(full.taken) > 2
    capped = function_data(ctx, fv.key, max_edges=2)
    assert [e.count for e in capped.taken] == [e.count for e in full.taken[:2]]
    svg, _, _ = _function_svg(ctx, capped, "f0", 0)
    doc = "\n".join(svg)
    assert doc.count('class="edge taken') == 2
    assert f"{len(full.taken) - 2} lighter taken edge(s) not drawn" in doc
    dot = render_dot(r, [fv.key])
    assert sum(f"  b{e.src} -> b{e.dst} [label=" in dot for e in full.taken) == len(full.taken)
