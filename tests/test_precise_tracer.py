"""corpus/tools/precise.py against a per-instruction trace of the same run.

precise.py numbers retired instructions from superblock starts (lbr.py's model of where
valgrind ends a superblock); the oracle is lackey's ``--trace-mem=yes``, which prints every
executed instruction, so the Nth retired instruction is read off directly (a repeat of the
same address is another iteration of a ``rep`` instruction, not another instruction;
valgrind's preloads are not the client's code).  Same seed, same draws: the sampled IPs
must be identical, and perf must read the file back to them (``--check``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CORPUS, corpus_binary
from oracles import perf_oracle as oracle

sys.path.insert(0, str(CORPUS / "tools"))
import lbr  # noqa: E402
import precise  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind is not installed")
EVERY, SEED, ROUNDS = 60, 7, "3"


def _reference_ips(binary: Path) -> tuple[list[int], int, int]:
    """(sampled IPs, retired instructions, rep iterations) from the per-instruction trace,
    under the environment precise.py gives the traced process."""
    space = lbr.AddressSpace(lbr.valgrind_mappings(binary, [ROUNDS], precise.ENV))
    proc, _, trace = lbr.lackey_mem_trace(binary, [ROUNDS], precise.ENV)
    rng = random.Random(SEED)

    def draw() -> int:
        return max(1, EVERY + rng.randint(-EVERY // 2, EVERY // 2))

    at, n, reps, prev, ips = draw(), 0, 0, -1, []
    for a, _ in trace:
        if not space.contains(a):
            continue
        if a == prev:
            reps += 1
            continue
        prev = a
        n += 1
        if n == at:
            ips.append(a)
            at += draw()
    assert proc.wait() == 0
    return ips, n, reps


def test_samples_equal_the_per_instruction_trace(tmp_path):
    binary = tmp_path / "layout.pie"
    shutil.copy2(corpus_binary("c22-addrmap-pie"), binary)
    out, work = tmp_path / "case", tmp_path / "work"
    run = [sys.executable, str(CORPUS / "tools" / "precise.py"), "--work", str(work)]
    env = {**os.environ, "PYTHONPATH": str(CORPUS.parent)}
    subprocess.run([*run, "--binary", str(binary), "--readobj",
                    str(CORPUS / "golden" / "c22-addrmap-pie.readobj22.json"),
                    "--rounds", ROUNDS, "--every", str(EVERY), "--seed", str(SEED),
                    "--out", str(out)], check=True, capture_output=True, env=env,
                   stdin=subprocess.DEVNULL)
    written = [int(line.split()[0], 16)
               for line in (work / "case.expected.txt").read_text().splitlines()]
    info = json.loads((out / "precise-info.json").read_text())
    ips, n, reps = _reference_ips(binary)
    assert written == ips
    assert (info["instructions"], info["rep_iterations"]) == (n, reps)
    assert reps > 0  # ld.so's rep stos ran: the rule was exercised
    assert info["samples"] == len(ips) > 1000 and info["unexplained"] == 0
    assert len(info["samples_by_object"]) == 3  # the binary, ld.so, libc
    if oracle.have_perf():
        r = subprocess.run([*run, "--check", str(out)], capture_output=True, text=True,
                           env=env)
        assert r.returncode == 0, r.stderr
        assert f"reads back all {len(ips)} samples unchanged" in r.stderr
