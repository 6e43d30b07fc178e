#!/usr/bin/env python3
"""Benchmark ``bbmap report`` against ``bbmap annotate --format json`` on the same profile,
and the page in Chromium.

1. The IP profile of bench_annotate.py (a 20,000-function clang-22 binary, ``perf record
   -e cpu-clock -c 10000`` until >= 500,000 samples; generated once into the work
   directory): time ``bbmap report`` and ``bbmap annotate --format json`` (both with the
   default inference, the disassembly cache filled beforehand), in turn, ``--rounds``
   times; print the medians, their ratio (budget: 2x) and the page's size (budget: 3 MB).
2. Load the page from disk in headless Chromium (Debian's, through selenium): the first
   contentful paint (budget: 1 s) and the script's own time to build the table, then sort
   the function table by each column in both directions and time each (performance.now()
   around the sort and a forced layout; budget: 100 ms), filter it, open a function.

    python bench/bench_report.py [--workdir /tmp/bbmap-bench-report] [--functions 20000]
                                 [--samples 500000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

import bench_annotate  # noqa: E402

SORT_REPEATS = 5


def bench_cli(d: str, exe: str, data: str, rounds: int) -> str:
    cache = os.path.join(d, "disasm-cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = {"BBMAP_CACHE_DIR": cache}
    page = os.path.join(d, "report.html")
    cmds = {
        "annotate --format json": bench_annotate.bbmap_cmd(
            "annotate", data, exe, "--format", "json", "-o", os.path.join(d, "annotate.json")),
        "report": bench_annotate.bbmap_cmd("report", data, exe, "-o", page),
    }
    bench_annotate.timed_cpu(cmds["annotate --format json"], env)  # fills the cache
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    print("  load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for _ in range(rounds):
        for k, c in cmds.items():
            w, u = bench_annotate.timed_cpu(c, env)
            wall[k].append(w)
            cpu[k].append(u)
    for k in cmds:
        print(f"  {k:<24} wall {bench_annotate.spread(wall[k])}   cpu median "
              f"{statistics.median(cpu[k]):.2f} s")
    rw = statistics.median(wall["report"]) / statistics.median(wall["annotate --format json"])
    rc = statistics.median(cpu["report"]) / statistics.median(cpu["annotate --format json"])
    print(f"  ratio report / annotate --format json: wall {rw:.2f}x, cpu {rc:.2f}x "
          "(budget 2x)")
    size = os.path.getsize(page)
    print(f"  report size: {size:,} bytes ({size / 1e6:.2f} MB; budget 3 MB); annotate JSON "
          f"{os.path.getsize(os.path.join(d, 'annotate.json')):,} bytes")
    print("  load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return page


def bench_browser(page: str, rounds: int) -> None:
    from helpers import chromium_driver

    paints, builds, shown = [], [], []
    for _ in range(rounds):
        driver, why = chromium_driver()
        if driver is None:
            print(f"  browser: skipped ({why})")
            return
        try:
            t = time.perf_counter()
            driver.get("file://" + os.path.abspath(page))
            driver.execute_async_script(
                "var done = arguments[arguments.length - 1];"
                " BB.ready.then(function () { done(1); });")
            ready = time.perf_counter() - t
            fcp = driver.execute_script(
                "var e = performance.getEntriesByName('first-contentful-paint')[0];"
                " return e ? e.startTime : null;")
            paints.append(fcp)
            builds.append(driver.execute_script("return BB.timings.table"))
            n = driver.execute_script("return BB.data.functions.name.length")
            if len(paints) == 1:
                print(f"  page: {n:,} functions; ready (blocks inflated, strips drawn) in "
                      f"{ready:.2f} s wall from driver.get")
            sorts = driver.execute_script(
                "var out = {}, keys = BB.functions.opts.columns.filter(function (c) {"
                " return c.sort; }).map(function (c) { return c.key; });"
                "for (var rep = 0; rep < arguments[0]; rep++) {"
                "keys.forEach(function (k) { [1, -1].forEach(function (dir) {"
                " var t = performance.now(); BB.functions.sortBy(k, dir);"
                " document.body.offsetHeight; var name = k + (dir > 0 ? ' asc' : ' desc');"
                " (out[name] = out[name] || []).push(performance.now() - t); }); }); }"
                " return out;", SORT_REPEATS)
            shown.append(driver.execute_script("return BB.timings.tableShown"))
            filt = driver.execute_script(
                "var t = performance.now(); BB.functions.filter('f1234');"
                " document.body.offsetHeight; var a = performance.now() - t;"
                " BB.functions.filter(''); return a;")
            opened = driver.execute_async_script(
                "var done = arguments[arguments.length - 1], t = performance.now();"
                " BB.open(0); var iv = setInterval(function () {"
                " var v = document.getElementById('function');"
                " if (!v.hidden && v.dataset.fn === '0') { clearInterval(iv);"
                " done(performance.now() - t); } }, 5);")
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        finally:
            driver.quit()
    base = baseline_paint(rounds, os.path.dirname(os.path.abspath(page)))
    print(f"  first contentful paint of a 70-byte page on this machine (the floor): median "
          f"{statistics.median(base):.0f} ms")
    print(f"  first contentful paint: median {statistics.median(paints):.0f} ms, max "
          f"{max(paints):.0f} ms over {len(paints)} loads (budget 1000 ms); the script's table "
          f"build {statistics.median(builds):.1f} ms")
    print(f"  function table on screen (script done) at median "
          f"{statistics.median(shown):.0f} ms after navigation start")
    mins = {k: min(v) for k, v in sorts.items()}
    meds = {k: statistics.median(v) for k, v in sorts.items()}
    print(f"  sorting the table ({SORT_REPEATS} times per column and direction, last load), "
          "min / median ms: " + ", ".join(f"{k} {mins[k]:.0f}/{meds[k]:.0f}" for k in sorts))
    print(f"  slowest column: min {max(mins.values()):.1f} ms, median "
          f"{max(meds.values()):.1f} ms; over all sorts median "
          f"{statistics.median([x for v in sorts.values() for x in v]):.1f} ms (budget 100 ms)")
    print(f"  filter by name: {filt:.1f} ms; open the hottest function: {opened:.0f} ms")
    print(f"  console errors: {len(errors)}")


def baseline_paint(rounds: int, d: str) -> list[float]:
    """The first paint of a trivial page: what starting the browser and painting cost here
    (a shared machine's load shows in it as much as in the report's)."""
    from helpers import chromium_driver

    tiny = os.path.join(d, "tiny.html")
    with open(tiny, "w") as fh:
        fh.write("<!DOCTYPE html><html><body><h1>hello</h1><p>tiny page</p></body></html>")
    out = []
    for _ in range(rounds):
        driver, _why = chromium_driver()
        try:
            driver.get("file://" + tiny)
            time.sleep(0.2)
            out.append(driver.execute_script(
                "var e = performance.getEntriesByName('first-contentful-paint')[0];"
                " return e ? e.startTime : null;"))
        finally:
            driver.quit()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/bbmap-bench-report")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=500000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    exe = bench_annotate.build_program(a.workdir, a.functions)
    data = bench_annotate.record_ip(a.workdir, exe, a.samples)
    n = bench_annotate.count_samples(data)
    print(f"IP profile: {n:,} samples, {a.functions:,}-function binary ({data})")
    page = bench_cli(a.workdir, exe, data, a.rounds)
    bench_browser(page, a.rounds)


if __name__ == "__main__":
    main()
