"""Record a fresh profile with perf and check the exact ELF vaddr of every sample.

`perf script -F sym,symoff` gives each sample as ``symbol+offset``; bbmap's vaddr must be
that symbol's address plus the offset, and its function the symbol's parent, for lld
(text offset != vaddr), GNU ld non-PIE and a shared library at a random base.
Skipped where perf cannot record (no perf, or perf_event_paranoid forbids it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bbmap.binary import load_binary
from bbmap.binary.types import parent_name
from bbmap.index import BlockIndex
from bbmap.mappings import IN_BINARY, ProfileMappings
from bbmap.perf import PerfData, SampleBatch

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
LINE = re.compile(r"^\s*(\d+)\s+(\d+)\.(\d+):\s+([0-9a-f]+)\s+(\S+)\+0x([0-9a-f]+)\s+\((.*)\)\s*$")
CASES = [("clang-22/addrmap-lld/layout.pie", None, "60000"),
         ("clang-22/addrmap/layout.nopie", None, "60000"),
         ("clang-22/app/libkern.so", "clang-22/app/app", "6000")]


def _record(tmp: Path, exe: Path, arg: str) -> Path | None:
    if not shutil.which("perf"):
        return None
    data = tmp / "perf.data"
    env = dict(os.environ, LD_LIBRARY_PATH=str(exe.parent))
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o",
                        str(data), str(exe), arg], capture_output=True, env=env, timeout=120)
    return data if r.returncode == 0 and data.is_file() else None


@pytest.mark.slow
@pytest.mark.parametrize("binary,driver,arg", CASES, ids=[c[0] for c in CASES])
def test_vaddr_equals_perf_symbol_plus_offset(tmp_path: Path, binary: str, driver: str | None,
                                             arg: str) -> None:
    src = CORPUS / "bin" / binary
    if not src.is_file():
        pytest.skip("corpus not built")
    bin_copy = tmp_path / src.name
    shutil.copy2(src, bin_copy)
    exe = bin_copy
    if driver:
        exe = tmp_path / Path(driver).name
        shutil.copy2(CORPUS / "bin" / driver, exe)
    data = _record(tmp_path, exe, arg)
    if data is None:
        pytest.skip("perf record not permitted here")
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time,ip,sym,symoff,dso",
                          "--ns", "--no-demangle"], capture_output=True, text=True,
                         timeout=120).stdout
    perf = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and m[7] == str(bin_copy):
            perf[(int(m[1]), int(m[2]) * 10**9 + int(m[3]))] = (m[5], int(m[6], 16))
    b = load_binary(bin_copy)
    sym_addr = {n: int(a) for n, a in zip(b.symbols.names, b.symbols.address)}
    pm = ProfileMappings.from_perf_data(PerfData(data), b)
    idx = BlockIndex(b.block_map, b.symbols, b.sections)
    seen = 0
    for item in PerfData(data).stream(branches=False):
        if not isinstance(item, SampleBatch):
            continue
        c = pm.classify(item)
        lk = idx.lookup(c.vaddr)
        for k in range(len(item)):
            key = (int(item.tid[k]), int(item.time[k]))
            if key not in perf:
                assert c.where[k] != IN_BINARY or int(lk.func[k]) < 0, hex(int(item.ip[k]))
                continue
            sym, off = perf.pop(key)
            assert c.where[k] == IN_BINARY
            if sym.endswith("@plt"):  # perf synthesizes PLT symbols; bbmap has no function
                assert any(s.name.startswith(".plt") and
                           s.sh_addr <= int(c.vaddr[k]) < s.sh_addr + s.sh_size
                           for s in b.sections) and int(lk.func[k]) < 0
                continue
            assert int(c.vaddr[k]) == sym_addr[sym] + off, (sym, off, hex(int(c.vaddr[k])))
            assert parent_name(idx.func_names[int(lk.func[k])]) == parent_name(sym)
            seen += 1
    assert not perf, f"{len(perf)} perf samples in the binary not seen by bbmap"
    assert seen > 20
