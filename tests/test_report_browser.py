"""``bbmap report`` in a real headless Chromium: what a person sees equals annotate's JSON.

Four corpus profiles (the demo, an LBR case, an IP-only case whose counts are inferred, a
PGO-map case with mismatched branches): each page is loaded from disk, the function table
is sorted and filtered with the keyboard, a function is opened with Enter, and the numbers
in the DOM -- table cells, the function's facts, block and edge tables, the layout view, the
verdicts -- are compared with ``annotate --format json`` (and ``layout --json``, ``verify
--profile --json``); every function the page's script decodes is compared object for
object.  Any console error fails.  Screenshots go to ``$BBMAP_REPORT_SCREENSHOTS`` (the
ones in spec/img/ were taken so) or the test's temporary directory.  Skipped, with the
reason, where Chromium, chromedriver or selenium is missing (.ci/run installs them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import CORPUS, chromium_driver

from bbmap.cli import main

CASES = {
    "demo": ("profiles/demo-plain/perf.data", "demo/layout"),
    "lbr": ("lbr/c22-addrmap-pie-lbr/perf.data", "bin/clang-22/addrmap/layout.pie"),
    "ip": ("ip/c22-addrmap-pie-ip/perf.data", "bin/clang-22/addrmap/layout.pie"),
    "pgo": ("lbr/c22-pgoflip-pie-lbr-shift/perf.data", "bin/clang-22/pgoflip/pgoflip.pie"),
}


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201
    driver, why = chromium_driver()
    if driver is None:
        pytest.skip(why)
    yield driver
    driver.quit()


def _cli(*args: str) -> tuple[int, bytes, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout_bytes, r.stderr


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Per case: (report path, annotate JSON, layout JSON, verify JSON or None)."""
    out = {}
    d = tmp_path_factory.mktemp("reports")
    for name, (perf, binary) in CASES.items():
        perf, binary = _short(CORPUS / perf), _short(CORPUS / binary)
        if not (os.path.exists(perf) and os.path.exists(binary)):
            continue
        html = d / f"{name}.html"
        code, _, err = _cli("report", perf, binary, "-o", str(html))
        assert code == 0, err
        code, js, err = _cli("annotate", perf, binary, "--format", "json")
        assert code == 0, err
        code, lay, err = _cli("layout", perf, binary, "--json")
        assert code == 0, err
        ver = None
        if name == "pgo":
            ver = json.loads(_cli("verify", binary, "--profile", perf, "--json")[1])
        out[name] = (html, json.loads(js), json.loads(lay), ver)
    return out


def _short(p: Path) -> str:
    """Relative to the working directory when under it (the page names the binary as
    given: run from the checkout, the screenshots say ``corpus/demo/layout``)."""
    rel = os.path.relpath(p)
    return str(p) if rel.startswith("..") else rel


def shots_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("BBMAP_REPORT_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def case(pages: dict, name: str) -> tuple:
    if name not in pages:
        pytest.skip(f"corpus case {name} absent")
    return pages[name]


def load(driver, path: Path) -> None:  # noqa: ANN001
    driver.get(path.resolve().as_uri())
    driver.execute_async_script(
        "var done = arguments[arguments.length - 1]; BB.ready.then(function () { done(1); });")


def console_errors(driver) -> list:  # noqa: ANN001
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def table_rows(driver, ident: str) -> list[list[str]]:  # noqa: ANN001
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))"
        ".map(function (tr) { return Array.from(tr.cells).map(function (td) {"
        " return td.textContent; }); });", ident)


def header_keys(driver, ident: str) -> list[str]:  # noqa: ANN001
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' thead th'))"
        ".map(function (th) { return th.dataset.key; });", ident)


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def wait_for_function(driver, i: int) -> None:  # noqa: ANN001
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
        "var v = document.getElementById('function'); return !v.hidden && v.dataset.fn === "
        "String(arguments[0]) && (!BB.pictured(arguments[0]) || "
        "!!(document.getElementById('fn-picture').shadowRoot || {}).firstElementChild);", i))


@pytest.mark.parametrize("name", list(CASES))
def test_table_and_decoded_functions_equal_the_json(browser, pages: dict, name: str) -> None:
    html, doc, _, _ = case(pages, name)
    load(browser, html)
    fns = doc["functions"]
    total = doc["totals"]["samples"]
    keys = header_keys(browser, "fn-rows")
    rows = table_rows(browser, "fn-rows")
    assert len(rows) == min(50, len(fns))
    for i, row in enumerate(rows):
        cell = dict(zip(keys, row))
        fn = fns[i]
        assert cell["name"] == fn["name"]
        assert as_int(cell["samples"]) == fn["samples"]
        assert abs(float(cell["share"].rstrip("%")) - 100 * fn["samples"] / total) <= 0.0051
        assert as_int(cell["blocks"]) == len(fn["blocks"])
        assert as_int(cell["edges"]) == len(fn["edges"])
        assert int(cell["address"], 16) == fn["address"]
        if doc["count_source"] in ("lbr", "inferred"):
            assert as_int(cell["count"]) == fn["count"]
    # every function as the page's script decodes it, object for object
    decoded = browser.execute_async_script(
        "var done = arguments[arguments.length - 1], n = BB.data.functions.name.length, p = [];"
        "for (var i = 0; i < n; i++) p.push(BB.functionJson(i));"
        "Promise.all(p).then(function (all) { done(JSON.stringify(all)); });")
    assert json.loads(decoded) == fns
    # the run: samples and every bucket printed
    run = browser.find_element("id", "run").text
    assert f"{total:,}" in run
    for b, v in doc["totals"]["buckets"]["samples"].items():
        li = browser.find_element("css selector", f'#run li[data-bucket="{b}"]').text
        assert f": {v:,} (" in li
    assert console_errors(browser) == []


def test_sort_filter_and_open_with_the_keyboard(browser, pages: dict, tmp_path: Path) -> None:
    from selenium.webdriver.common.keys import Keys

    html, doc, _, _ = case(pages, "demo")
    fns = doc["functions"]
    load(browser, html)
    shots = shots_dir(tmp_path)
    browser.set_window_size(1400, 1250)  # the run and the whole table
    browser.save_screenshot(str(shots / "report-overview.png"))
    browser.set_window_size(1400, 1000)
    keys = header_keys(browser, "fn-rows")
    button = browser.find_element("css selector", '#fn-rows th[data-key="samples"] button')
    button.send_keys(Keys.ENTER)  # numbers sort descending first
    th = browser.find_element("css selector", '#fn-rows th[data-key="samples"]')
    assert th.get_attribute("aria-sort") == "descending"
    button.send_keys(Keys.ENTER)
    assert th.get_attribute("aria-sort") == "ascending"
    col = keys.index("samples")
    shown = [as_int(r[col]) for r in table_rows(browser, "fn-rows")]
    assert shown == sorted(f["samples"] for f in fns)[:len(shown)]
    name_btn = browser.find_element("css selector", '#fn-rows th[data-key="name"] button')
    name_btn.send_keys(Keys.ENTER)
    names = [r[keys.index("name")] for r in table_rows(browser, "fn-rows")]
    assert names == sorted(f["name"] for f in fns)[:len(names)]
    # filter: every row shown holds the text, and every function holding it is shown
    box = browser.find_element("css selector", "#fn-table input.filter")
    word = "lay_s"
    box.send_keys(word)
    names = [r[keys.index("name")] for r in table_rows(browser, "fn-rows")]
    want = sorted(f["name"] for f in fns if word in f["name"].lower())
    assert names == want and want
    status = browser.find_element("css selector", "#fn-table .status").text
    assert f"showing {len(want)} of {len(want)} matching ({len(fns)} in all)" == status
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    browser.find_element("css selector", '#fn-rows th[data-key="rank"] button').send_keys(
        Keys.ENTER)
    browser.find_element("css selector", '#fn-rows th[data-key="rank"] button').send_keys(
        Keys.ENTER)  # back to hottest first
    # open the hottest function: Enter on its row
    rows = browser.find_elements("css selector", "#fn-rows tbody tr")
    assert rows[0].get_attribute("data-i") == "0"
    rows[1].send_keys(Keys.ARROW_UP)  # arrows move between rows
    assert browser.switch_to.active_element.get_attribute("data-i") == "0"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for_function(browser, 0)
    check_function_view(browser, fns[0], doc)
    browser.save_screenshot(str(shots / "report-function.png"))
    assert browser.execute_script(
        "return document.getElementById('fn-picture').shadowRoot.querySelector('svg')"
        ".getAttribute('width') > 0")
    # the layout view: the table of the plan, and the function's own part
    browser.execute_script("document.getElementById('layout').scrollIntoView()")
    browser.save_screenshot(str(shots / "report-layout.png"))
    browser.execute_script("document.getElementById('fn-layout').scrollIntoView()")
    browser.save_screenshot(str(shots / "report-function-layout.png"))
    assert console_errors(browser) == []


def check_function_view(driver, fn: dict, doc: dict) -> None:  # noqa: ANN001
    facts = driver.find_element("id", "fn-facts").text
    assert f"samples\n{fn['samples']:,}" in facts
    assert f"address\n{fn['address']:#x}" in facts
    assert f"period\n{fn['period']:,}" in facts
    blocks = table_rows(driver, "fn-blocks")
    assert len(blocks) == len(fn["blocks"])
    for row, b in zip(blocks, fn["blocks"]):
        assert [as_int(row[0]), int(row[1], 16), as_int(row[2]), as_int(row[3]),
                as_int(row[4]), as_int(row[5])] == [b["id"], b["address"], b["size"],
                                                    b["samples"], b["period"], b["count"]]
        assert row[-1].split() == b["flags"]
    edges = table_rows(driver, "fn-edges")
    assert [[r[0], r[1], r[2], as_int(r[3])] for r in edges] == [
        [str(e["from"]), str(e["to"]), e["kind"], e["count"]] for e in fn["edges"]]
    ranges = table_rows(driver, "fn-ranges")
    assert [[int(r[0], 16), as_int(r[1]), as_int(r[2]), as_int(r[3])] for r in ranges] == [
        [r["address"], r["blocks"], r["samples"], r["period"]] for r in fn["ranges"]]
    if doc["count_source"] == "inferred":
        assert "inferred" in driver.find_element("id", "function").text


def test_layout_view_equals_layout_json(browser, pages: dict) -> None:
    from selenium.webdriver.common.keys import Keys

    html, doc, lay, _ = case(pages, "demo")
    load(browser, html)
    keys = header_keys(browser, "layout-rows")
    rows = table_rows(browser, "layout-rows")
    assert len(rows) == min(50, len(lay["functions"]))
    for row, f in zip(rows, lay["functions"]):
        cell = dict(zip(keys, row))
        assert cell["name"] == f["name"]
        assert cell["hot"] == f"{len(f['cluster'])}/{f['blocks']}"
        assert float(cell["before"].replace(",", "")) == pytest.approx(
            f["score"]["intra_before"], abs=0.051)
        assert float(cell["after"].replace(",", "")) == pytest.approx(
            f["score"]["intra_after"], abs=0.051)
        assert as_int(cell["hotb"]) == f["hot_bytes"]
        assert as_int(cell["coldb"]) == f["cold_bytes"]
        assert as_int(cell["ft"]) == f["fallthroughs"]["gained"]
    browser.find_elements("css selector", "#layout-rows tbody tr")[0].send_keys(Keys.ENTER)
    first = lay["functions"][0]
    i = [f["name"] for f in doc["functions"]].index(first["name"])
    wait_for_function(browser, i)
    part = browser.find_element("id", "fn-layout").text
    assert f"cluster (new order)\n{' '.join(map(str, first['cluster']))}" in part
    assert f"cold part\n{' '.join(map(str, first['cold'])) or 'none'}" in part
    assert console_errors(browser) == []


def test_inferred_counts_say_so(browser, pages: dict) -> None:
    html, doc, _, _ = case(pages, "ip")
    assert doc["count_source"] == "inferred"
    load(browser, html)
    browser.execute_script("BB.open(0)")
    wait_for_function(browser, 0)
    check_function_view(browser, doc["functions"][0], doc)
    assert console_errors(browser) == []


def test_pgo_verdicts_worst_first(browser, pages: dict, tmp_path: Path) -> None:
    html, doc, _, ver = case(pages, "pgo")
    load(browser, html)
    rows = table_rows(browser, "worst-branches")
    want = ver["worst_branches"]
    assert len(rows) == min(200, len(want)) > 0
    for row, r in zip(rows, want):
        assert row[1] == r["function"] and as_int(row[2]) == r["block"]
        assert float(row[7].replace(",", "")) == pytest.approx(r["executions"], rel=1e-5)
    browser.execute_script("document.getElementById('verify').scrollIntoView()")
    browser.save_screenshot(str(shots_dir(tmp_path) / "report-verify.png"))
    # the mismatched function's own view lists its verdicts
    name = want[0]["function"]
    i = [f["name"] for f in doc["functions"]].index(name)
    browser.execute_script("BB.open(arguments[0])", i)
    wait_for_function(browser, i)
    assert "PGO map verdicts" in browser.find_element("id", "function").text
    assert console_errors(browser) == []


def test_heat_colours_are_the_pictures(browser, pages: dict) -> None:
    """The strip's and the cells' colours are picture.py's HeatScale (the SVG's)."""
    from bbmap.outputs.picture import HeatScale

    html, *_ = case(pages, "demo")
    load(browser, html)
    for vmax in (1, 7, 1327, 10**6):
        vals = sorted({0, 1, 2, vmax // 3, vmax // 2, vmax - 1, vmax})
        got = browser.execute_script(
            "var vmax = arguments[1]; return arguments[0].map(function (v) {"
            " return BB.fill(v, vmax); });", vals, vmax)
        assert got == [HeatScale("samples", vmax).fill(v) for v in vals]


def test_static_fallback_without_scripts(tmp_path: Path, pages: dict) -> None:
    """With scripts off the noscript tables are what shows: load the page in a browser
    with JavaScript disabled and read them."""
    html, doc, _, _ = case(pages, "demo")
    from selenium import webdriver  # noqa: F401 - present when the fixture ran

    driver, why = chromium_driver()
    if driver is None:
        pytest.skip(why)
    try:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        driver.get(html.resolve().as_uri())
        text = driver.find_element("tag name", "body").text
        for fn in doc["functions"][:5]:
            assert fn["name"] in text
            assert f"{fn['samples']:,}" in text
        assert "blocks in address order" in text
        driver.save_screenshot(str(shots_dir(tmp_path) / "report-noscript.png"))
    finally:
        driver.quit()
