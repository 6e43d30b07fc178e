"""The whole-result inference cache (bbmap/inference/result_cache.py): a hit gives the
bytes a fresh run gives in every format, without making the CFG or solving anything, and
writes nothing; other inputs are other keys; a damaged entry is a warning and a miss; an
unwritable directory is a warning; the directory stays under its bound; the key follows
bbmap's own code.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import PIE_BINARY, PIE_PROFILE

from bbmap.inference import result_cache
from bbmap.inference.result_cache import SUFFIX, ResultCache, _fingerprint_of

pytestmark = pytest.mark.skipif(not os.path.exists(PIE_PROFILE), reason="corpus not built")

ARGS = ["annotate", PIE_PROFILE, str(PIE_BINARY), "--inference", "on",
        "--inference-solver", "builtin"]


def _run(*extra: str) -> object:
    from bbmap.cli import main

    r = CliRunner().invoke(main, [*ARGS, *extra])
    assert r.exit_code == 0, r.output
    return r


def _entries(cache: Path) -> list[Path]:
    d = cache / "results"
    return sorted(d.glob("*" + SUFFIX)) if d.exists() else []


@pytest.mark.parametrize("fmt", ["json", "csv", "text", "propeller"])
def test_a_hit_is_the_fresh_bytes_and_makes_nothing(fmt, tmp_path, monkeypatch):
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))
    ref = _run("--format", fmt, "--no-cache").stdout
    assert _run("--format", fmt).stdout == ref  # cold: made and stored
    # a layout (propeller) also stores the counts of each half of the samples, which
    # its check of the block order reads (bbmap/inference/replicates.py)
    entries = _entries(tmp_path / "cache")
    assert len(entries) == (3 if fmt == "propeller" else 1)
    st = [os.stat(e) for e in entries]

    def no(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a hit made the CFG or solved")

    monkeypatch.setattr("bbmap.cfg.recover_cfg", no)
    monkeypatch.setattr("bbmap.inference.counts.infer_counts", no)
    warm = _run("--format", fmt)
    assert warm.stdout == ref and "result cache" not in warm.stderr
    for e, before in zip(entries, st):
        after = os.stat(e)
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
            (before.st_ino, before.st_size, before.st_mtime_ns)
    assert _entries(tmp_path / "cache") == entries


def test_other_inputs_are_other_keys(tmp_path, monkeypatch):
    """Another sample model is another result (and entry); each equals its fresh run."""
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))
    outs = {}
    for model in ("auto", "insn", "auto", "insn"):
        got = _run("--format", "json", "--sample-model", model).stdout
        assert outs.setdefault(model, got) == got
    assert outs["auto"] != outs["insn"]
    for model, out in outs.items():
        assert _run("--format", "json", "--sample-model", model, "--no-cache").stdout == out
    assert len(_entries(tmp_path / "cache")) == 2


@pytest.mark.parametrize("damage", ["junk", "truncated", "short-column", "not-json",
                                    "flipped-count", "no-meta"])
def test_a_damaged_entry_is_a_warning_and_a_miss(damage, tmp_path, monkeypatch):
    from bbmap.binary.disasm_cache import decode_entry, encode_entry

    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))
    ref = _run("--format", "json").stdout
    (entry,) = _entries(tmp_path / "cache")
    raw = entry.read_bytes()
    if damage == "junk":
        entry.write_bytes(b"junk")
    elif damage == "truncated":
        entry.write_bytes(raw[:len(raw) // 2])
    else:
        z = {k: np.array(v) for k, v in decode_entry(raw).items()}
        if damage == "short-column":
            z["block_count"] = z["block_count"][:-1]
        elif damage == "flipped-count":  # well formed, one count wrong: the digest says so
            z["block_count"] = z["block_count"].copy()
            z["block_count"][np.argmax(z["block_count"])] ^= 1
        elif damage == "no-meta":
            z["meta"] = np.frombuffer(b'{"result": {}, "digest": ""}', np.uint8)
        else:
            z["meta"] = np.frombuffer(b"{not json", np.uint8)
        entry.write_bytes(encode_entry(z))
    got = _run("--format", "json")
    assert got.stdout == ref
    assert "inference result cache" in got.stderr and "damaged" in got.stderr
    again = _run("--format", "json")  # replaced by a whole entry
    assert again.stdout == ref and "result cache" not in again.stderr


def test_an_unwritable_directory_is_a_warning(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "results").mkdir(parents=True)
    (cache / "results").chmod(0o500)
    if os.access(cache / "results", os.W_OK):  # root writes anyway
        (cache / "results").chmod(0o700)
        (cache / "results").rmdir()
        (cache / "results").write_text("a file where the directory goes")
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(cache))
    ref = _run("--format", "json", "--no-cache").stdout
    got = _run("--format", "json")
    assert got.stdout == ref
    assert "inference result cache: cannot write" in got.stderr


def test_the_directory_stays_under_its_bound(tmp_path):
    cols = {c: np.arange(1000, dtype=np.int64) for c in result_cache.BLOCK_COLUMNS}
    cols.update({c: np.arange(50, dtype=np.int64) for c in result_cache.EDGE_COLUMNS})
    rc = ResultCache(str(tmp_path), max_bytes=20_000)
    keys = [rc.key([str(i)]) for i in range(6)]
    for i, k in enumerate(keys):
        rc.store(k, cols, {"inference": {}, "sample_model": {"i": i}})
        p = rc.path(k)
        os.utime(p, ns=(i * 10**9, i * 10**9))  # written in this order
    left = sorted(os.listdir(rc.dir))
    assert keys[-1] + SUFFIX in left and keys[0] + SUFFIX not in left
    assert sum(os.path.getsize(os.path.join(rc.dir, n)) for n in left) <= 20_000 or \
        left == [keys[-1] + SUFFIX]
    got, meta = rc.load(keys[-1], 1000)
    assert meta == {"inference": {}, "sample_model": {"i": 5}}
    assert all(np.array_equal(got[c], cols[c]) and got[c].dtype == np.int64 for c in cols)


def test_wide_and_negative_values_round_trip(tmp_path):
    rc = ResultCache(str(tmp_path))
    cols = {c: np.array([0, 5, 2**40, -1], np.int64) for c in result_cache.BLOCK_COLUMNS}
    cols.update({c: np.array([-1, 1 << 33], np.int64) for c in result_cache.EDGE_COLUMNS})
    rc.store("k", cols, {"inference": {"x": [1.5, "y"]}, "sample_model": {}})
    got, meta = rc.load("k", 4)
    assert meta == {"inference": {"x": [1.5, "y"]}, "sample_model": {}}
    assert all(np.array_equal(got[c], cols[c]) for c in cols)
    assert rc.load("k", 5) is None and "damaged" in rc.warnings[-1]  # another map's length


def test_keys_tell_their_parts_apart():
    k = ResultCache.key
    assert k(["ab", "c"]) != k(["a", "bc"])
    assert k([np.arange(3)]) != k([np.arange(3, dtype=np.int32)])
    assert k([None, b"x"]) != k([b"x", None])
    assert k(["a", np.arange(4)]) == k(["a", np.arange(4)])


def test_the_key_follows_the_code(tmp_path):
    """Any edit of a module (its size or modification time) is another fingerprint; the
    bytecode caches are not part of it."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    a = tmp_path / "pkg" / "sub" / "a.py"
    a.write_text("x = 1\n")
    (tmp_path / "pkg" / "b.py").write_text("y = 2\n")
    before = _fingerprint_of(str(tmp_path / "pkg"))
    (tmp_path / "pkg" / "sub" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    assert _fingerprint_of(str(tmp_path / "pkg")) == before
    st = os.stat(a)
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert _fingerprint_of(str(tmp_path / "pkg")) != before
    assert len(result_cache.code_fingerprint()) == 16
