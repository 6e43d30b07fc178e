"""Every output of every command over the corpora, for two source trees, compared byte for byte.

A refactor that must not change what bbmap prints or writes is checked by running the same
command lines (annotate in every format, layout, cfg, report, dump, verify, verify --profile,
lookup, merge) over ``corpus/manifest.json``, ``corpus/handmade/manifest.json``, the Go and
the precise profiles, once with each tree first on ``PYTHONPATH``, and comparing each
command's stdout, stderr, exit code and every file it wrote.  Both runs read the same corpus
(the one next to this script) and write under the same directory names, so paths printed
in outputs are equal; each run has its own empty disassembly cache.

    python bench/compare_outputs.py --tree /path/to/before --tree . --out /tmp/cmp -j 2
    python bench/compare_outputs.py --tree . --baseline /tmp/cmp/tree0/digests.json --out /tmp/cmp

prints one line per differing command and a summary; exit 0 when everything is identical.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "corpus"

ANNOTATE_FORMATS = ("text", "json", "csv", "propeller", "symorder", "fdata", "bolt-preagg")
TIMEOUT = 900  # seconds a command may run


def _profiles() -> list[tuple[str, str, str, list[str]]]:
    """(name, perf.data, binary, extra options) of every profile of the corpora."""
    m = json.loads((CORPUS / "manifest.json").read_text())
    bins = {b["name"]: b["path"] for b in m["binaries"]}
    out = []
    for p in m["profiles"]:
        for b in p["binaries"]:
            out.append((f"{p['name']}@{b}", p["path"], bins[b], []))
    for d in sorted((CORPUS / "go").iterdir()):
        kind = d.name.removeprefix("go-").removesuffix("-prof")
        exe = CORPUS / "bin" / "go" / kind / "gohot"
        if (d / "perf.data").exists() and exe.exists():
            out.append((d.name, f"go/{d.name}/perf.data", f"bin/go/{kind}/gohot",
                        ["--name", "gohot"]))
    for d in sorted((CORPUS / "precise").iterdir()):
        info = json.loads((d / "precise-info.json").read_text()) \
            if (d / "precise-info.json").exists() else {}
        b = info.get("binary")
        name = d.name.removesuffix("-precise").split("-precise-")[0]
        path = bins.get(b) if b else bins.get(name)
        if path and (d / "perf.data").exists():
            out.append((d.name, f"precise/{d.name}/perf.data", path, []))
    return out


def _binaries() -> list[tuple[str, str]]:
    m = json.loads((CORPUS / "manifest.json").read_text())
    h = json.loads((CORPUS / "handmade" / "manifest.json").read_text())
    return [(b["name"], b["path"]) for b in m["binaries"]] + \
        [(b["name"], f"handmade/{b['path']}") for b in h["binaries"]]


def _addresses(path: Path) -> list[str]:
    """A few addresses to look up: the entry point and the first function symbols."""
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as fh:
            e = ELFFile(fh)
            out = [hex(e.header.e_entry)]
            st = e.get_section_by_name(".symtab")
            if st is not None:
                f = sorted({s["st_value"] for s in st.iter_symbols()
                            if s["st_info"]["type"] == "STT_FUNC" and s["st_value"]})
                out += [hex(a) for a in f[:3]] + [hex(a + 5) for a in f[:2]]
            return out
    except Exception:  # noqa: BLE001 - a damaged file: one address still exercises lookup
        return ["0x1000"]


def jobs() -> list[tuple[str, list[str], list[str]]]:
    """(id, argv after ``bbmap``, output file names) of every command line."""
    out: list[tuple[str, list[str], list[str]]] = []
    for name, perf, binary, extra in _profiles():
        for fmt in ANNOTATE_FORMATS:
            out.append((f"annotate-{fmt}/{name}", ["annotate", perf, binary, "--format", fmt,
                                                   *extra], []))
        out.append((f"annotate-aggregate/{name}",
                    ["annotate", perf, binary, "--format", "aggregate", "-o", "@OUT/a.parquet",
                     *extra], ["a.parquet"]))
        out.append((f"layout/{name}", ["layout", perf, binary, "--json",
                                       "--cc-profile", "@OUT/cc.txt", "--ld-profile",
                                       "@OUT/ld.txt", *extra], ["cc.txt", "ld.txt"]))
        out.append((f"layout-text/{name}", ["layout", perf, binary, *extra], []))
        for fmt in ("svg", "dot"):
            out.append((f"cfg-{fmt}/{name}", ["cfg", perf, binary, "--format", fmt, "--top",
                                              "3", "-o", f"@OUT/cfg.{fmt}", *extra],
                        [f"cfg.{fmt}"]))
        out.append((f"verify-profile/{name}", ["verify", binary, "--profile", perf, "--json",
                                               *extra], []))
        out.append((f"report/{name}", ["report", perf, binary, "--pictures", "3", "-o",
                                       "@OUT/r.html", *extra], ["r.html"]))
    for name, binary in _binaries():
        out.append((f"dump/{name}", ["dump", binary], []))
        out.append((f"dump-json/{name}", ["dump", binary, "--json"], []))
        out.append((f"verify/{name}", ["verify", binary, "--coverage"], []))
        out.append((f"verify-json/{name}", ["verify", binary, "--json"], []))
        addrs = _addresses(CORPUS / binary)
        out.append((f"lookup/{name}", ["lookup", binary, *addrs, "--explain", "--json"], []))
        out.append((f"lookup-text/{name}", ["lookup", binary, *addrs], []))
    return out


def merge_jobs(prev: Path) -> list[tuple[str, list[str], list[str]]]:
    """Merges of the aggregates written by the first pass, grouped by binary, and annotate
    of each merge (what fleet's reduction and ``annotate -f aggregate`` read)."""
    by_binary: dict[str, list[str]] = {}
    for name, _perf, binary, extra in _profiles():
        if extra:
            continue
        agg = prev / f"annotate-aggregate/{name}".replace("/", "__") / "a.parquet"
        if agg.exists():
            by_binary.setdefault(binary, []).append(str(agg))
    out = []
    for binary, aggs in sorted(by_binary.items()):
        key = binary.replace("/", "_")
        out.append((f"merge/{key}", ["merge", *aggs, "-o", "@OUT/m.parquet"], ["m.parquet"]))
        for fmt in ("json", "text", "fdata"):
            out.append((f"annotate-merged-{fmt}/{key}",
                        ["annotate", *aggs, binary, "--format", fmt], []))
    return out


def run_one(tree: Path, out: Path, job: tuple[str, list[str], list[str]],
            cache: Path) -> dict:
    jid, argv, files = job
    d = out / jid.replace("/", "__")
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    argv = [a.replace("@OUT", str(d)) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(cache),
           "COLUMNS": "120", "TZ": "UTC", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}
    try:
        r = subprocess.run([sys.executable, "-m", "bbmap", *argv], cwd=CORPUS, env=env,
                           capture_output=True, timeout=TIMEOUT, check=False)
        rc, stdout, stderr = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:  # said as an exit code, never a lost command
        rc, stdout, stderr = f"timeout after {TIMEOUT} s", e.stdout or b"", e.stderr or b""
    digest = {"rc": rc,
              "stdout": hashlib.sha256(stdout).hexdigest(),
              "stderr": hashlib.sha256(stderr.replace(str(d).encode(), b"@OUT")).hexdigest()}
    (d / "stdout").write_bytes(stdout)
    (d / "stderr").write_bytes(stderr)
    for f in files:
        p = d / f
        digest[f] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return {"id": jid, **digest}


def run_tree(tree: Path, out: Path, workers: int) -> dict[str, dict]:
    cache = Path(tempfile.mkdtemp(prefix="bbmap-cmp-cache-"))
    res: dict[str, dict] = {}
    try:
        for phase in (jobs, lambda: merge_jobs(out)):
            todo = phase()
            with concurrent.futures.ThreadPoolExecutor(workers) as ex:
                for r in ex.map(lambda j: run_one(tree, out, j, cache), todo):
                    res[r["id"]] = r
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    (out / "digests.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True,
                    help="a source tree (its bbmap/ is imported); give two to compare")
    ap.add_argument("--out", required=True, help="work directory (one subdirectory a tree)")
    ap.add_argument("-j", type=int, default=2, help="commands run at once")
    ap.add_argument("--baseline", help="the digests.json of an earlier run to compare with "
                    "(then one --tree is enough)")
    a = ap.parse_args()
    runs = [json.loads(Path(a.baseline).read_text())] if a.baseline else []
    for t in a.tree:
        # the same output path for every tree: paths printed in outputs compare equal
        work = Path(a.out) / "run"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        runs.append(run_tree(Path(t).resolve(), work, a.j))
        i = len(runs) - 1  # tree0 is the baseline's when --baseline is given
        shutil.rmtree(Path(a.out) / f"tree{i}", ignore_errors=True)
        work.rename(Path(a.out) / f"tree{i}")
    if len(runs) < 2:
        print(f"{len(runs[0])} commands run; digests in {a.out}/tree0/digests.json")
        return 0
    base, new = runs[0], runs[1]
    diff = sorted(k for k in set(base) | set(new) if base.get(k) != new.get(k))
    for k in diff:
        b, n = base.get(k, {}), new.get(k, {})
        what = [f for f in sorted(set(b) | set(n)) if b.get(f) != n.get(f)]
        only = "" if k in base and k in new else \
            f" (run by the {'second' if k in new else 'first'} tree only)"
        print(f"DIFF {k}: {', '.join(what)}{only}")
    outputs = sum(len(r) - 1 for r in base.values())
    same = sum(sum(1 for f in r if f != "id" and new.get(k, {}).get(f) == r[f])
               for k, r in base.items())
    missing = sum(1 for r in [*base.values(), *new.values()] for f in r
                  if f != "id" and r[f] is None)
    timeouts = sorted(k for k, r in {**base, **new}.items() if str(r["rc"]).startswith("timeout"))
    print(f"{len(base)} commands, {outputs} outputs (stdout, stderr, exit code, each file "
          f"written); {same} of {outputs} identical; {len(diff)} commands differ; "
          f"{missing} expected files were not written (by either tree); "
          f"{len(timeouts)} timed out{': ' + ', '.join(timeouts) if timeouts else ''}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
