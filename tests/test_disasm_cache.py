"""The disassembly cache (bbmap/binary/disasm_cache.py): a table assembled from it equals
a fresh sweep's, entries grow by the ranges a run adds, and a bad cache never changes a
result — corrupt, truncated, foreign, old-version entries are ignored with a warning and
replaced; an unwritable directory is a warning; the directory stays under its bound;
``BBMAP_NO_CACHE`` / ``--no-cache`` turn it off.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import PIE_BINARY, PIE_PROFILE, all_corpus_binaries

from bbmap.binary import load_binary
from bbmap.binary.disasm_cache import (
    _SUFFIX,
    ENV_OFF,
    DisasmCache,
    decode_entry,
    default_dir,
    encode_entry,
)
from bbmap.cfg import recover_cfg

BINARIES = all_corpus_binaries()
CFG_FIELDS = ("term", "n_insn", "succ_ptr", "succ_block", "succ_kind", "unknown_succ",
              "call_block", "call_addr", "call_target", "call_func", "tail_block",
              "tail_func", "first_size", "first_kind", "first_row", "first_cheap")


def _same_cfg(a, b) -> None:  # noqa: ANN001
    for f in CFG_FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.notes == b.notes
    assert [t.__dict__ for t in a.jump_tables] == [t.__dict__ for t in b.jump_tables]


def _cfg_or_skip(b, **kw):  # noqa: ANN001, ANN202
    from bbmap.errors import BBMapError

    try:
        return recover_cfg(b, **kw)
    except BBMapError as e:
        pytest.skip(str(e))


@pytest.mark.skipif(not BINARIES, reason="corpus not built")
@pytest.mark.parametrize("binary", BINARIES)
def test_cached_equals_fresh_and_entries_grow(binary, tmp_path):
    b = load_binary(binary)
    m = b.block_map
    fresh = _cfg_or_skip(b)
    F = m.num_functions
    half = np.arange(0, F, 2)
    cache = DisasmCache(str(tmp_path))
    # a run on every other function, then one on all: the second adds what was missing
    part = recover_cfg(b, functions=half, cache=cache)
    _same_cfg(part, recover_cfg(b, functions=half))
    assert cache.hit_ranges == 0
    whole = recover_cfg(b, cache=cache)
    _same_cfg(whole, fresh)
    # now everything is cached: nothing is swept, subsets are cut out of the entry
    again = DisasmCache(str(tmp_path))
    _same_cfg(recover_cfg(b, cache=again), fresh)
    assert again.swept_ranges == 0 and again.hit_ranges == m.num_ranges
    odd = np.arange(1, F, 2)
    _same_cfg(recover_cfg(b, functions=odd, cache=again), recover_cfg(b, functions=odd))
    assert not again.warnings and len(os.listdir(tmp_path)) == 1


def _entry(tmp_path) -> str:  # noqa: ANN001
    (name,) = [n for n in os.listdir(tmp_path) if n.endswith(_SUFFIX)]
    return os.path.join(tmp_path, name)


def _forget_results(cache_dir) -> None:  # noqa: ANN001
    """Drop the whole-result entries beside the disassembly (result_cache.py), so the next
    run of the same inputs reads the disassembly entry instead of skipping it."""
    import shutil

    shutil.rmtree(os.path.join(cache_dir, "results"), ignore_errors=True)


def _rewrite(raw: bytes, edit) -> bytes:  # noqa: ANN001
    """An entry with its JSON header changed by ``edit`` (the payload kept)."""
    import json

    n = int.from_bytes(raw[8:16], "little")
    head = json.loads(raw[16:16 + n])
    edit(head)
    new = json.dumps(head).encode()
    new += b" " * (-len(new) % 8)
    return raw[:8] + len(new).to_bytes(8, "little") + new + raw[16 + n:]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "foreign", "version",
                                    "inconsistent", "huge-header", "object", "header-size"])
def test_a_bad_entry_is_ignored_with_a_warning_and_replaced(damage, tmp_path):
    b = load_binary(PIE_BINARY)
    fresh = recover_cfg(b)
    recover_cfg(b, cache=DisasmCache(str(tmp_path)))
    path = _entry(tmp_path)
    raw = Path(path).read_bytes()
    if damage == "garbage":
        raw = b"\x00not a cache entry" * 100
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    elif damage == "empty":
        raw = b""
    elif damage in ("huge-header", "object", "header-size"):
        def edit(head: dict) -> None:
            col = next(a for a in head["arrays"] if a[0] == "ranges")
            if damage == "huge-header":  # a column claiming 2**40 elements
                col[2] = [1 << 40]
            else:  # a pickled object column
                col[1] = "|O"
        raw = _rewrite(raw, edit) if damage != "header-size" else \
            raw[:8] + (1 << 40).to_bytes(8, "little") + raw[16:]
    else:
        arrays = {k: v.copy() for k, v in decode_entry(raw).items()}
        if damage == "foreign":  # another binary's entry under this name
            arrays["key"] = np.frombuffer(b"0" * 64, np.uint8)
        elif damage == "version":
            arrays["version"] = np.array([0], np.int64)
        elif damage == "inconsistent":  # rows naming a range the entry does not cover
            arrays["run_range"] = arrays["run_range"] + 10**6
        raw = encode_entry(arrays)
    Path(path).write_bytes(raw)
    cache = DisasmCache(str(tmp_path))
    _same_cfg(recover_cfg(b, cache=cache), fresh)
    assert len(cache.warnings) == 1 and "ignored" in cache.warnings[0], cache.warnings
    assert path in cache.warnings[0]
    good = DisasmCache(str(tmp_path))  # replaced by a good entry
    _same_cfg(recover_cfg(b, cache=good), fresh)
    assert not good.warnings and good.swept_ranges == 0


def test_an_unwritable_directory_is_a_warning(tmp_path):
    b = load_binary(PIE_BINARY)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = DisasmCache(str(blocker / "cache"))
    _same_cfg(recover_cfg(b, cache=cache), recover_cfg(b))
    assert len(cache.warnings) == 1 and "cannot write" in cache.warnings[0]


def test_the_directory_stays_under_its_bound(tmp_path):
    b = load_binary(PIE_BINARY)
    cache = DisasmCache(str(tmp_path))
    recover_cfg(b, cache=cache)
    size = os.path.getsize(_entry(tmp_path))
    for i in range(5):  # older entries of other binaries
        p = tmp_path / f"{i:064x}.npz"
        p.write_bytes(b"x" * size)
        os.utime(p, ns=(i * 10**9, i * 10**9))
    small = DisasmCache(str(tmp_path), max_bytes=3 * size)
    recover_cfg(b, functions=np.arange(1), cache=small)  # a hit: nothing written
    other = tmp_path.parent / "other.elf"  # another binary (other code): a new entry
    other.write_bytes(_code_changed(b))
    recover_cfg(load_binary(other), cache=small)  # ... and the directory trimmed
    left = sorted(os.listdir(tmp_path))
    total = sum(os.path.getsize(tmp_path / n) for n in left)
    assert total <= 3 * size + os.path.getsize(tmp_path / max(
        left, key=lambda n: os.path.getmtime(tmp_path / n)))
    assert f"{0:064x}.npz" not in left and f"{1:064x}.npz" not in left  # oldest first


def _code_changed(b) -> bytes:  # noqa: ANN001
    """The binary's bytes with the last byte of its first executable section changed."""
    from bbmap.binary.disasm import swept_sections

    raw = bytearray(Path(b.path).read_bytes())
    sec = next(s for s in swept_sections(b.sections) if s.sh_size)
    raw[sec.sh_offset + sec.sh_size - 1] ^= 0xFF
    return bytes(raw)


def test_the_key_is_the_code_not_the_file(tmp_path):
    """A binary that differs only outside its executable sections (here: a byte more at
    the end of the file) meets its entry, whole; one whose code differs by a byte gets
    an entry of its own."""
    b = load_binary(PIE_BINARY)
    recover_cfg(b, cache=DisasmCache(str(tmp_path)))
    first = sorted(os.listdir(tmp_path))
    tail = tmp_path.parent / "tail.elf"
    tail.write_bytes(Path(PIE_BINARY).read_bytes() + b"\0")
    cache = DisasmCache(str(tmp_path))
    got = recover_cfg(load_binary(tail), cache=cache)
    assert cache.swept_ranges == 0 and cache.hit_ranges > 0
    assert sorted(os.listdir(tmp_path)) == first
    _same_cfg(got, recover_cfg(load_binary(tail)))
    code = tmp_path.parent / "code.elf"
    code.write_bytes(_code_changed(b))
    cache = DisasmCache(str(tmp_path))
    recover_cfg(load_binary(code), cache=cache)
    assert cache.hit_ranges == 0 and len(os.listdir(tmp_path)) == len(first) + 1


def test_environment_and_cli_switch_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "c"))
    assert default_dir() == str(tmp_path / "c")
    monkeypatch.setenv(ENV_OFF, "1")
    assert DisasmCache.from_env() is None
    monkeypatch.delenv(ENV_OFF)
    assert DisasmCache.from_env() is not None
    assert DisasmCache.from_env(enabled=False) is None
    monkeypatch.delenv("BBMAP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == str(tmp_path / "xdg" / "bbmap" / "disasm")


@pytest.mark.skipif(not os.path.exists(PIE_PROFILE), reason="corpus not built")
def test_cli_output_is_the_same_with_a_cold_warm_corrupt_or_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))
    outs = []
    for run in ("cold", "warm", "corrupt", "off"):
        args = ["annotate", PIE_PROFILE, str(PIE_BINARY), "--inference", "on", "--format",
                "json", "--inference-solver", "builtin"]
        if run == "corrupt":
            Path(_entry(tmp_path / "cache")).write_bytes(b"junk")
            _forget_results(tmp_path / "cache")
        if run == "off":
            args.append("--no-cache")
        from bbmap.cli import main

        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        outs.append(r.stdout)
        if run == "corrupt":
            assert "disassembly cache entry" in r.stderr and "ignored" in r.stderr
        else:
            assert "disassembly cache" not in r.stderr
    assert outs[0] == outs[1] == outs[2] == outs[3]
    # one disassembly entry (beside it, the solved functions' file: flow_cache.py)
    assert len([f for f in os.listdir(tmp_path / "cache") if f.endswith(".bbdis")]) == 1


@pytest.mark.parametrize("n", [0, 1, 50])
@pytest.mark.parametrize("wide", [False, True])
def test_entry_rows_round_trip(n, wide, tmp_path):
    """The compact layout (runs, offsets, targets only where present) gives back every row,
    also with a range spanning more than 4 GiB and with no rows at all."""
    from bbmap.binary.disasm import Decoded, SweptRows

    rng = np.random.default_rng(n)
    rr = np.sort(rng.integers(0, 5, n)).astype(np.int64)
    addr = (0x400000 + np.arange(n, dtype=np.uint64) * 3 + rr.astype(np.uint64) * 0x1000)
    if wide and n:
        addr[-1] += np.uint64(1 << 33)
    target = np.where(rng.random(n) < 0.3, rng.integers(0, 2**40, n), -1).astype(np.int64)
    rows = Decoded(addr, rng.integers(1, 15, n).astype(np.uint8),
                   rng.integers(0, 9, n).astype(np.uint8), target,
                   rng.integers(0, 3, n).astype(np.uint8))
    R = 6
    decoded = np.zeros(R, bool)
    decoded[:5] = True
    end = np.arange(R, dtype=np.uint64) * np.uint64(7)
    end[5] = 0
    swept = SweptRows(rows, rr, decoded, end, [(1, 0x401000), (3, 0x403004)])
    cache = DisasmCache(str(tmp_path))
    covered = np.arange(5)
    cache.store("k" * 64, covered, swept)
    got_covered, got = cache.load("k" * 64, R)
    assert np.array_equal(got_covered, covered) and not cache.warnings
    for f in ("addr", "size", "kinds", "target", "cheap"):
        assert np.array_equal(getattr(got.rows, f), getattr(rows, f)), f
    assert np.array_equal(got.row_range, rr) and got.bad == swept.bad
    assert np.array_equal(got.decoded, decoded) and np.array_equal(got.end[:5], end[:5])


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(PIE_PROFILE), reason="corpus not built")
@pytest.mark.parametrize("fmt", ["json", "csv", "text"])
def test_console_script_quick_exit_keeps_output_cache_and_warnings(fmt, tmp_path):
    """The real process (``python -m bbmap``, which ends without the interpreter's teardown
    for these formats) writes what the in-process CLI writes, leaves a whole cache entry
    behind, and still says on stderr that a damaged entry was replaced."""
    import subprocess
    import sys

    from bbmap.cli import main

    env = {**os.environ, "BBMAP_CACHE_DIR": str(tmp_path / "cache")}
    args = ["annotate", "--format", fmt, "--inference", "on", "--inference-solver", "builtin",
            PIE_PROFILE, str(PIE_BINARY)]
    ref = CliRunner().invoke(main, [*args, "--no-cache"])
    assert ref.exit_code == 0, ref.output
    for run in ("cold", "warm", "corrupt"):
        if run == "corrupt":
            Path(_entry(tmp_path / "cache")).write_bytes(b"junk")
            _forget_results(tmp_path / "cache")
        got = subprocess.run([sys.executable, "-m", "bbmap", *args], capture_output=True,
                             env=env, cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert got.stdout == ref.stdout_bytes
        assert (b"ignored" in got.stderr) == (run == "corrupt"), got.stderr
    z = decode_entry(Path(_entry(tmp_path / "cache")).read_bytes())  # a whole entry
    assert int(z["version"][0]) >= 1


@pytest.mark.skipif(not Path(PIE_BINARY).exists(), reason="corpus not built")
def test_a_warm_cache_needs_no_capstone(tmp_path, monkeypatch):
    """A CFG taken whole from the cache decodes nothing, so capstone (~16 ms of imports)
    is not loaded: with every ``import capstone`` made to fail, the cached CFG of the
    functions without an indirect jump (whose jump tables are read with capstone) is
    still made, and equals the fresh one."""
    import sys

    from bbmap.cfg import T_INDIRECT, T_TABLE

    b = load_binary(PIE_BINARY)
    cache = DisasmCache(str(tmp_path))
    full = _cfg_or_skip(b, cache=cache)
    ind = np.isin(full.term, [T_INDIRECT, T_TABLE])
    fs = np.setdiff1d(np.arange(b.block_map.num_functions), np.unique(full.block_func[ind]))
    assert len(fs) and ind.any()
    fresh = recover_cfg(b, functions=fs)
    monkeypatch.setitem(sys.modules, "capstone", None)  # importing it raises ImportError
    got = recover_cfg(load_binary(PIE_BINARY), functions=fs, cache=DisasmCache(str(tmp_path)))
    _same_cfg(got, fresh)


@pytest.mark.slow
def test_capstone_version_is_the_same_before_and_after_importing_it():
    """One install makes one key whether capstone is imported yet or not."""
    import subprocess
    import sys

    code = ("import sys; from bbmap.binary.disasm import capstone_version as v; a = v(); "
            "import capstone; v.cache_clear(); b = v(); assert a == b, (a, b); "
            "assert 'capstone' in sys.modules; print(a)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip()


@pytest.mark.skipif(not os.path.exists(PIE_PROFILE), reason="corpus not built")
def test_a_repeated_run_leaves_the_entry_alone(tmp_path, monkeypatch):
    """A hit reads the entry and writes nothing: the file keeps its inode, size and mtime
    (the LRU mark is renewed only once it is older than ``TOUCH_AFTER``), and the output
    is the same bytes."""
    from bbmap.binary import disasm_cache
    from bbmap.cli import main

    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))
    args = ["annotate", PIE_PROFILE, str(PIE_BINARY), "--inference", "on", "--format",
            "json", "--inference-solver", "builtin"]
    outs, stats = [], []
    for _ in range(3):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        outs.append(r.stdout)
        st = os.stat(_entry(tmp_path / "cache"))
        stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
    assert outs[0] == outs[1] == outs[2]
    assert stats[0] == stats[1] == stats[2]
    # an entry last used long ago is marked used again (once), still not rewritten
    p = _entry(tmp_path / "cache")
    old = int((os.stat(p).st_mtime - 2 * disasm_cache.TOUCH_AFTER) * 1e9)
    os.utime(p, ns=(old, old))
    _forget_results(tmp_path / "cache")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and r.stdout == outs[0]
    st = os.stat(p)
    assert st.st_ino == stats[0][0] and st.st_mtime_ns > old
