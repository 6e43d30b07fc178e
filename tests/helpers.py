"""What the test modules share (fixtures stay in conftest.py, which imports from here).

* the repository, its corpus and manifests, and pytest params over them;
* the CLI run in-process, and the one-line error every bad input must give;
* a small hand-built binary and address space for aggregation tests;
* hypothesis strategies for block maps of every version and feature;
* llvm-readobj's JSON and bbmap's dump normalized to the same shape;
* the corpus profiles the picture tests draw, and helpers to read their SVG.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from click.testing import CliRunner

from bbmap.binary.mapinput import KIND_BB_INFO, KIND_V0, KIND_VERSIONED, MapInput
from bbmap.binary.types import FunctionSymbols
from bbmap.binary.writer import encode_map, encode_map_fast
from bbmap.buckets import KERNEL, OTHER_DSO, OUTSIDE_FUNCTION, UNMAPPED
from bbmap.cli import main
from bbmap.formats.bbaddrmap import (
    MD_CAN_FALL_THROUGH,
    MD_HAS_RETURN,
    SHT_LLVM_BB_ADDR_MAP,
    SHT_LLVM_BB_ADDR_MAP_V0,
)
from bbmap.index import BlockIndex
from bbmap.model import (
    VERSION_BB_INFO,
    BlockMapBuilder,
    BlockRecord,
    FunctionRecord,
    MapSource,
    RangeRecord,
)
from bbmap.perf.records import SampleBatch
from bbmap.run import annotate

# ============================================================== the corpus
REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus"


def shared_dir() -> Path:
    """``../shared`` beside the checkout (CI layout), else the workplace copy."""
    env = os.environ.get("BBMAP_SHARED")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared", Path("/work/shared")]:
        if cand.is_dir():
            return cand
    return REPO.parent / "shared"


PERF_CORPUS = shared_dir() / "perf-corpus"


def load_manifest(path: Path = CORPUS / "manifest.json") -> dict:
    if not path.exists():
        return {"binaries": [], "profiles": []}
    return json.loads(path.read_text())


def corpus_binary(name: str) -> Path:
    """The manifest binary called ``name``; skips the test when the corpus lacks it."""
    if not (CORPUS / "manifest.json").exists():
        pytest.skip("corpus not built")
    for b in load_manifest().get("binaries", []):
        if b["name"] == name and (CORPUS / b["path"]).exists():
            return CORPUS / b["path"]
    pytest.skip(f"corpus binary {name} absent")


def all_corpus_binaries() -> list:
    """Every binary of both manifests (compiled and hand-made), as pytest params by name."""
    out = []
    for manifest in (CORPUS / "manifest.json", CORPUS / "handmade" / "manifest.json"):
        try:
            entries = json.loads(manifest.read_text())["binaries"]
        except (OSError, ValueError, KeyError):
            continue
        out.extend(pytest.param(manifest.parent / e["path"], id=e["name"]) for e in entries)
    return out


def profile_cases(kind: str) -> list[tuple[str, str, str]]:
    """(profile name, perf.data path, binary path) of the manifest's profiles of ``kind``
    that name one binary and exist on disk."""
    m = load_manifest()
    bins = {b["name"]: str(CORPUS / b["path"]) for b in m.get("binaries", [])}
    out = []
    for p in m.get("profiles", []):
        if kind in p.get("kinds", []) and len(p.get("binaries", [])) == 1:
            perf, binary = str(CORPUS / p["path"]), bins.get(p["binaries"][0], "")
            if os.path.exists(perf) and os.path.exists(binary):
                out.append((p["name"], perf, binary))
    return out


# ============================================================== the CLI
PIE_PROFILE = os.path.join(CORPUS, "profiles", "c22-addrmap-pie-plain", "perf.data")
PIE_BINARY = os.path.join(CORPUS, "bin", "clang-22", "addrmap", "layout.pie")
have_corpus = pytest.mark.skipif(not (os.path.exists(PIE_PROFILE) and os.path.exists(PIE_BINARY)),
                                 reason="corpus not built")


def ip_profile_cases() -> list[tuple[str, str, str]]:
    """(profile name, perf.data path, binary path) of the manifest's IP-only profiles
    (``ip_profiles``: ``perf record -e cpu-clock:u`` of the LBR cases' programs)."""
    m = load_manifest()
    bins = {b["name"]: str(CORPUS / b["path"]) for b in m.get("binaries", [])}
    out = []
    for p in m.get("ip_profiles", []):
        perf, binary = str(CORPUS / p["path"]), bins.get(p["binaries"][0], "")
        if os.path.exists(perf) and os.path.exists(binary):
            out.append((p["name"], perf, binary))
    return out


def go_cases(kind: str = "go_binaries") -> list[dict]:
    """The manifest's Go binaries (``go_binaries``) or Go profiles (``go_profiles``)."""
    return [e for e in load_manifest().get(kind, []) if (CORPUS / e["path"]).exists()]


def go_case(name: str) -> dict:
    """One Go binary or profile of the manifest by name; skips when the corpus lacks it."""
    for e in go_cases("go_binaries") + go_cases("go_profiles"):
        if e["name"] == name:
            return e
    pytest.skip(f"Go corpus case {name} absent")


def cli(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.output


def cli_stdout(*args):
    """(exit code, stdout alone): for documents a command prints while it also says on
    stderr why it exits non-zero."""
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout


def one_error_line(out: str) -> str:
    assert "Traceback" not in out and "internal error" not in out, out
    lines = [ln for ln in out.splitlines() if ln.startswith("bbmap: error:")]
    assert len(lines) == 1, out
    return lines[0]


# ============================================================== a hand-built binary
# Layout (ELF vaddrs; the process maps them at BASE + vaddr):
#
#     alpha  0x1000  range 0: bb0 [0x1000,+0x10) ft   bb1 [0x1010,+8) ft   bb2 [0x1018,+8) ret
#     beta   0x2000  range 0: bb0 [0x2000,+0x10) ft   bb1 [0x2010,+8) jmp  bb3 [0x2018,+8) ft
#                    range 1: bb2 [0x3000,+0x10) ret                (symbol beta.cold)
#     gamma  0x4000  symbol only (no block map), size 0x100
#     [0x4100, 0x5000) in the binary, no function
# global block indexes: alpha 0,1,2; beta 3 (id0), 4 (id1), 5 (id3), 6 (id2).



BASE = 0x5555_0000_0000
LIBC = 0x7F00_0000_0000
KADDR = 0xFFFF_FFFF_8100_0000
FT, RET = MD_CAN_FALL_THROUGH, MD_HAS_RETURN


class FakeSpace:
    """Binary at BASE (vaddrs 0x1000..0x5000), libc, kernel, everything else unmapped."""

    dso_names = ["/usr/lib/libc.so.6"]

    def classify(self, addr, pid, seq, cpumode, time=None):
        addr = np.asarray(addr, np.uint64)
        where = np.full(len(addr), UNMAPPED, np.int8)
        va = addr - np.uint64(BASE)
        inb = (addr >= BASE + 0x1000) & (addr < BASE + 0x5000)
        where[inb] = OUTSIDE_FUNCTION
        lib = (addr >= LIBC) & (addr < LIBC + 0x100000)
        where[lib] = OTHER_DSO
        k = addr >= np.uint64(0xFFFF_8000_0000_0000)
        if cpumode is not None:
            k |= np.asarray(cpumode) == 1
        where[k] = KERNEL
        dso = np.where(lib, 0, -1).astype(np.int32)
        return where, np.where(inb, va, 0).astype(np.uint64), dso


def block_map():
    b = BlockMapBuilder([MapSource("section", 5, ".llvm_bb_addr_map", 0x6FFF4C0A, 1)])
    b.add(FunctionRecord(0x1000, [RangeRecord(0x1000, [
        BlockRecord(0, 0x0, 0x10, FT), BlockRecord(1, 0x10, 0x8, FT),
        BlockRecord(2, 0x18, 0x8, RET)])], version=2, name="alpha"))
    b.add(FunctionRecord(0x2000, [
        RangeRecord(0x2000, [BlockRecord(0, 0x0, 0x10, FT), BlockRecord(1, 0x10, 0x8, 0),
                             BlockRecord(3, 0x18, 0x8, FT)]),
        RangeRecord(0x3000, [BlockRecord(2, 0x0, 0x10, RET)])], version=2, feature=8,
        name="beta"))
    return b.build()


def symbols() -> FunctionSymbols:
    names = ["alpha", "beta", "beta.cold", "gamma"]
    return FunctionSymbols(
        address=np.array([0x1000, 0x2000, 0x3000, 0x4000], "u8"),
        size=np.array([0x20, 0x20, 0x10, 0x100], "u8"),
        section=np.ones(4, "i4"), names=names, display=list(names),
        is_func=np.ones(4, bool))


def resolver(bm=None, syms=None):
    from bbmap.aggregate.resolve import IndexResolver

    bm = bm if bm is not None else block_map()
    syms = syms if syms is not None else symbols()
    return IndexResolver(FakeSpace(), BlockIndex(bm, syms), bm.num_functions)


def rt(vaddr: int) -> int:
    """Runtime address of an ELF vaddr of the test binary."""
    return BASE + vaddr


def batch(ips, periods=None, cpumode=None, stacks=None) -> SampleBatch:
    """A SampleBatch from plain lists; ``stacks`` is per sample a list of (from, to) newest
    first (runtime addresses)."""
    n = len(ips)
    stacks = stacks or [[] for _ in range(n)]
    ptr = np.zeros(n + 1, "i8")
    ptr[1:] = np.cumsum([len(s) for s in stacks])
    flat = [e for s in stacks for e in s]
    return SampleBatch(
        seq=np.arange(n, dtype="i8"), pid=np.full(n, 42, "i4"), tid=np.full(n, 42, "i4"),
        time=np.arange(n, dtype="u8"),
        cpumode=np.array(cpumode if cpumode is not None else [2] * n, "u1"),
        ip=np.array(ips, "u8"),
        period=np.array(periods if periods is not None else [1] * n, "u8"),
        event=np.zeros(n, "i2"), br_ptr=ptr,
        br_from=np.array([e[0] for e in flat], "u8"), br_to=np.array([e[1] for e in flat], "u8"),
        br_flags=np.array([e[2] if len(e) > 2 else 0 for e in flat], "u8"))


# ============================================================== generated block maps
SRC = MapSource("section", 5, ".llvm_bb_addr_map", SHT_LLVM_BB_ADDR_MAP, 1)
u32 = st.integers(0, 2**32 - 1)
small = st.integers(0, 300)
big = st.one_of(small, st.integers(0, 2**64 - 1))


@st.composite
def map_function(draw, version: int):
    """One function whose features are legal for ``version`` (any combination)."""
    if version >= 2:
        allowed = 0x1F | (0x20 if version >= 3 else 0) | (0x40 if version >= 4 else 0) \
            | (0x80 if version >= 5 else 0)
        feature = draw(st.integers(0, 0xFF)) & allowed
        if feature & 0x10:
            feature &= ~0x06  # LLVM refuses BBFreq/BrProb without entries
        if feature & 0x80 and not feature & 0x06:
            feature |= 0x02
    elif version == 1:
        feature = draw(st.sampled_from([0, 0, 0, 0x80, 0x03]))  # ignored by v1 readers
    else:
        feature = 0
    eff = feature if version >= 2 else 0
    nranges = draw(st.integers(1, 3)) if eff & 0x08 else 1
    ranges = []
    for _ in range(nranges):
        nblocks = draw(st.integers(0 if version != VERSION_BB_INFO else 1, 6))
        blocks, end = [], 0
        for i in range(nblocks):
            gap = draw(st.sampled_from([0, 0, 0, 1, 7, 200])) if version != 0 else 0
            if version in (0, VERSION_BB_INFO):
                gap = draw(st.sampled_from([0, 0, 3]))
            cs = tuple(sorted(draw(st.lists(st.integers(0, 300), max_size=3)))) \
                if eff & 0x20 else ()
            size = draw(small) + (cs[-1] if cs else 0)
            off = end + gap if (i or version not in (0, VERSION_BB_INFO)) else 0
            md = draw(st.one_of(st.integers(0, 0x1F if version >= 2 else 0x0F),
                                st.integers(0, 0xFF)))  # unknown bits: kept, warned
            b = BlockRecord(id=draw(u32) if version >= 2 else i, offset=off, size=size, md=md,
                            hash=draw(big) if eff & 0x40 else 0, callsites=cs)
            if eff & 0x02:
                b.freq = draw(big)
            if eff & 0x80:
                b.postlink_freq = draw(u32)
            if eff & 0x04:
                b.successors = tuple((draw(u32), draw(u32), draw(u32) if eff & 0x80 else 0)
                                     for _ in range(draw(st.integers(0, 3))))
            end = off + size
            blocks.append(b)
        base = draw(st.integers(0, 2**40))
        if eff & 0x10:
            declared = draw(st.integers(0, 50))
            ranges.append(RangeRecord(base=base, blocks=[], num_blocks=declared))
        else:
            ranges.append(RangeRecord(base=base, blocks=blocks))
    return FunctionRecord(address=ranges[0].base, ranges=ranges, version=version,
                          feature=feature, entry_count=draw(big) if eff & 0x01 else 0)


@st.composite
def map_section(draw):
    kind = draw(st.sampled_from(["v0", "versioned", "bb_info"]))
    if kind == "v0":
        fns = draw(st.lists(map_function(0), max_size=5))
    elif kind == "bb_info":
        fns = draw(st.lists(map_function(VERSION_BB_INFO), max_size=5))
    else:
        versions = draw(st.lists(st.integers(1, 5), max_size=6))
        fns = [draw(map_function(v)) for v in versions]
    return kind, fns


def encode_section(kind, fns, fast=False):
    enc = encode_map_fast if fast else encode_map
    if kind == "v0":
        return enc(fns, sh_type=SHT_LLVM_BB_ADDR_MAP_V0)
    if kind == "bb_info":
        return enc(fns, version=VERSION_BB_INFO)
    return enc(fns)


def map_input(kind, data):
    k = {"v0": KIND_V0, "versioned": KIND_VERSIONED, "bb_info": KIND_BB_INFO}[kind]
    return MapInput(data=data, kind=k, file="gen.o", label="section [5] .llvm_bb_addr_map",
                    source=SRC)


# ============================================================== llvm-readobj vs bbmap dump
MD_KEYS = {"HasReturn": "has_return", "HasTailCall": "has_tail_call", "IsEHPad": "is_eh_pad",
           "CanFallThrough": "can_fall_through", "HasIndirectBranch": "has_indirect_branch"}


def readobj_pairs(pairs):
    """Keep duplicate keys (readobj 14 repeats "BBAddrMap" once per section)."""
    d: dict = {}
    for k, v in pairs:
        if k == "BBAddrMap":
            d.setdefault(k, []).extend(v)
        else:
            d[k] = v
    return d


def normalize_readobj(doc) -> list[dict]:
    """Both readobj JSON shapes (14: file-keyed, no ranges; 16+: BB Ranges) to one."""
    maps = []
    for item in doc:
        if "BBAddrMap" not in item and len(item) == 1:
            item = next(iter(item.values()))
        maps.extend(item.get("BBAddrMap", []))
    out = []
    for entry in maps:
        fn = entry["Function"]
        if "BB Ranges" in fn:
            ranges = [(r["Base Address"], r["BB Entries"]) for r in fn["BB Ranges"]]
        else:
            ranges = [(fn["At"], fn["BB entries"])]
        nr = []
        for base, blocks in ranges:
            nb = []
            for i, b in enumerate(blocks):
                nb.append({
                    "id": b.get("ID", i), "offset": b["Offset"], "size": b["Size"],
                    "metadata": {v: b.get(k, False) for k, v in MD_KEYS.items()},
                    "callsite_offsets": b.get("Callsite End Offsets"),
                    "hash": b.get("Hash")})
            nr.append({"base_address": base, "blocks": nb})
        pgo = fn.get("PGO analyses")
        npgo = None
        if pgo is not None:
            npgo = {"entry_count": pgo.get("FuncEntryCount")}
            if "PGO BB entries" in pgo:
                npgo["blocks"] = [{
                    "frequency": p.get("Frequency"),
                    "postlink_frequency": p.get("PostLink Frequency"),
                    "successors": [(s["ID"], s["Probability"], s.get("PostLink Probability"))
                                   for s in p["Successors"]] if "Successors" in p else None}
                    for p in pgo["PGO BB entries"]]
        out.append({"address": fn["At"], "name": fn["Name"], "ranges": nr, "pgo": npgo})
    return out


def normalize_ours(d: dict, golden: list[dict]) -> list[dict]:
    out = []
    for fn, g in zip(d["functions"], golden + [None] * len(d["functions"])):
        ranges = []
        for r in fn["ranges"]:
            blocks = []
            for b in r["blocks"]:
                cs = b.get("callsite_offsets")
                blocks.append({"id": b["id"], "offset": b["offset"], "size": b["size"],
                               "metadata": b["metadata"],
                               "callsite_offsets": cs if cs else None,  # readobj omits []
                               "hash": b.get("hash")})
            ranges.append({"base_address": r["base_address"], "blocks": blocks})
        pgo = fn.get("pgo")
        npgo = None
        if pgo is not None or (g and g["pgo"] is not None):
            pgo = pgo or {}
            npgo = {"entry_count": pgo.get("entry_count")}
            if "blocks" in pgo:
                npgo["blocks"] = [{
                    "frequency": p.get("frequency"),
                    "postlink_frequency": p.get("postlink_frequency"),
                    "successors": [(s["id"], s["probability"], s.get("postlink_frequency"))
                                   for s in p["successors"]] if "successors" in p else None}
                    for p in pgo["blocks"]]
        out.append({"address": fn["address"], "name": fn.get("mangled") or fn["name"] or "<?>",
                    "ranges": ranges, "pgo": npgo})
    return out


# ============================================================== pictures
NS = "{http://www.w3.org/2000/svg}"
LBR = profile_cases("lbr")
PLAIN = profile_cases("plain")
EH = [c for c in PLAIN if "eh" in c[0]]
CASES = LBR[:3] + [c for c in PLAIN if c[0] == "demo-plain" or c in EH][:3]
needs_corpus = pytest.mark.skipif(not CASES, reason="corpus profiles not built")


@cache
def result_of(perf: str, binary: str):  # noqa: ANN201
    return annotate([perf], binary)


def function_blocks(result, key: int) -> list[int]:  # noqa: ANN001
    m = result.block_map
    return [b for f in result.functions.bmfuncs[key] for b in m.function_blocks(f)]


def pictures(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("data-name"): g for g in root.iter(f"{NS}g")
            if g.get("class") == "function"}


# perf2bolt-22, the oracle of BOLT's formats (tests/test_outputs_bolt_*.py).
PERF2BOLT = shutil.which("perf2bolt-22")


def run_perf2bolt(perf: str | Path, binary: str | Path, *extra: str,
                  cwd: str | Path | None = None) -> tuple[str, str, int]:
    """(fdata, stdout+stderr, exit status) of perf2bolt-22 on one profile; ``cwd`` where
    it runs (it looks for a profile's binaries by name there), else a scratch directory."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.fdata")
        r = subprocess.run([PERF2BOLT, *extra, "-p", str(perf), "-o", out, str(binary)],
                           capture_output=True, text=True, timeout=300, cwd=cwd or d)
        text = Path(out).read_text() if os.path.exists(out) else ""
    return text, r.stdout + r.stderr, r.returncode


def fdata_lines(text: str) -> collections.Counter:
    """An fdata file's lines as a multiset (perf2bolt writes them in hash order)."""
    return collections.Counter(ln for ln in text.splitlines() if ln.strip())


def perf2bolt_tally(log: str, what: str) -> int:
    """One of the counters perf2bolt prints (``WHAT: N``)."""
    m = re.search(rf"{what}: (\d+)", log)
    assert m, f"perf2bolt printed no '{what}'"
    return int(m.group(1))


# ============================================================== a real browser
def chromium_driver(width: int = 1400, height: int = 1000):  # noqa: ANN201 - (driver | None, why)
    """A headless Chromium (Debian's ``chromium`` and ``chromedriver``, found on PATH or
    named by ``BBMAP_CHROMIUM`` / ``BBMAP_CHROMEDRIVER``) under selenium, logging the
    page's console; or ``(None, reason)`` when either is missing (no browser is
    downloaded)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "selenium is not installed (pip install -e '.[test]')"
    browser = os.environ.get("BBMAP_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    driver = os.environ.get("BBMAP_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver:
        return None, "no chromium / chromedriver (apt-get install chromium chromium-driver)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--force-device-scale-factor=1", f"--window-size={width},{height}",
              "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver), options=opts), ""
    except Exception as e:  # noqa: BLE001 - a browser that cannot start is a skip reason
        return None, f"chromium did not start: {str(e).splitlines()[0]}"


def random_counts_and_hot(rng, n: int, edges, given_counts: bool,  # noqa: ANN001
                          given_hot: bool) -> tuple[list | None, list | None]:
    """Node counts and hot flags for an Ext-TSP test graph, or None where not given: counts
    of every kind (0, 1, fractional, huge), and hot flags as plan.py gives them (every end
    of a positive jump is hot)."""
    counts = [rng.choice([0, 1, 7.5, rng.random() * 1e7]) for _ in range(n)] \
        if given_counts else None
    hot = None
    if given_hot:
        hot = [rng.random() < 0.3 for _ in range(n)]
        for a, b, x in edges:
            if x > 0:
                hot[a] = hot[b] = True
    return counts, hot
