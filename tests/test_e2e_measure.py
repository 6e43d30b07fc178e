"""bench/e2e/measure.py: the callgrind reader, against hand-made input and against a trace.

Taken branches are the bench's second deterministic measure; they come from callgrind's
``--collect-jumps=yes`` output.  The oracle is the execution trace of corpus/tools/lbr.py
(every taken branch of the run, classified by its source instruction with capstone): on the
same run of a corpus program both must count the same jumps, edge by edge.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import capstone
import pytest
from elftools.elf.elffile import ELFFile
from helpers import CORPUS, REPO, corpus_binary

sys.path.insert(0, str(REPO / "bench" / "e2e"))
import compare  # noqa: E402
import measure  # noqa: E402

HANDMADE = """# callgrind format
version: 1
positions: instr line
events: Ir
summary: 120

ob=(1) {prog}
fl=(1) ???
fn=(1) f
0x1000 0 3
+2 0 5
jcnd=2/5 +10 0
* 0
+10 0 2
cob=(2) /lib/libc.so.6
cfi=(1)
cfn=(2) g
calls=4 0x9000 0
* 0 100
+4 0 1
jump=7 -20 0
* 0
ob=(2)
fn=(2)
0x9000 0 9
jump=1 +4 0
* 0
"""


def test_parse_handmade(tmp_path):
    prog = tmp_path / "prog"
    prog.write_bytes(b"")
    f = tmp_path / "callgrind.out"
    f.write_text(HANDMADE.format(prog=prog))
    cg = measure.parse_callgrind(f, prog, decode_calls=False)
    assert cg.instructions == 3 + 5 + 2 + 1 + 9  # the call line's 100 is inclusive
    assert cg.instructions_in_binary == 11
    assert cg.per_addr == {0x1000: 3, 0x1002: 5, 0x100C: 2, 0x1010: 1}
    assert cg.jumps == {(0x1002, 0x100C): 2, (0x1010, 0xFFC): 7}
    assert cg.calls == {(0x100C, 0x9000): 4}
    assert (cg.taken_in_binary, cg.taken_cond_in_binary, cg.uncond_in_binary) == (9, 2, 7)
    assert cg.taken_total == 10  # libc's jump too


ORPHAN = """# callgrind format
version: 1
positions: instr line
events: Ir
ob=(1) {prog}
fn=(1) f
{hot:#x} 0 3
jump=2 {cold:#x} 0
* 0
ob=(2) ???
fn=(2) f.cold.0
{cold_rt:#x} 0 4
jump=2 {back_rt:#x} 0
* 0
ob=(3) /usr/libexec/valgrind/vgpreload_core-amd64-linux.so
fn=(3) x
{cold_rt:#x} 0 5
"""


def test_code_valgrind_cannot_place_is_the_binarys(tmp_path):
    """Valgrind's debug info covers a binary's ``.text`` only: BOLT's ``.text.cold`` runs
    under ``ob=???`` at run-time addresses.  Code there that falls in the binary's
    executable sections at valgrind's PIE base is the binary's, at its link address."""
    prog = corpus_binary("c22-addrmap-pie")
    (lo, data), *_ = measure.executable_bytes(prog)
    hot, cold = lo + 16, lo + len(data) - 32
    base = measure.VALGRIND_PIE_BASE
    f = tmp_path / "callgrind.out"
    f.write_text(ORPHAN.format(prog=prog, hot=hot, cold=cold, cold_rt=cold + base,
                               back_rt=hot + base))
    cg = measure.parse_callgrind(f, prog, decode_calls=False)
    assert cg.per_addr == {hot: 3, cold: 4}
    assert cg.instructions_in_binary == 7 and cg.instructions == 12
    assert cg.jumps == {(hot, cold): 2, (cold, hot): 2}
    assert cg.taken_in_binary == 4


def test_page_footprint():
    cg = measure.CallgrindCounts(per_addr={0x1000: 90, 0x2000: 9, 0x3000: 1, 0x1004: 0})
    assert cg.page_footprint(0.99) == 2
    assert cg.page_footprint(1.0) == 3
    assert cg.page_footprint(0.5) == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_jumps_equal_the_trace(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    binary = tmp_path / src.name
    shutil.copy2(src, binary)
    out = tmp_path / "lbr"
    subprocess.run([sys.executable, str(CORPUS / "tools" / "lbr.py"), "--binary", str(binary),
                    "--readobj", str(CORPUS / "golden" / "c22-addrmap-pie.readobj22.json"),
                    "--rounds", "20", "--out", str(out), "--work", str(tmp_path / "w")],
                   check=True, capture_output=True)
    exact = json.loads((out / "exact-counts.json").read_text())
    cg = measure.callgrind(binary, ["20"])
    (lo, code), = measure.executable_bytes(binary)
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)

    def is_jump(a: int) -> bool:
        ins = next(cs.disasm_lite(code[a - lo:a - lo + 16], a))
        return ins[2].split()[-1].startswith(("j", "loop"))

    # callgrind skips PLT stubs (--skip-plt=yes) and .init: compare what .text runs, which
    # is all a layout moves
    with open(binary, "rb") as f:
        text = ELFFile(f).get_section_by_name(".text")
        t0, t1 = text["sh_addr"], text["sh_addr"] + text["sh_size"]
    want = {(int(e["from"], 16), int(e["to"], 16)): e["count"] for e in exact["edges"]
            if t0 <= int(e["from"], 16) < t1 and is_jump(int(e["from"], 16))}
    got = {k: v for k, v in cg.jumps.items() if t0 <= k[0] < t1}
    for (site, target), n in cg.calls.items():  # jumps into another function
        if t0 <= site < t1 and is_jump(site) and lo <= target < lo + len(code):
            got[(site, target)] = got.get((site, target), 0) + n
    assert got == want
    assert cg.instructions_in_binary > 1_000_000
    blocks = {int(b["address"], 16): b["count"] for b in exact["blocks"] if b["count"]}
    assert all(cg.per_addr.get(a) == n for a, n in blocks.items())


NOPS_C = r"""
#include <stdlib.h>
__attribute__((noinline)) int spin(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        __asm__ volatile("nop");
        s += i ^ (s >> 3);
    }
    return s;
}
__attribute__((noinline)) int once(int x) {
    __asm__ volatile(".p2align 6\n\tnop\n\t.p2align 4\n\tnop");
    return x * 3;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    int s = spin(n);
    for (int i = 0; i < 7; i++) s += once(i);
    return s == 12345;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("clang-22") is None,
                    reason="valgrind or clang-22 is not installed")
def test_nop_sites_are_the_executed_nops(tmp_path):
    """compare.nop_sites: every executed nop with callgrind's exact count -- the source's
    one-byte ``nop`` in a loop runs once per iteration, clang's loop-header padding once per
    entry, the ``.p2align`` padding inline asm puts before a ``nop`` once per call, each in
    the function that holds it; and every site is a nop in llvm-objdump-22's
    disassembly."""
    (tmp_path / "nops.c").write_text(NOPS_C)
    binary = tmp_path / "nops"
    subprocess.run(["clang-22", "-O2", "-fno-inline", str(tmp_path / "nops.c"), "-o",
                    str(binary)], check=True)
    cg = measure.callgrind(binary, ["1000"])
    sites = compare.nop_sites(cg, binary)
    spin = [s for s in sites if s[0] == "spin"]
    once = [s for s in sites if s[0] == "once"]
    assert [(size, n) for _, _, size, n in spin if size == 1] == [(1, 1000)]
    # the two source nops (and any one-byte padding), each run once per call
    assert len([a for _, a, size, _ in once if size == 1]) >= 2
    assert sum(size for _, _, size, _ in once) >= 2 + 15  # .p2align 4 after a nop: 15 bytes
    # clang's loop-header padding (before the loop, entered once by a fall-through)
    assert all(n == 1 for _, _, size, n in spin if size > 1)
    assert all(n == 7 for *_, n in once)
    dis = subprocess.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    nops = {int(line.split(":")[0], 16) for line in dis.splitlines()
            if line[:1] == " " and ":" in line and "nop" in line}
    assert {a for _, a, _, _ in sites} <= nops
    assert compare.instruction_mix(cg, binary)["nop"] == sum(n for *_, n in sites)
