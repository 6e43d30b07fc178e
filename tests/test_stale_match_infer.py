"""clang 22's match-infer profile (``annotate --format match-infer``): written from a real
profile, read by clang 22 itself (``-fbasic-block-sections=list=FILE -mllvm
-basic-block-section-match-infer``), whose output sections prove it applied it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bbmap.binary import load_binary
from tests.helpers import CORPUS, cli, cli_stdout, one_error_line

STALE = CORPUS / "stale"
CLANG = shutil.which("clang-22")
PERF = str(STALE / "profiles" / "v1-O2-hash.perf.data")
OLD = str(STALE / "bin" / "v1-O2-hash")
NEW = str(STALE / "bin" / "v2-O2-hash")
FLAGS = ["-fbasic-block-address-map", "-funique-internal-linkage-names", "-fno-pie",
         "-mllvm", "-emit-bb-hash"]


def _profile(*extra: str) -> str:
    code, out = cli_stdout("annotate", PERF, *extra, "--format", "match-infer")
    assert code == 0, out
    return out


def _functions(text: str) -> dict[str, tuple[str, str]]:
    lines = text.splitlines()
    assert lines[0] == "v1"
    out = {}
    for i, ln in enumerate(lines):
        if ln.startswith("f "):
            assert lines[i + 1].startswith("g ") and lines[i + 2].startswith("h ")
            out[ln[2:]] = (lines[i + 1], lines[i + 2])
    return out


def _sections(obj: Path) -> set[str]:
    out = subprocess.run(["llvm-objdump-22", "-h", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    return {re.sub(r"\.__uniq\.\d+", "", w) for w in out.split() if w.startswith(".text")}


def _compile(tmp: Path, profile: str, src: str, *extra: str) -> set[str]:
    p = tmp / "prof.txt"
    p.write_text(profile)
    obj = tmp / "out.o"
    # from corpus/stale with the same relative source path as build.sh: the
    # -funique-internal-linkage-names suffix is a hash of the module's name
    subprocess.run([CLANG, "-O2", *FLAGS, f"-fbasic-block-sections=list={p}", "-mllvm",
                    "-basic-block-section-match-infer", *extra, "-c", "-o", str(obj), src],
                   cwd=STALE, check=True, capture_output=True)
    return _sections(obj)


def test_counts_and_hashes_of_the_profiled_build() -> None:
    fns = _functions(_profile(OLD))
    m = load_binary(OLD).block_map
    by_name = {n: f for f, n in enumerate(m.func_name)}
    assert {"main", "mix"} <= set(fns)
    for name, (g, h) in fns.items():
        f = by_name[name]
        blocks = range(int(m.range_block_ptr[m.func_range_ptr[f]]),
                       int(m.range_block_ptr[m.func_range_ptr[f + 1]]))
        want = {int(m.block_id[b]): int(m.block_hash[b]) for b in blocks}
        got = {int(i): int(x, 16) for i, x in (t.split(":") for t in h.split()[1:])}
        assert got == want
        ids = {int(t.split(",")[0].split(":")[0]) for t in g.split()[1:]}
        assert ids == set(want)


def test_a_binary_without_hashes_is_refused() -> None:
    code, out = cli("annotate", str(STALE / "profiles" / "v1-O2.perf.data"),
                    str(STALE / "bin" / "v1-O2"), "--format", "match-infer")
    assert code == 3
    assert "-emit-bb-hash" in one_error_line(out)


def test_carried_profile_takes_the_new_builds_names() -> None:
    fns = _functions(_profile(NEW, "--profiled-binary", OLD))
    names = set(load_binary(NEW).block_map.func_name)
    assert set(fns) <= names
    assert any("classify" in n for n in fns)


@pytest.mark.skipif(CLANG is None, reason="clang-22 not installed")
def test_clang_applies_it_to_a_rebuild_at_o3(tmp_path: Path) -> None:
    """The profile of release 1 at -O2 given to release 1 at -O3: clang matches every
    hot function's blocks and lays each out (its own section, cold blocks split)."""
    secs = _compile(tmp_path, _profile(OLD), "src/prog_v1.c")
    for fn in ("main", "_ZL8checksumPKji", "_ZL14insertion_sortPji", "_ZL8classifyj"):
        assert f".text.{fn}" in secs, (fn, secs)
    without = _compile(tmp_path, "v1\n", "src/prog_v1.c")
    assert not any(s.startswith(".text.split") for s in without)


@pytest.mark.skipif(CLANG is None, reason="clang-22 not installed")
def test_clang_applies_the_carried_names_to_the_next_release(tmp_path: Path) -> None:
    """Release 2 renames every static function (its __uniq suffix): under the old names
    clang finds only main(); under the names bbmap matched it finds the edited ones too
    (below its default match threshold for those, hence 0.1 here)."""
    old_names = _compile(tmp_path, _profile(OLD), "src/prog_v2.c",
                         "-mllvm", "-propeller-infer-threshold=0.1")
    assert ".text._ZL8classifyj" not in old_names
    new_names = _compile(tmp_path, _profile(NEW, "--profiled-binary", OLD), "src/prog_v2.c",
                         "-mllvm", "-propeller-infer-threshold=0.1")
    for fn in ("main", "_ZL8checksumPKji", "_ZL8classifyj"):
        assert f".text.{fn}" in new_names, (fn, new_names)
