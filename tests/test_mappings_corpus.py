"""Every corpus profile: the function bbmap gives each sample is the symbol `perf script` gave.

The goldens (`script.txt`, `buildid-list.txt`) were written by perf 6.1 when the profile was
recorded; `.cold` / `.__part.N` parts count as their parent.  Every sample perf put in a
corpus binary must be IN_BINARY for bbmap with the same function, and every sample bbmap
puts in the binary must be one perf put there: 100%, no tolerance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cxxfilt
import numpy as np
import pytest

from bbmap.binary import load_binary
from bbmap.binary.types import parent_name
from bbmap.index import OUTSIDE_FUNCTION, BlockIndex
from bbmap.mappings import IN_BINARY, ProfileMappings
from bbmap.perf import PerfData, SampleBatch

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
HEADER = re.compile(r"^\s*(\d+)/(\d+)\s+(\d+)\.(\d{6}):\s*(.*)$")
FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def _profiles() -> list[Path]:
    if not (CORPUS / "profiles").is_dir():
        return []
    return sorted(p for p in (CORPUS / "profiles").iterdir()
                  if (p / "perf.data").is_file() and (p / "script.txt").is_file()
                  and (p / "buildid-list.txt").is_file())


def _binaries() -> list[dict]:
    m = CORPUS / "manifest.json"
    if not m.is_file():
        return []
    return [b for b in json.loads(m.read_text())["binaries"] if b.get("build_id")
            and b["kind"] != "debug"]


def parse_script(text: str) -> dict[tuple[int, int], tuple[str, str]]:
    """(tid, time in us) -> (symbol, dso) of each sample (first frame for call chains)."""
    out = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        h = HEADER.match(lines[i])
        i += 1
        if not h:
            continue
        rest = h.group(5)
        if not rest.strip():  # call chain: the sample's own frame is the next line
            while i < len(lines) and not lines[i].strip():
                i += 1
            rest = lines[i] if i < len(lines) else ""
        f = FRAME.match(rest)
        if f:
            key = (int(h.group(2)), int(h.group(3)) * 1_000_000 + int(h.group(4)))
            out[key] = (f.group(2), f.group(3))
    return out


def _names(idx: BlockIndex, func: int, vaddr: int, plt: list[tuple[int, int]],
           wants: tuple[str, ...] = ()) -> set[str]:
    """The names perf may print for this lookup.

    perf prints C++ names demangled without parameters, and names PLT stubs
    ``foo@plt`` from relocations; bbmap has no function there (PLT stubs are not in
    the symbol table), so a PLT address outside every function matches ``*@plt``.
    """
    if func < 0:
        return {"[unknown]"} | ({"@plt"} if any(a <= vaddr < b for a, b in plt) else set())
    n = idx.func_names[func]
    names = {parent_name(n)}
    if n.startswith("_Z"):  # perf drops the return type and the parameters
        d = cxxfilt.demangle(parent_name(n), external_only=False)
        names.add(d)
        names |= {want for want in wants if want + "(" in d}
    if n.startswith("func@"):
        names.add("[unknown]")  # a map without a symbol: perf has no name for it
    return names


CASES = [(p, b) for p in _profiles() for b in _binaries()
         if b["build_id"] in (p / "buildid-list.txt").read_text()]


@pytest.mark.skipif(not CASES, reason="corpus profiles not built")
@pytest.mark.parametrize("profile,binary", CASES,
                         ids=[f"{p.name}:{b['name']}" for p, b in CASES])
def test_function_per_sample_equals_perf_script(profile: Path, binary: dict) -> None:
    b = load_binary(CORPUS / binary["path"])
    ids = dict(line.split(None, 1)[::-1] for line in
               (profile / "buildid-list.txt").read_text().splitlines()
               if len(line.split(None, 1)) == 2)
    ours_names = {n.strip() for n, bid in ids.items() if bid == binary["build_id"]}
    perf_map = parse_script((profile / "script.txt").read_text())
    pm = ProfileMappings.from_perf_data(PerfData(profile / "perf.data"), b)
    assert pm.evidence.matched_by == "build-id", pm.evidence.explain()
    idx = BlockIndex(b.block_map, b.symbols, b.sections)
    plt = [(s.sh_addr, s.sh_addr + s.sh_size) for s in b.sections if s.name.startswith(".plt")]
    in_binary = checked = 0
    bad: list[str] = []
    for item in PerfData(profile / "perf.data").stream(branches=False):
        if not isinstance(item, SampleBatch):
            continue
        c = pm.classify(item)
        lk = idx.lookup(c.vaddr)
        us = (item.time // np.uint64(1000)).tolist()
        for k in range(len(item)):
            key = (int(item.tid[k]), us[k])
            if key not in perf_map:
                continue
            sym, dso = perf_map[key]
            perf_in = dso in ours_names
            ours_in = c.where[k] == IN_BINARY
            checked += 1
            if perf_in != ours_in:
                bad.append(f"{hex(int(item.ip[k]))}: perf dso {dso}, bbmap where {c.where[k]}")
                continue
            if not perf_in:
                continue
            in_binary += 1
            want = "@plt" if sym.endswith("@plt") else parent_name(sym)
            if want not in _names(idx, int(lk.func[k]), int(c.vaddr[k]), plt, (want,)):
                bad.append(f"{hex(int(item.ip[k]))} vaddr {hex(int(c.vaddr[k]))}: perf {sym}, "
                           f"bbmap {idx.function_name(int(lk.func[k]))}")
    assert checked == len(perf_map), "every sample perf printed was matched to one of ours"
    assert in_binary > 0
    assert not bad, f"{len(bad)}/{in_binary} disagree, e.g. {bad[:5]}"


def test_status_outside_means_no_function():
    # guard for _names(): an OUTSIDE_FUNCTION lookup carries func -1
    assert OUTSIDE_FUNCTION == 2
