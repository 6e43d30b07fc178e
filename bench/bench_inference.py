#!/usr/bin/env python3
"""Accuracy and speed of profile inference (bbmap/inference) against exact counts.

Accuracy: for every IP-only corpus profile (``corpus/manifest.json`` ``ip_profiles``: real
``perf record -e cpu-clock:u`` runs of the same binary and input as an LBR case, whose
``exact-counts.json`` holds every block's executions and every taken branch of that run
from a valgrind trace), print the weighted error ``sum|est*s - exact| / sum exact`` (``s``
scales the estimate to the exact total) for block counts and for CFG edge counts, for:

* naive: samples per block over its instruction count, edges split in proportion to the
  successors' estimates (no flow);
* inferred: bbmap's min-cost-flow inference (``bbmap.inference``), per sample model;
* lbr: the LBR profile of the same run (``corpus/lbr/<case>``), bbmap's LBR counts.

Then the precise instruction-sample profiles (``precise_profiles``: ``instructions:upp``,
one sample every ~250 retired instructions, no skid, ~20,000 samples in the binary, made by
``corpus/tools/precise.py`` from a valgrind trace whose ``exact-counts.json`` is the truth;
and a bench_e2e program directory's ``precise/``): the same errors for naive, for
``bbmap.annotate(..., inference="on")`` with its default options (whatever sample model the
library picks for the event, named in the table) and for the LBR profile of the same run.

Noise floor (``--noise-floor N``): for each precise profile, N profiles drawn from the
exact counts themselves (each block's samples Poisson with mean ``exact executions x
units / period`` at the real profile's sample total, at its block start), annotated the
same way: the error a perfect, unbiased sampler leaves at that sample count, beside the
real profile's and at 10x the samples.  A real profile's error near its floor is sampling
noise, not a defect of the sample model.

Speed (``--speed``): inference for every function with samples of the 20,000-function
binary of bench_annotate.py (built and recorded there, cached in its work directory),
each solver, one network for all functions vs one solver call per function.

    python bench/bench_inference.py [--speed] [--workdir /tmp/bbmap-bench-annotate]
                                    [--noise-floor 8] [--e2e DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bbmap.binary import load_binary  # noqa: E402
from bbmap.cfg import S_FALLTHROUGH, recover_cfg  # noqa: E402
from bbmap.inference.counts import block_weights, infer_counts  # noqa: E402
from bbmap.inference.weights import locate, precise_weights  # noqa: E402
from bbmap.run import annotate  # noqa: E402

CORPUS = os.path.join(os.path.dirname(HERE), "corpus")
E2E_DEFAULT = "/work/cache/e2e/run-zstd/zstd"  # bench_e2e.py's zstd work directory


# ----------------------------------------------------------------------------- truth
def truth_of(exact: dict, cfg) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """(executions per block, -1 where unknown; exact count per CFG edge (u, v)).

    A taken edge's count is the exact count of that branch.  A fall-through's is the
    block's executions less every taken branch out of the block, whatever its target: a
    conditional tail call (``jns other_function``) leaves the function, and a jump to the
    function's own entry leaves the block, without falling through.  Calls are not
    subtracted: they return into the block.
    """
    m = cfg.block_map
    start = cfg.block_start
    nonempty = m.block_size > 0
    by_addr = {int(a): i for i, a in enumerate(start.tolist()) if nonempty[i]}
    bt = np.full(m.num_blocks, -1, np.int64)
    for b in exact["blocks"]:
        i = by_addr.get(int(b["address"], 16))
        if i is not None and b["count"] is not None:
            bt[i] = b["count"]
    # empty blocks: executions of the block they fall into
    for i in np.flatnonzero(~nonempty).tolist():
        j = i
        while j < m.num_blocks and not nonempty[j]:
            j += 1
        if j < m.num_blocks and start[j] == start[i]:
            bt[i] = bt[j]
    end = start + m.block_size
    order = np.argsort(start, kind="stable")
    ss = start[order]

    def block_of(addr: int) -> int:
        k = int(np.searchsorted(ss, addr, side="right")) - 1
        while k >= 0 and not (start[order[k]] <= addr < end[order[k]]):
            k -= 1
        return int(order[k]) if k >= 0 else -1

    calls = set(cfg.call_addr.tolist())
    taken: dict[tuple[int, int], int] = {}
    out_of_block: dict[int, int] = {}
    for e in exact["edges"]:
        f, t = int(e["from"], 16), int(e["to"], 16)
        u = block_of(f)
        if u < 0 or f in calls:
            continue
        out_of_block[u] = out_of_block.get(u, 0) + e["count"]
        v = by_addr.get(t, -1)
        if v < 0 or cfg.block_func[u] != cfg.block_func[v]:
            continue
        # a branch to the entry of its own function is a (recursive) call, not a CFG edge
        if v == m.function_blocks(int(cfg.block_func[v])).start:
            continue
        taken[(u, v)] = taken.get((u, v), 0) + e["count"]
    src, dst, kind = cfg.edges()
    et: dict[tuple[int, int], int] = {}
    for u, v, k in zip(src.tolist(), dst.tolist(), kind.tolist()):
        if k == S_FALLTHROUGH:
            if bt[u] >= 0:
                et[(u, v)] = max(int(bt[u]) - out_of_block.get(u, 0), 0)
        else:
            et[(u, v)] = taken.get((u, v), 0)
    return bt, et


def weighted_error(est: dict | np.ndarray, truth: dict | np.ndarray) -> float:
    if isinstance(truth, dict):
        keys = list(truth)
        t = np.array([truth[k] for k in keys], np.float64)
        e = np.array([est.get(k, 0) for k in keys], np.float64)
    else:
        ok = truth >= 0
        t, e = truth[ok].astype(np.float64), np.asarray(est)[ok].astype(np.float64)
    if not t.sum():
        return 0.0
    s = t.sum() / e.sum() if e.sum() else 0.0
    return float(np.abs(e * s - t).sum() / t.sum())


def naive_edges(w: np.ndarray, cfg) -> dict[tuple[int, int], float]:
    src, dst, _ = cfg.edges()
    c = w.astype(np.float64)
    tot = np.bincount(src, weights=c[dst], minlength=len(c))
    deg = np.bincount(src, minlength=len(c))
    share = np.where(tot[src] > 0, c[dst] / np.where(tot[src] > 0, tot[src], 1),
                     1.0 / np.maximum(deg[src], 1))
    return dict(zip(zip(src.tolist(), dst.tolist()), (c[src] * share).tolist()))


def edges_dict(f: np.ndarray, t: np.ndarray, c: np.ndarray) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for u, v, n in zip(f.tolist(), t.tolist(), c.tolist()):
        out[(u, v)] = out.get((u, v), 0) + n
    return out


# ----------------------------------------------------------------------------- accuracy
def _json(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def annotate_ip(path: str, binary: str):  # noqa: ANN201
    """(result without inference, IP histogram of the samples in blocks) of a profile:
    the histogram is annotate's address aggregates (``res.addresses``, ELF vaddrs)."""
    res = annotate([path], binary, inference="off", addresses=True)
    addr = res.addresses
    loc = locate(recover_cfg(load_binary(binary)), addr.ip_addr) >= 0
    return res, (addr.ip_addr[loc], addr.ip_samples[loc])


def cases(e2e_dirs: list[str]) -> list[dict]:
    """The corpus IP profiles, the plain profiles of LBR cases' inputs, then every
    ``ip*.perf.data`` of each bench_e2e program directory (``baseline``, ``ip.perf.data``,
    ``lbr/exact-counts.json``, ``lbr/perf.data``: bench/e2e's work directory layout)."""
    man = _json(os.path.join(CORPUS, "manifest.json"))
    bins = {b["name"]: os.path.join(CORPUS, b["path"]) for b in man["binaries"]}
    lbrs = {p["name"]: p for p in man["profiles"] if "lbr" in p.get("kinds", [])}
    out = []
    for ip in man.get("ip_profiles", []):
        lbr = lbrs.get(ip["lbr_case"])
        out.append({"name": ip["name"], "binary": bins[ip["binaries"][0]],
                    "ip": os.path.join(CORPUS, ip["path"]),
                    "exact": os.path.join(CORPUS, ip["exact_counts"]),
                    "lbr": os.path.join(CORPUS, lbr["path"]) if lbr else None})
    # plain cpu-clock profiles of a longer run of an LBR case's input (pgoflip: 200,000
    # and 130,000 iterations against the traced 100 and 60): the same per-iteration paths
    by_name = {p["name"]: p for p in man["profiles"]}
    for p in man["profiles"]:
        if "plain" not in p.get("kinds", []) or not p["name"].endswith("-plain"):
            continue
        stem, _, inp = p["name"][:-len("-plain")].rpartition("-")
        lbr = by_name.get(f"{stem}-lbr-{inp}")
        if lbr is None or "exact_counts" not in lbr or stem not in bins:
            continue
        out.append({"name": p["name"], "binary": bins[stem],
                    "ip": os.path.join(CORPUS, p["path"]),
                    "exact": os.path.join(CORPUS, lbr["exact_counts"]),
                    "lbr": os.path.join(CORPUS, lbr["path"])})
    for d in e2e_dirs:
        exact = os.path.join(d, "lbr", "exact-counts.json")
        if not os.path.exists(exact):
            print(f"{d}: no lbr/exact-counts.json, skipped", file=sys.stderr)
            continue
        lbr = os.path.join(d, "lbr", "perf.data")
        for f in sorted(os.listdir(d)):
            if f.startswith("ip") and f.endswith(".perf.data"):
                name = os.path.basename(os.path.normpath(d)) + f[2:-len(".perf.data")]
                out.append({"name": name, "binary": os.path.join(d, "baseline"),
                            "ip": os.path.join(d, f), "exact": exact,
                            "lbr": lbr if os.path.exists(lbr) else None})
    return out


def accuracy(models: list[str], solver: str, e2e_dirs: list[str] = ()) -> list[dict]:
    rows = []
    for case in cases(list(e2e_dirs)):
        binary = case["binary"]
        cfg = recover_cfg(load_binary(binary))
        bt, et = truth_of(_json(case["exact"]), cfg)
        res, ip = annotate_ip(case["ip"], binary)
        row = {"program": case["name"], "samples_in_blocks": int(res.block_samples.sum())}
        w, _ = block_weights(res.block_samples, cfg, "insn")
        row["naive"] = (weighted_error(w, bt), weighted_error(naive_edges(w, cfg), et))
        for model in models:
            inf = infer_counts(cfg, res.block_samples, solver=solver, model=model, ip=ip)
            row[f"inferred/{model}"] = (
                weighted_error(inf.block_count, bt),
                weighted_error(edges_dict(inf.edge_from, inf.edge_to, inf.edge_count), et))
            row.setdefault("quality", {})[model] = inf.quality.to_json()
            # the evidence-first bar: a block with >= 5 samples is never counted 0
            row.setdefault("sampled_zero", {})[model] = int(
                ((res.block_samples >= 5) & (inf.block_count == 0)).sum())
        if case["lbr"] is not None:
            lres = annotate([case["lbr"]], binary)
            same = lres.edge_kind >= 0
            row["lbr"] = (weighted_error(lres.block_count, bt),
                          weighted_error(edges_dict(lres.edge_from[same], lres.edge_to[same],
                                                    lres.edge_count[same]), et))
        rows.append(row)
    return rows


def print_accuracy(rows: list[dict]) -> None:
    cols = [k for k in rows[0] if isinstance(rows[0][k], tuple)] if rows else []
    print("weighted error (block / edge), sum|est*s - exact| / sum exact")
    print(f"{'program':28s} {'samples':>8s} " + " ".join(f"{c:>20s}" for c in cols))
    for r in rows:
        cells = " ".join(f"{100 * r[c][0]:8.1f}% / {100 * r[c][1]:6.1f}%" for c in cols)
        print(f"{r['program']:28s} {r['samples_in_blocks']:8d} {cells}")
    for r in rows:
        for model, q in r.get("quality", {}).items():
            print(f"  {r['program']} ({model}): reachable share {q.get('reachable_share')}, "
                  f"imbalance {q.get('imbalance_before')} -> {q.get('imbalance_after')}, "
                  f"solver {q.get('solver')}, blocks with >= 5 samples counted 0: "
                  f"{r['sampled_zero'][model]}" +
                  (f", samples {q['skid']}" if "skid" in q else ""))


# ----------------------------------------------------------------------------- precise
def precise_cases(e2e_dirs: list[str]) -> list[dict]:
    """The corpus's precise profiles, then ``DIR/precise/{perf.data,exact-counts.json}`` of
    each bench_e2e program directory (beside its ``baseline`` and ``lbr/perf.data``)."""
    man = _json(os.path.join(CORPUS, "manifest.json"))
    bins = {b["name"]: os.path.join(CORPUS, b["path"]) for b in man["binaries"]}
    lbrs = {p["name"]: p for p in man["profiles"] if "lbr" in p.get("kinds", [])}
    out = []
    for p in man.get("precise_profiles", []):
        lbr = lbrs.get(p["lbr_case"])
        out.append({"name": p["name"], "binary": bins[p["binaries"][0]],
                    "perf": os.path.join(CORPUS, p["path"]),
                    "exact": os.path.join(CORPUS, p["exact_counts"]),
                    "lbr": os.path.join(CORPUS, lbr["path"]) if lbr else None})
    for d in e2e_dirs:
        perf = os.path.join(d, "precise", "perf.data")
        if os.path.exists(perf):
            lbr = os.path.join(d, "lbr", "perf.data")
            out.append({"name": os.path.basename(os.path.normpath(d)) + "-precise",
                        "binary": os.path.join(d, "baseline"), "perf": perf,
                        "exact": os.path.join(d, "precise", "exact-counts.json"),
                        "lbr": lbr if os.path.exists(lbr) else None})
    return out


def precise_accuracy(e2e_dirs: list[str] = ()) -> list[dict]:
    """Block / edge errors on the precise profiles: naive (samples over instructions, no
    flow), what ``annotate`` infers by default, and LBR counts of the same run."""
    rows = []
    for case in precise_cases(list(e2e_dirs)):
        binary = case["binary"]
        cfg = recover_cfg(load_binary(binary))
        bt, et = truth_of(_json(case["exact"]), cfg)
        t = time.perf_counter()
        res = annotate([case["perf"]], binary, inference="on")
        secs = time.perf_counter() - t
        inf = res.inference or {}
        row = {"program": case["name"], "samples_in_blocks": int(res.block_samples.sum()),
               "model": inf.get("sample_model", "?"), "seconds": secs}
        w = res.block_samples / np.maximum(cfg.n_insn, 1)
        row["naive"] = (weighted_error(w, bt), weighted_error(naive_edges(w, cfg), et))
        row["annotate"] = (
            weighted_error(res.block_count, bt),
            weighted_error(edges_dict(res.edge_from, res.edge_to, res.edge_count), et))
        if case["lbr"] is not None:
            lres = annotate([case["lbr"]], binary)
            same = lres.edge_kind >= 0
            row["lbr"] = (weighted_error(lres.block_count, bt),
                          weighted_error(edges_dict(lres.edge_from[same], lres.edge_to[same],
                                                    lres.edge_count[same]), et))
        rows.append(row)
    return rows


def print_precise(rows: list[dict]) -> None:
    if not rows:
        return
    print("\nprecise instruction samples (instructions:upp, no skid): weighted error "
          "(block / edge) against the same run's exact counts")
    cols = ["naive", "annotate", "lbr"]
    print(f"{'program':32s} {'samples':>8s} {'model':>10s} "
          + " ".join(f"{c:>20s}" for c in cols) + f" {'annotate s':>10s}")
    for r in rows:
        cells = " ".join(f"{100 * r[c][0]:8.1f}% / {100 * r[c][1]:6.1f}%" if c in r
                         else f"{'-':>20s}" for c in cols)
        print(f"{r['program']:32s} {r['samples_in_blocks']:8d} {r['model']:>10s} {cells} "
              f"{r['seconds']:10.2f}")


# ----------------------------------------------------------------------- noise floor
def noise_floor(e2e_dirs: list[str], draws: int, mults: tuple[float, ...] = (1.0, 10.0)
                ) -> list[dict]:
    """Errors of the default inference on profiles drawn from the exact counts (mean and
    standard deviation over ``draws`` seeds) at the real profile's sample total times each
    of ``mults``, beside the real profile's own error."""
    rows = []
    for case in precise_cases(list(e2e_dirs)):
        binary = case["binary"]
        cfg = recover_cfg(load_binary(binary))
        bt, et = truth_of(_json(case["exact"]), cfg)
        res, ip = annotate_ip(case["perf"], binary)
        ev = precise_weights(cfg, *ip)[2]
        real = infer_counts(cfg, res.block_samples, model="precise", ip=ip)
        row = {"program": case["name"], "samples": float(ev.samples.sum()),
               "real": (weighted_error(real.block_count, bt),
                        weighted_error(edges_dict(real.edge_from, real.edge_to,
                                                  real.edge_count), et))}
        ran = bt > 0
        lam1 = np.where(ran, bt, 0) * ev.units
        lam1 = lam1 * (ev.samples.sum() / lam1.sum())
        for mult in mults:
            errs = []
            for seed in range(draws):
                s = np.random.default_rng(seed).poisson(lam1 * mult)
                at = np.flatnonzero(s > 0)
                order = np.argsort(cfg.block_start[at], kind="stable")
                inf = infer_counts(cfg, s, model="precise",
                                   ip=(cfg.block_start[at][order], s[at][order]))
                errs.append((weighted_error(inf.block_count, bt),
                             weighted_error(edges_dict(inf.edge_from, inf.edge_to,
                                                       inf.edge_count), et)))
            e = np.array(errs)
            row[f"x{mult:g}"] = (float(e[:, 0].mean()), float(e[:, 0].std()),
                                 float(e[:, 1].mean()), float(e[:, 1].std()))
        rows.append(row)
    return rows


def print_noise_floor(rows: list[dict], draws: int) -> None:
    if not rows:
        return
    print(f"\nnoise floor: the default inference on {draws} profiles drawn from the exact "
          "counts (Poisson, block / edge error, mean +- sd)")
    for r in rows:
        cells = "   ".join(
            f"{k} {100 * v[0]:.1f}+-{100 * v[1]:.1f} / {100 * v[2]:.1f}+-{100 * v[3]:.1f}"
            for k, v in r.items() if k.startswith("x"))
        print(f"{r['program']:32s} {r['samples']:9.0f} samples   real "
              f"{100 * r['real'][0]:.1f} / {100 * r['real'][1]:.1f}   drawn {cells}")


# ----------------------------------------------------------------------------- speed
def speed(workdir: str, solvers: list[str]) -> None:
    sys.path.insert(0, HERE)
    import bench_annotate as ba

    os.makedirs(workdir, exist_ok=True)
    exe = ba.build_program(workdir, 20000)
    data = ba.record_ip(workdir, exe, 500_000)  # the profile bench_annotate.py times
    t0 = time.perf_counter()
    res, ip = annotate_ip(data, exe)
    t1 = time.perf_counter()
    b = load_binary(exe)
    cfg = recover_cfg(b)
    t2 = time.perf_counter()
    print(f"annotate {t1 - t0:.2f} s; CFG recovery of {b.block_map.num_functions} functions "
          f"{t2 - t1:.2f} s")
    for s in solvers:
        for model in ("insn", "time"):
            times = []
            for _ in range(3):
                t = time.perf_counter()
                inf = infer_counts(cfg, res.block_samples, solver=s, model=model, ip=ip)
                times.append(time.perf_counter() - t)
            q = inf.quality
            print(f"inference, solver {s:8s} model {model}: {q.functions} functions, "
                  f"{q.blocks} blocks: {min(times):.2f} s (best of 3, max {max(times):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--workdir", default="/tmp/bbmap-bench-annotate")
    ap.add_argument("--solver", default="auto")
    ap.add_argument("--models", default="insn,time",
                    help="sample models (bbmap/inference/weights.py): "
                         "precise,time,insn,bytes,block")
    ap.add_argument("--e2e", action="append", default=None, metavar="DIR",
                    help="a bench_e2e program directory (baseline, ip*.perf.data, "
                         "lbr/exact-counts.json); default: " + E2E_DEFAULT)
    ap.add_argument("--solvers", default="ortools,scipy,builtin")
    ap.add_argument("--noise-floor", type=int, default=0, metavar="N",
                    help="also N profiles drawn from the exact counts per precise profile")
    args = ap.parse_args()
    e2e = args.e2e if args.e2e is not None else \
        [E2E_DEFAULT] if os.path.isdir(E2E_DEFAULT) else []
    print_accuracy(accuracy(args.models.split(","), args.solver, e2e))
    print_precise(precise_accuracy(e2e))
    if args.noise_floor:
        print_noise_floor(noise_floor(e2e, args.noise_floor), args.noise_floor)
    if args.speed:
        speed(args.workdir, args.solvers.split(","))


if __name__ == "__main__":
    main()
