"""``bbmap report``: the numbers the page embeds are annotate's JSON's, on every corpus profile.

The oracle is ``annotate --format json`` (the JSON writer's bytes, parsed): every function,
block, range and edge the page can show is decoded from the page's own embedded data
(``read_report``) and compared object for object, key order included; the layout rows with
``bbmap layout --json``'s, the verdicts with ``verify --profile --json``'s.  The page's script
decodes the same columns; tests/test_report_browser.py holds what it shows to the JSON too.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import CORPUS, ip_profile_cases, load_manifest

from bbmap.cli import main

DEMO = (str(CORPUS / "profiles/demo-plain/perf.data"), str(CORPUS / "demo/layout"))
PGO = (str(CORPUS / "lbr/c22-pgoflip-pie-lbr-shift/perf.data"),
       str(CORPUS / "bin/clang-22/pgoflip/pgoflip.pie"))


def corpus_profiles() -> list:
    """Every manifest profile that names one binary (plain, LBR, pipe, zstd, ...), and the
    IP-only ones (inferred counts)."""
    m = load_manifest()
    bins = {b["name"]: str(CORPUS / b["path"]) for b in m.get("binaries", [])}
    out = []
    for p in m.get("profiles", []):
        if len(p.get("binaries", [])) != 1:
            continue
        perf, binary = str(CORPUS / p["path"]), bins.get(p["binaries"][0], "")
        if os.path.exists(perf) and os.path.exists(binary):
            out.append(pytest.param(perf, binary, id=p["name"]))
    out += [pytest.param(perf, binary, id=name) for name, perf, binary in ip_profile_cases()]
    return out


def cli(*args: str) -> tuple[int, bytes, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout_bytes, r.stderr


def build(perf: str, binary: str, **kw):  # noqa: ANN201 - (result, doc, data, html)
    from bbmap.cli.report import has_pgo_map
    from bbmap.layout.plan import plan_layout
    from bbmap.outputs.jsonout import render_json_bytes
    from bbmap.outputs.report_html import render_report_html, report_data
    from bbmap.run import annotate
    from bbmap.verify.api import judge_profile

    result = annotate([perf], binary, cluster_stats=True)
    doc = json.loads(render_json_bytes(result))
    plan = plan_layout(result) if result.status == "ok" else None
    verdicts = (judge_profile(result, binary=binary, profiles=[perf])
                if has_pgo_map(result) else None)
    data = report_data(result, plan=plan, verdicts=verdicts, **kw)
    return result, doc, data, plan, verdicts, render_report_html(data)


@pytest.mark.parametrize("perf,binary", corpus_profiles())
def test_every_number_equals_annotate_json(perf: str, binary: str) -> None:
    from bbmap.outputs.picture import heat_metric
    from bbmap.outputs.report_html import function_json, read_report

    result, doc, data, plan, verdicts, page_bytes = build(perf, binary)
    page, detail, pictures = read_report(page_bytes)
    fns = doc["functions"]
    f = page["functions"]
    assert len(f["name"]) == len(fns)
    for i, want in enumerate(fns):
        assert function_json(page, detail, i) == want, want["name"]
        assert list(function_json(page, detail, i)) == list(want)  # key order too
    # the header and the warnings, as the JSON has them
    assert page["run"] == {k: v for k, v in doc.items() if k != "functions"}
    # the heat strip's scale: each function's hottest block of the heat metric
    metric, _ = heat_metric(result, "auto")
    assert page["heat"]["metric"] == metric
    assert f["heat_max"] == [max((b[metric] for b in fn["blocks"]), default=0) for fn in fns]
    assert f["blocks"] == [len(fn["blocks"]) for fn in fns]
    assert f["edges"] == [len(fn["edges"]) for fn in fns]
    # pictures: the hottest functions with blocks, each the SVG `bbmap cfg` draws for it
    with_blocks = [i for i, fn in enumerate(fns) if fn["blocks"]][:50]
    assert sorted(map(int, pictures)) == with_blocks
    assert f["pictured"] == with_blocks
    for i in with_blocks[:3]:
        assert pictures[str(i)].startswith("<svg ") and fns[i]["name"].split("(")[0] in \
            pictures[str(i)]
    if plan is not None:
        _layout_equals_plan(page, detail, plan, fns)
    if verdicts is not None:
        v = verdicts.to_json()
        assert page["verify"]["summary"] == v["summary"]
        assert page["verify"]["worst_branches"] == v["worst_branches"][:200]
        assert page["verify"]["worst_blocks"] == v["worst_blocks"][:200]


def _layout_equals_plan(page: dict, detail: dict, plan, fns: list[dict]) -> None:  # noqa: ANN001
    from bbmap.outputs.propeller import render_report_json

    want = json.loads(render_report_json(plan))  # what `bbmap layout --json` writes
    lay = page["layout"]
    rows = lay["rows"]
    assert lay["totals"] == want["totals"]
    assert lay["function_order"] == want["function_order"]
    names = [fn["name"] for fn in fns]
    for i, w in enumerate(want["functions"]):
        assert rows["name"][i] == w["name"]
        assert rows["blocks"][i] == w["blocks"]
        for k, v in w["score"].items():
            assert rows[k][i] == v
        assert rows["fallthrough_before"][i] == w["fallthroughs"]["before"]
        assert rows["fallthrough_after"][i] == w["fallthroughs"]["after"]
        assert (rows["hot_bytes"][i], rows["cold_bytes"][i]) == (w["hot_bytes"], w["cold_bytes"])
        d = detail["layout"]
        assert d["cluster"][d["cluster_ptr"][i]:d["cluster_ptr"][i + 1]] == w["cluster"]
        assert d["cold"][d["cold_ptr"][i]:d["cold_ptr"][i + 1]] == w["cold"]
        assert names[rows["fn"][i]] == w["name"]


def test_cli_report_is_cli_annotate_json(tmp_path: Path) -> None:
    """The command's page against the command's JSON (the same options both ways)."""
    from bbmap.outputs.report_html import function_json, read_report

    perf, binary = DEMO
    if not os.path.exists(perf):
        pytest.skip("demo profile absent")
    out = tmp_path / "r.html"
    code, _, err = cli("report", perf, binary, "-o", str(out))
    assert code == 0, err
    code, js, err = cli("annotate", perf, binary, "--format", "json")
    assert code == 0, err
    doc = json.loads(js)
    page, detail, _ = read_report(out.read_bytes())
    assert [function_json(page, detail, i) for i in range(len(doc["functions"]))] == \
        doc["functions"]
    text = out.read_text()
    # self-contained: nothing fetched when viewed
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "<script src" not in text and "<link " not in text
    # the static fallback lists the hottest functions with their numbers
    nos = text[text.index("<noscript>"):text.index("</noscript>")]
    for fn in doc["functions"][:5]:
        assert f"<td>{fn['name']}</td>" in nos
        assert f"<td class=num>{fn['samples']:,}</td>" in nos
    # a second run writes the same bytes
    out2 = tmp_path / "r2.html"
    assert cli("report", perf, binary, "-o", str(out2))[0] == 0
    assert out2.read_bytes() == out.read_bytes()


def test_pgo_map_verdicts_worst_first(tmp_path: Path) -> None:
    perf, binary = PGO
    if not (os.path.exists(perf) and os.path.exists(binary)):
        pytest.skip("pgoflip LBR profile absent")
    out = tmp_path / "r.html"
    code, _, err = cli("report", perf, binary, "-o", str(out))
    assert code == 0, err
    code, js, err = cli("verify", binary, "--profile", perf, "--json")
    want = json.loads(js)
    from bbmap.outputs.report_html import read_report

    page, _, _ = read_report(out.read_bytes())
    v = page["verify"]
    assert v["ok"] is want["ok"] is False
    assert v["worst_branches"] == want["worst_branches"][:200]
    text = out.read_text()
    assert 'id="worst-branches"' in text
    first = want["worst_branches"][0]
    row = text[text.index('id="worst-branches"'):]
    row = row[row.index("<tbody>"):]
    row = row[:row.index("</tr>")]
    assert f"<td>{first['function']}</td>" in row
    assert f"<td class=num>{first['block']}</td>" in row


def test_intervals_are_carried_when_the_result_has_them() -> None:
    """Inferred counts may carry ``[low, high]`` per block and edge (high unbounded: null);
    the page shows them when present."""
    import numpy as np

    from bbmap.outputs.report_html import (
        function_json,
        read_report,
        render_report_html,
        report_data,
    )
    from bbmap.run import annotate

    perf, binary = DEMO
    if not os.path.exists(perf):
        pytest.skip("demo profile absent")
    r = annotate([perf], binary)
    r = replace(r, block_low=np.maximum(r.block_count - 1, 0),
                block_high=np.where(r.block_count > 0, r.block_count + 2, -1),
                edge_low=r.edge_count // 2, edge_high=r.edge_count * 2)
    page, detail, _ = read_report(render_report_html(report_data(r)))
    fn = function_json(page, detail, 0)
    hot = r.hot_functions(1)[0]
    for b, g in zip(fn["blocks"], hot.blocks.tolist()):
        c = int(r.block_count[g])
        assert b["interval"] == [max(c - 1, 0), c + 2 if c > 0 else None]
    assert all(e["interval"] == [e["count"] // 2, e["count"] * 2] for e in fn["edges"])


def test_usage_and_nothing_mapped(tmp_path: Path) -> None:
    perf, binary = DEMO
    if not os.path.exists(perf):
        pytest.skip("demo profile absent")
    code, _, err = cli("report", perf, binary)
    assert code == 2 and "-o" in err
    code, _, err = cli("report", binary, perf, "-o", str(tmp_path / "x.html"))
    assert code == 2 and "binary" in err
    keep = tmp_path / "keep.html"
    keep.write_text("previous")
    code, _, err = cli("report", perf, binary, "--pid", "1", "-o", str(keep))
    assert code == 1 and "nothing" in err
    assert keep.read_text() == "previous"


def test_from_a_parquet_aggregate(tmp_path: Path) -> None:
    """An aggregate is an input like perf.data: the page equals annotate's JSON of it."""
    pytest.importorskip("pyarrow")
    from bbmap.outputs.report_html import function_json, read_report

    perf, binary = DEMO
    if not os.path.exists(perf):
        pytest.skip("demo profile absent")
    agg = tmp_path / "demo.parquet"
    assert cli("annotate", perf, binary, "--format", "aggregate", "-o", str(agg))[0] == 0
    out = tmp_path / "r.html"
    code, _, err = cli("report", str(agg), binary, "-o", str(out))
    assert code == 0, err
    code, js, err = cli("annotate", str(agg), binary, "--format", "json")
    doc = json.loads(js)
    page, detail, _ = read_report(out.read_bytes())
    assert page["run"] == {k: v for k, v in doc.items() if k != "functions"}
    assert [function_json(page, detail, i) for i in range(len(doc["functions"]))] == \
        doc["functions"]
