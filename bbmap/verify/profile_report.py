"""The ``verify --profile`` report: ranked mismatches, scores, JSON keyed by function and
block ID, and the text a compiler engineer reads (spec/verify.md).

Built from a :class:`bbmap.verify.profile.Comparison`; the statistics live there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.verify.profile import (
    MATCHED,
    MISMATCHED,
    UNKNOWN,
    VERDICTS,
    BranchTable,
    Comparison,
    FreqTable,
    Options,
)

TOP = 20  # mismatches listed in the text report (JSON lists all)
INDENT_MAX = 2000  # functions up to which --json is indented
JSON_FORMAT_VERSION = 1


def _col(a: np.ndarray, digits: int = 6) -> list[float | None]:
    """A column as JSON-safe Python floats: rounded, None for NaN and infinities."""
    a = np.round(np.asarray(a, np.float64), digits)
    ok = np.isfinite(a)
    vals = a.tolist()
    return vals if ok.all() else [v if k else None for v, k in zip(vals, ok.tolist())]


def _r(v: float, digits: int = 6) -> float | None:
    """JSON-safe rounding (None for infinities)."""
    v = float(v)
    if not np.isfinite(v):
        return None
    return round(v, digits)


@dataclass
class ProfileReport:
    """The PGO analysis map of one binary held against one run (or merged runs)."""

    binary: str
    profiles: list[str]
    count_source: str  # "lbr" | "inferred" | "none"
    options: Options
    comparison: Comparison | None
    profile_samples: int = 0  # samples read from the profiles
    branch_records: int = 0  # LBR records read (0 for IP-only profiles)
    lbr_scale: float = 1.0
    functions: list[str] | None = None  # restrict judgement to these names (None: all)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # inputs that make the result wrong

    # ------------------------------------------------------------ selection
    def _names(self) -> list[str]:
        """A unique display key per block-map function: its name, or name@0xaddr when two
        functions share a name (static functions of different files)."""
        if not hasattr(self, "_keys"):
            m = self.comparison.block_map if self.comparison else None
            names = [] if m is None else [
                n if n else f"0x{int(a):x}" for n, a in zip(
                    m.func_name or [None] * m.num_functions, m.func_address.tolist())]
            seen: dict[str, int] = {}
            for n in names:
                seen[n] = seen.get(n, 0) + 1
            self._keys = [n if seen[n] == 1 else f"{n}@0x{int(a):x}"
                          for n, a in zip(names, m.func_address.tolist())] if m else []
        return self._keys

    def _func_ok(self) -> np.ndarray:
        """Per block-map function: is it selected (``functions``)?"""
        if not hasattr(self, "_sel"):
            keys = self._names()
            if self.functions is None:
                self._sel = np.ones(len(keys), bool)
            else:
                want = set(self.functions)
                m = self.comparison.block_map
                raw = [n or "" for n in (m.func_name or [None] * m.num_functions)]
                self._sel = np.array([k in want or r in want for k, r in zip(keys, raw)],
                                     bool)
        return self._sel

    def _memo(self, key: tuple, make: Any) -> list[dict[str, Any]]:
        """Rows are built once per report (every view reads the same lists)."""
        cache = self.__dict__.setdefault("_rows", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def _fn(self, blocks: np.ndarray) -> np.ndarray:
        return np.asarray(self.comparison.block_map.block_function(blocks), np.int64)

    # --------------------------------------------------------------- rows
    def branch_rows(self, source: str = "compiler") -> list[dict[str, Any]]:
        """One dict per judged branch (selected functions), in map order."""
        return self._memo(("branch", source), lambda: self._branch_rows(source))

    def _branch_rows(self, source: str) -> list[dict[str, Any]]:
        c = self.comparison
        if c is None or source not in c.branches:
            return []
        t = c.branches[source]
        m = c.block_map
        keys = self._names()
        sel = self._func_ok()
        ptr = t.branch_rows.tolist()
        bb = t.branch_block
        fns = self._fn(bb).tolist() if len(bb) else []
        faddr = m.func_address.tolist()
        # every column converted once (rounded with numpy), rows built from lists
        ex = t.executions
        with np.errstate(divide="ignore", invalid="ignore"):
            meas = _col(np.where(ex > 0, t.taken / np.where(ex > 0, ex, 1), np.nan))
        sid = m.block_id[t.target].tolist() if len(t.target) else []
        bel, lo, hi = _col(t.believed), _col(t.lo), _col(t.hi)
        cnt, exe, deff = _col(t.taken, 3), _col(ex, 3), _col(t.deff, 3)
        verd = [VERDICTS[v] for v in t.verdict.tolist()]
        bid = m.block_id[bb].tolist() if len(bb) else []
        addr = np.asarray(m.block_address(bb)).tolist() if len(bb) else []
        bverd = [VERDICTS[v] for v in t.branch_verdict.tolist()]
        delta, off, tv = _col(t.branch_delta), _col(t.branch_off), _col(t.branch_tv)
        out = []
        for i, f in enumerate(fns):
            if not sel[f]:
                continue
            a, z = ptr[i], ptr[i + 1]
            succ = [{"id": sid[j], "believed": bel[j], "measured": meas[j],
                     "interval": [lo[j], hi[j]], "count": cnt[j], "verdict": verd[j]}
                    for j in range(a, z)]
            out.append({
                "source": source, "function": keys[f], "function_address": faddr[f],
                "block": bid[i], "address": addr[i], "verdict": bverd[i],
                "executions": exe[a], "design_effect": deff[a], "delta": delta[i],
                "off_by_at_least": off[i], "tv": tv[i], "successors": succ})
        return out

    def block_rows(self, source: str = "compiler") -> list[dict[str, Any]]:
        """One dict per judged block frequency (selected functions), in map order."""
        return self._memo(("block", source), lambda: self._block_rows(source))

    def _block_rows(self, source: str) -> list[dict[str, Any]]:
        c = self.comparison
        if c is None or source not in c.freqs:
            return []
        t: FreqTable = c.freqs[source]
        m = c.block_map
        keys = self._names()
        sel = self._func_ok()
        if not len(t.block):
            return []
        fns = self._fn(t.block).tolist()
        faddr = m.func_address.tolist()
        bid = m.block_id[t.block].tolist()
        addr = np.asarray(m.block_address(t.block)).tolist()
        y = t.entry_count
        with np.errstate(divide="ignore", invalid="ignore"):
            meas = _col(np.where(y > 0, t.count / np.where(y > 0, y, 1), np.nan))
        verd = [VERDICTS[v] for v in t.verdict.tolist()]
        bel, lo, hi = _col(t.believed), _col(t.lo), _col(t.hi)
        cnt, ent, deff, off = _col(t.count, 3), _col(y, 3), _col(t.deff, 3), _col(t.off, 3)
        out = []
        for i, f in enumerate(fns):
            if not sel[f]:
                continue
            out.append({
                "source": source, "function": keys[f], "function_address": faddr[f],
                "block": bid[i], "address": addr[i], "verdict": verd[i],
                "believed": bel[i], "measured": meas[i], "interval": [lo[i], hi[i]],
                "count": cnt[i], "entry_count": ent[i], "design_effect": deff[i],
                "off_by_at_least_log2": off[i]})
        return out

    def entry_rows(self) -> list[dict[str, Any]]:
        """One dict per function with an entry count in the map (selected ones)."""
        return self._memo(("entry",), self._entry_rows)

    def _entry_rows(self) -> list[dict[str, Any]]:
        c = self.comparison
        if c is None or c.entries is None:
            return []
        t = c.entries
        m = c.block_map
        keys = self._names()
        sel = self._func_ok()
        out = []
        for i, f in enumerate(t.func.tolist()):
            if not sel[f]:
                continue
            out.append({
                "function": keys[f], "function_address": int(m.func_address[f]),
                "verdict": VERDICTS[t.verdict[i]], "believed_count": int(t.believed[i]),
                "believed_share": _r(t.share[i]),
                "measured_share": _r(t.measured[i] / t.total) if t.total > 0 else None,
                "interval": [_r(t.lo[i]), _r(t.hi[i])], "measured": _r(t.measured[i], 3),
                "measured_total": _r(t.total, 3)})
        return out

    # ------------------------------------------------------------- verdicts
    def sources(self) -> list[str]:
        c = self.comparison
        return [] if c is None else [s for s in ("compiler", "postlink")
                                     if s in c.branches or s in c.freqs]

    def mismatched_branches(self, source: str | None = None) -> list[dict[str, Any]]:
        """Mismatched branches, worst first (the ranking of the report)."""
        rows = [r for s in ([source] if source else self.sources())
                for r in self.branch_rows(s) if r["verdict"] == "mismatched"]
        rows.sort(key=lambda r: (-r["off_by_at_least"], -r["delta"], -r["executions"],
                                 r["source"], r["function_address"], r["block"]))
        return rows

    def mismatched_blocks(self) -> list[dict[str, Any]]:
        rows = [r for s in self.sources() for r in self.block_rows(s)
                if r["verdict"] == "mismatched"]
        rows.sort(key=lambda r: (-r["off_by_at_least_log2"], -r["count"], r["source"],
                                 r["function_address"], r["block"]))
        return rows

    @property
    def ok(self) -> bool:
        """No error, something was judged, and no belief is mismatched."""
        if self.errors or self.comparison is None:
            return False
        s = self.summary()
        parts = [s[k] for k in ("branches", "blocks", "entries")]
        parts += list(s.get("postlink", {}).values())
        return not any(p["mismatched"] for p in parts)

    def summary(self) -> dict[str, Any]:
        """Counts per verdict, execution-weighted scores, over the selected functions."""
        if not hasattr(self, "_summary"):
            self._summary = self._make_summary()
        return self._summary

    def _make_summary(self) -> dict[str, Any]:
        def tally(rows: list[dict[str, Any]], weight: str) -> dict[str, Any]:
            sampled = [r for r in rows if (r.get(weight) or 0) > 0]
            d: dict[str, Any] = {v: sum(1 for r in sampled if r["verdict"] == v)
                                 for v in VERDICTS}
            d["sampled"] = len(sampled)
            d["not_sampled"] = len(rows) - len(sampled)
            tot = sum(r[weight] for r in sampled)
            # how much of the measured evidence sits in each verdict
            d["weight"] = {v: _r(sum(r[weight] for r in sampled if r["verdict"] == v)
                                 / tot, 4) if tot else None for v in VERDICTS}
            return d

        out: dict[str, Any] = {}
        comp = self.branch_rows("compiler")
        out["branches"] = tally(comp, "executions")
        out["branches"]["score"] = _weighted_score(comp)
        out["blocks"] = tally(self.block_rows("compiler"), "count")
        out["blocks"]["score"] = self._block_score()
        en = self.entry_rows()
        out["entries"] = tally(en, "measured")
        out["entries"]["score"] = self._entry_score()
        if "postlink" in self.sources():
            pl = self.branch_rows("postlink")
            out["postlink"] = {"branches": tally(pl, "executions"),
                               "blocks": tally(self.block_rows("postlink"), "count")}
            out["postlink"]["branches"]["score"] = _weighted_score(pl)
        return out

    def function_scores(self) -> dict[str, dict[str, Any]]:
        """Per selected function with any judged belief: verdict counts and scores."""
        if hasattr(self, "_fscores"):
            return self._fscores
        out: dict[str, dict[str, Any]] = {}
        by_fn: dict[str, list[dict[str, Any]]] = {}
        def get(r: dict[str, Any]) -> dict[str, Any]:
            d = out.get(r["function"])
            if d is None:
                d = out[r["function"]] = _empty_fn(r["function_address"])
            return d

        for r in self.branch_rows("compiler"):
            _count(get(r)["branches"], r, "executions")
            by_fn.setdefault(r["function"], []).append(r)
        for r in self.block_rows("compiler"):
            _count(get(r)["blocks"], r, "count")
        for r in self.entry_rows():
            d = get(r)
            d["entry"] = r["verdict"] if (r["measured"] or 0) > 0 else "not_sampled"
        overlap = self._block_overlap()
        for name, d in out.items():
            d["branches"]["score"] = _weighted_score(by_fn.get(name, []))
            d["blocks"]["score"] = overlap.get(name)
        self._fscores = out
        return out

    # --------------------------------------------------------------- scores
    def _block_overlap(self) -> dict[str, float | None]:
        """Per function: sum over its non-empty blocks of min(believed share, measured
        share), the shares being freq / sum(freq) and count / sum(count)."""
        if hasattr(self, "_overlap"):
            return self._overlap
        c = self.comparison
        self._overlap: dict[str, float | None] = {}
        self._overlap_w: dict[str, float] = {}
        if c is None or "compiler" not in c.freqs:
            return self._overlap
        m = c.block_map
        keys = self._names()
        sel = self._func_ok()
        F = m.num_functions
        fns = np.unique(self._fn(c.freqs["compiler"].block))
        blk = np.flatnonzero(m.block_size > 0)
        bf = self._fn(blk)
        fq = m.block_freq[blk].astype(np.float64)
        ct = np.asarray(c.block_count, np.float64)[blk]
        sf = np.bincount(bf, weights=fq, minlength=F)
        sc = np.bincount(bf, weights=ct, minlength=F)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.minimum(fq / sf[bf], ct / sc[bf])
        ov = np.bincount(bf, weights=np.nan_to_num(share), minlength=F)
        for f in fns.tolist():
            if not sel[f]:
                continue
            if sf[f] <= 0 or sc[f] <= 0:
                self._overlap[keys[f]] = None
                continue
            self._overlap[keys[f]] = _r(ov[f])
            self._overlap_w[keys[f]] = float(sc[f])
        return self._overlap

    def _block_score(self) -> float | None:
        ov = self._block_overlap()
        w = self._overlap_w
        tot = sum(w.values())
        if not tot:
            return None
        return _r(sum(ov[k] * w[k] for k in w) / tot)

    def _entry_score(self) -> float | None:
        rows = [r for r in self.entry_rows()]
        if not rows or not any((r["measured"] or 0) > 0 for r in rows):
            return None
        tot = sum(r["measured"] or 0 for r in rows)
        bel = sum(r["believed_count"] for r in rows)
        if tot <= 0 or bel <= 0:
            return None
        return _r(sum(min(r["believed_count"] / bel, (r["measured"] or 0) / tot)
                      for r in rows))

    # ----------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        fns: dict[str, dict[str, Any]] = {}
        scores = self.function_scores()

        def fn(r: dict[str, Any]) -> dict[str, Any]:
            d = fns.get(r["function"])
            if d is None:
                sc = scores.get(r["function"]) or _empty_fn(0)
                d = fns[r["function"]] = {
                    "address": r["function_address"], "entry": None,
                    "scores": {"branches": sc["branches"], "blocks": sc["blocks"]},
                    "branches": {}, "blocks": {}}
            return d

        for r in self.entry_rows():
            fn(r)["entry"] = {k: v for k, v in r.items()
                              if k not in ("function", "function_address")}
        for s in self.sources():
            for r in self.branch_rows(s):
                d = fn(r) if s == "compiler" else fn(r).setdefault(
                    "postlink", {"branches": {}, "blocks": {}})
                d["branches"][str(r["block"])] = _strip(r)
            for r in self.block_rows(s):
                d = fn(r) if s == "compiler" else fn(r).setdefault(
                    "postlink", {"branches": {}, "blocks": {}})
                d["blocks"][str(r["block"])] = _strip(r)
        return {
            "format_version": JSON_FORMAT_VERSION,
            "binary": self.binary, "profiles": self.profiles, "ok": self.ok,
            "count_source": self.count_source, "options": self.options.to_json(),
            "samples": self.profile_samples, "branch_records": self.branch_records,
            "lbr_scale": _r(self.lbr_scale), "sources": self.sources(),
            "summary": self.summary(),
            "worst_branches": [_rank(r) for r in self.mismatched_branches()],
            "worst_blocks": [_rank(r) for r in self.mismatched_blocks()],
            "functions": dict(sorted(fns.items(), key=lambda kv: (kv[1]["address"], kv[0]))),
            "notes": self.notes, "errors": self.errors,
        }

    def dumps(self) -> str:
        """The JSON document as text: indented while small, compact beyond INDENT_MAX
        functions (the indenting encoder is pure Python, ~10x slower)."""
        import json

        doc = self.to_json()
        if len(doc["functions"]) <= INDENT_MAX:
            return json.dumps(doc, indent=1) + "\n"
        return json.dumps(doc, separators=(",", ":")) + "\n"

    # ----------------------------------------------------------------- text
    def format(self, *, top: int = TOP) -> str:
        o = self.options
        src = {"lbr": "LBR", "inferred": "INFERRED from IP samples",
               "none": "no branch counts"}.get(self.count_source, self.count_source)
        head = (f"{self.binary}: PGO map vs {len(self.profiles)} profile(s) ({src}; "
                f"{self.profile_samples} samples"
                + (f", {self.branch_records} branch records" if self.branch_records else "")
                + f"): {'OK' if self.ok else 'MISMATCHED' if self.comparison else 'FAILED'}")
        lines = [head]
        for e in self.errors:
            lines.append(f"  error: {e}")
        if self.comparison is None:
            lines += [f"  note: {n}" for n in self.notes]
            return "\n".join(lines)
        s = self.summary()
        pct = int(round(o.confidence * 100))
        b = s["branches"]
        lines.append(
            f"  branches: {_verdicts(b)}; threshold +-{o.threshold:g}, {pct}% Wilson "
            f"intervals; score {_fmt(b['score'])}")
        k = s["blocks"]
        lines.append(
            f"  block frequencies: {_verdicts(k)}; factor {o.freq_factor:g}; overlap "
            f"{_fmt(k['score'])}")
        if "postlink" in s:
            pb, pk = s["postlink"]["branches"], s["postlink"]["blocks"]
            lines.append(f"  post-link CFG branches: {_verdicts(pb)}; score "
                         f"{_fmt(pb['score'])}")
            lines.append(f"  post-link CFG block counts: {_verdicts(pk)}")
        e = s["entries"]
        lines.append(f"  entry counts (share of all entries): {_verdicts(e)}; overlap "
                     f"{_fmt(e['score'])}")
        worst = self.mismatched_branches()
        if worst:
            lines.append(f"  worst branches (of {len(worst)} mismatched):")
            lines.append(f"    {'#':>3}  {'function':<24} {'block -> succ':<14} "
                         f"{'believed':>8}  {'measured [interval]':<22} {'executions':>10}")
            for i, r in enumerate(worst[:top], 1):
                sw = max(r["successors"], key=lambda x: (
                    abs((x["measured"] or 0) - x["believed"]), -x["id"]))
                tag = " (post-link)" if r["source"] == "postlink" else ""
                meas = (f"{_fmt(sw['measured'])} [{_fmt(sw['interval'][0])}, "
                        f"{_fmt(sw['interval'][1])}]")
                lines.append(
                    f"    {i:>3}  {_clip(r['function'], 24):<24} "
                    f"{str(r['block']) + ' -> ' + str(sw['id']):<14} {sw['believed']:>8.3f}  "
                    f"{meas:<22} {_cnt(r['executions']):>10}{tag}")
            if len(worst) > top:
                lines.append(f"    ... and {len(worst) - top} more (--top, or --json)")
        wb = self.mismatched_blocks()
        if wb:
            lines.append(f"  worst block frequencies (relative to the entry; of {len(wb)} "
                         "mismatched):")
            lines.append(f"    {'#':>3}  {'function':<24} {'block':>5}  {'believed':>10}  "
                         f"{'measured [interval]':<28} {'count/entry':>14}")
            for i, r in enumerate(wb[:top], 1):
                tag = " (post-link)" if r["source"] == "postlink" else ""
                meas = (f"{_g(r['measured'])} [{_g(r['interval'][0])}, "
                        f"{_g(r['interval'][1])}]")
                ce = f"{_cnt(r['count'])}/{_cnt(r['entry_count'])}"
                lines.append(
                    f"    {i:>3}  {_clip(r['function'], 24):<24} {r['block']:>5}  "
                    f"{_g(r['believed']):>10}  {meas:<28} {ce:>14}{tag}")
            if len(wb) > top:
                lines.append(f"    ... and {len(wb) - top} more")
        ws = self.function_scores()
        if ws:
            lines.append("  per function (branches matched/mismatched/unknown, score; blocks "
                         "m/x/?, overlap; entry):")
            for name, d in sorted(ws.items(), key=lambda kv: (kv[1]["address"], kv[0])):
                br, bk = d["branches"], d["blocks"]
                lines.append(
                    f"    {_clip(name, 28):<28} {br['matched']}/{br['mismatched']}/"
                    f"{br['unknown']:<3} {_fmt(br['score']):>6}   {bk['matched']}/"
                    f"{bk['mismatched']}/{bk['unknown']:<3} {_fmt(bk['score']):>6}   "
                    f"{d['entry'] or '-'}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


def _verdicts(d: dict[str, Any]) -> str:
    w = d.get("weight", {}).get("matched")
    share = f", {100 * w:.0f}% of the measured weight in matched" if w is not None else ""
    return (f"{d['matched']} matched, {d['mismatched']} mismatched, {d['unknown']} unknown "
            f"of {d['sampled']} sampled ({d['not_sampled']} not sampled{share})")


def _empty_fn(addr: int) -> dict[str, Any]:
    return {"address": addr, "entry": None,
            "branches": {"matched": 0, "mismatched": 0, "unknown": 0, "not_sampled": 0},
            "blocks": {"matched": 0, "mismatched": 0, "unknown": 0, "not_sampled": 0}}


def _count(d: dict[str, Any], r: dict[str, Any], weight: str) -> None:
    if (r.get(weight) or 0) > 0:
        d[r["verdict"]] += 1
    else:
        d["not_sampled"] += 1


def _weighted_score(rows: list[dict[str, Any]]) -> float | None:
    """1 - execution-weighted mean total-variation distance over sampled branches."""
    w = [(r["executions"] or 0, r["tv"]) for r in rows if (r["executions"] or 0) > 0]
    tot = sum(x for x, _ in w)
    if not tot:
        return None
    return _r(1.0 - sum(x * tv for x, tv in w) / tot)


def _strip(r: dict[str, Any]) -> dict[str, Any]:
    """The row as its function's JSON keeps it (keyed by block ID already)."""
    d = r.copy()
    del d["function"], d["function_address"], d["block"], d["source"]
    return d


def _rank(r: dict[str, Any]) -> dict[str, Any]:
    return dict(r)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _g(v: float | None) -> str:
    return "inf" if v is None else f"{v:.4g}"


def _cnt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 or v >= 100 else f"{v:.1f}"


def _clip(s: str, w: int) -> str:
    return s if len(s) <= w else s[: w // 2 - 1] + "..." + s[-(w - w // 2 - 2):]


__all__ = ["ProfileReport", "MATCHED", "MISMATCHED", "UNKNOWN", "BranchTable"]
