"""Where outputs go (``-o``) and what bad requests do, for every command that writes.

Found by a hostile-input pass: ``-o`` onto a device or a symlink replaced it with a regular
file (``-o /dev/full`` as root destroyed the device node), errors named bbmap's temporary
file instead of the output, ``-o`` over an input destroyed the input, a non-UTF-8 input
name made ``-o`` an internal error, and a negative ``--top`` printed a wrong table.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from helpers import PIE_BINARY, PIE_PROFILE, cli, have_corpus, one_error_line

from bbmap.atomic import write_atomic
from bbmap.errors import BBMapError


# --------------------------------------------------------------------------- atomic writer
def test_write_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bbmap-")] == []


def test_write_to_a_device_writes_through_it(tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    write_atomic(link, "data")  # must not replace the link (or the device) by a file
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_full_device_is_a_one_line_error_naming_the_output(tmp_path):
    link = tmp_path / "full"
    link.symlink_to("/dev/full")
    with pytest.raises(BBMapError) as e:
        write_atomic(link, "x" * 100000)
    assert str(link) in str(e.value) and ".bbmap-" not in str(e.value)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_missing_directory_error_names_the_output_not_the_temp_file(tmp_path):
    out = tmp_path / "no" / "such" / "out.json"
    with pytest.raises(BBMapError) as e:
        write_atomic(out, "x")
    msg = str(e.value)
    assert str(out) in msg and ".bbmap-" not in msg and "tmp" not in os.path.basename(msg)


def test_existing_file_mode_is_kept(tmp_path):
    out = tmp_path / "private.json"
    out.write_text("old")
    out.chmod(0o600)
    write_atomic(out, "new")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text() == "new"


def test_new_output_gets_the_umask_mode_and_no_temporary_is_left(tmp_path):
    out = tmp_path / "new.json"
    umask = os.umask(0o022)
    try:
        write_atomic(out, "data")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644 and out.read_text() == "data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]


def test_temporary_name_clash_takes_another_name_and_keeps_the_other_file(tmp_path,
                                                                            monkeypatch):
    """The temporary file is created with O_EXCL (like tempfile.mkstemp): a file or a
    planted symlink under the drawn name is never opened or followed; the next name is."""
    import bbmap.atomic

    draws = iter([b"\x00" * 6, b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(bbmap.atomic.os, "urandom", lambda n: next(draws))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / ".bbmap-000000000000.tmp").symlink_to(victim)
    fd, name = bbmap.atomic._mkstemp(str(tmp_path))
    os.close(fd)
    assert os.path.basename(name) == ".bbmap-010101010101.tmp"
    assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
    assert victim.read_text() == "keep"


def test_undecodable_file_names_can_be_written(tmp_path):
    name = os.fsdecode(b"bad\xffname")
    out = tmp_path / "out.txt"
    write_atomic(out, f"profile {name}\n")
    assert out.read_bytes() == b"profile bad\xffname\n"


# --------------------------------------------------------------------------- commands
# ------------------------------------------------------ outputs checked before any work
# Every command that writes, with an input that does not exist: an output problem must be
# found first (exit 2, naming the output), so nothing was loaded or run before it.
MISSING_IN = "/nonexistent/perf.data"
WRITERS = [
    ("annotate", MISSING_IN, PIE_BINARY, "--format", "json", "-o", "{out}"),
    ("annotate", MISSING_IN, PIE_BINARY, "--format", "aggregate", "-o", "{out}"),
    ("perf-info", MISSING_IN, "--json", "-o", "{out}"),
    ("verify", "/nonexistent/app", "-o", "{out}"),
    ("verify", PIE_BINARY, "--profile", MISSING_IN, "-o", "{out}"),
    ("dump", "/nonexistent/app", "-o", "{out}"),
    ("cfg", MISSING_IN, PIE_BINARY, "-o", "{out}"),
    ("cfg", MISSING_IN, PIE_BINARY, "--format", "dot", "-o", "{out}"),
    ("layout", MISSING_IN, PIE_BINARY, "-o", "{out}"),
    ("layout", MISSING_IN, PIE_BINARY, "--cc-profile", "{out}"),
    ("layout", MISSING_IN, PIE_BINARY, "--ld-profile", "{out}"),
    ("merge", "/nonexistent/a.parquet", "-o", "{out}"),
    ("fleet", MISSING_IN, PIE_BINARY, "--local-workers", "1", "-o", "{out}"),
    ("fleet", MISSING_IN, PIE_BINARY, "--json", "{out}", "-o", "{tmp}/ok.parquet"),
]


@have_corpus
@pytest.mark.parametrize("cmd", WRITERS, ids=lambda c: " ".join(
    [c[0], *(a for a in c[1:] if a.startswith("-"))]))
@pytest.mark.parametrize("where", ["missing-dir", "a-directory", "read-only-dir"])
def test_an_unwritable_output_is_exit_2_before_any_work(tmp_path, cmd, where):
    """Was: exit 3 after all the work (fleet: the whole Dask job) and a missing input
    reported first; now one line naming the output, before anything is read."""
    if where == "read-only-dir" and os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    out = {"missing-dir": tmp_path / "missing" / "out.txt",
           "a-directory": tmp_path,
           "read-only-dir": tmp_path / "ro" / "out.txt"}[where]
    if where == "read-only-dir":
        out.parent.mkdir()
        out.parent.chmod(0o500)
    code, text = cli(*[a.format(out=out, tmp=tmp_path) for a in cmd])
    line = one_error_line(text)
    assert code == 2 and str(out) in line and "/nonexistent" not in line, text
    assert "cannot write output" in line, line


@have_corpus
@pytest.mark.parametrize("cmd", [
    ("cfg", MISSING_IN, PIE_BINARY),
    ("cfg", MISSING_IN, PIE_BINARY, "--format", "dot"),
    ("merge", "/nonexistent/a.parquet"),
    ("fleet", MISSING_IN, PIE_BINARY, "--local-workers", "1"),
    ("annotate", MISSING_IN, PIE_BINARY, "--format", "aggregate"),
], ids=" ".join)
def test_a_missing_required_output_is_exit_2_before_any_work(cmd):
    """Was: cfg "internal error: AttributeError ... 'lower'", cfg --format dot and merge
    "TypeError: expected str ... not NoneType" (exit 3), fleet the same after the whole
    Dask job."""
    code, text = cli(*cmd)
    line = one_error_line(text)
    assert code == 2 and "-o FILE" in line and "/nonexistent" not in line, text


@have_corpus
def test_two_outputs_naming_one_file_are_refused(tmp_path):
    out = tmp_path / "x.txt"
    code, text = cli("layout", PIE_PROFILE, PIE_BINARY, "--cc-profile", str(out),
                     "--ld-profile", str(tmp_path / "." / "x.txt"))
    assert code == 2 and "--cc-profile and --ld-profile" in one_error_line(text), text
    code, text = cli("fleet", PIE_PROFILE, PIE_BINARY, "--json", str(out), "-o", str(out))
    assert code == 2 and "--json" in one_error_line(text), text
    assert not out.exists()


# ------------------------------------------------- a failing run never replaces an output
GOOD = "the last good report\n"


def _damaged_elf(tmp_path) -> str:
    """layout.pie cut short: its section header table lies past the end (exit 3)."""
    bad = tmp_path / "damaged.elf"
    with open(PIE_BINARY, "rb") as fh:
        bad.write_bytes(fh.read(3000))
    return str(bad)


def _damaged_map(tmp_path) -> str:
    """layout.pie with 8 bytes of 0xff in the middle of its block map: dump decodes what
    precedes and exits 1."""
    import struct
    with open(PIE_BINARY, "rb") as fh:
        data = bytearray(fh.read())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    for i in range(shnum):
        h = shoff + i * 64
        if struct.unpack_from("<I", data, h + 4)[0] == 0x6FFF4C0A:  # SHT_LLVM_BB_ADDR_MAP
            off, size = struct.unpack_from("<QQ", data, h + 24)
            data[off + size // 2:off + size // 2 + 8] = b"\xff" * 8
    bad = tmp_path / "map-damaged.elf"
    bad.write_bytes(bytes(data))
    return str(bad)


def _truncated_profile(tmp_path) -> str:
    bad = tmp_path / "cut.data"
    with open(PIE_PROFILE, "rb") as fh:
        bad.write_bytes(fh.read(500))
    return str(bad)


FAILING = {  # a run that exits 1 or 3, and its exit code
    "verify-exit-3": (lambda t: ["verify", _damaged_elf(t)], 3),
    "verify-json-exit-3": (lambda t: ["verify", "--json", _damaged_elf(t)], 3),
    "dump-exit-1": (lambda t: ["dump", _damaged_map(t)], 1),
    "dump-json-exit-1": (lambda t: ["dump", "--json", _damaged_map(t)], 1),
    "perf-info-exit-1": (lambda t: ["perf-info", _truncated_profile(t)], 1),
    "perf-info-json-exit-1": (lambda t: ["perf-info", "--json", _truncated_profile(t)], 1),
    "annotate-exit-1": (lambda t: ["annotate", _truncated_profile(t), PIE_BINARY], 1),
}


@have_corpus
@pytest.mark.parametrize("case", sorted(FAILING))
def test_a_failing_run_leaves_an_existing_output_as_it_was(tmp_path, case):
    """Was: verify -o report.txt damaged.elf (exit 3) truncated report.txt to 0 bytes
    (--json: replaced it by an error document); dump -o and perf-info -o on exit 1
    replaced a good file by a partial one.  Now the file keeps every byte; what the run
    wrote, if anything, is beside it in FILE.partial, and stderr says so."""
    args, want = FAILING[case]
    out = tmp_path / "report.txt"
    out.write_text(GOOD)
    before = os.stat(out)
    code, text = cli(*args(tmp_path), "-o", str(out))
    assert code == want, text
    assert out.read_text() == GOOD and os.stat(out).st_ino == before.st_ino
    assert f"{out} not replaced" in text, text
    partial = tmp_path / "report.txt.partial"
    if partial.exists():
        assert partial.stat().st_size > 0 and f"in {partial}" in text
    assert [p for p in os.listdir(tmp_path) if p.startswith(".bbmap-")] == []
    fresh = tmp_path / "fresh.txt"  # a new target: the run's output, marked by the exit
    code, text = cli(*args(tmp_path), "-o", str(fresh))
    assert code == want and not (tmp_path / "fresh.txt.partial").exists()
    assert fresh.exists() == partial.exists()  # (an empty output is never written)


@have_corpus
def test_a_successful_run_replaces_the_output(tmp_path):
    out = tmp_path / "report.txt"
    out.write_text(GOOD)
    code, text = cli("verify", PIE_BINARY, "-o", str(out))
    assert code == 0 and "OK (" in out.read_text() and "not replaced" not in text
    assert sorted(os.listdir(tmp_path)) == ["report.txt"]


@have_corpus
@pytest.mark.parametrize("cmd,victim", [
    (("annotate", "{p}", PIE_BINARY), "p"),
    (("annotate", PIE_PROFILE, "{b}"), "b"),
    (("perf-info", "{p}"), "p"),
    (("verify", "{b}"), "b"),
    (("cfg", "{p}", PIE_BINARY), "p"),
])
def test_output_over_an_input_is_refused(tmp_path, cmd, victim):
    import shutil
    p, b = tmp_path / "perf.data", tmp_path / "layout.pie"
    shutil.copy(PIE_PROFILE, p)
    shutil.copy(PIE_BINARY, b)
    before = {p: p.read_bytes(), b: b.read_bytes()}
    args = [a.format(p=p, b=b) for a in cmd]
    code, text = cli(*args, "-o", str(p if victim == "p" else b))
    assert code == 2, text
    assert "input" in text
    assert p.read_bytes() == before[p] and b.read_bytes() == before[b]


@have_corpus
def test_non_utf8_input_name_with_output_file(tmp_path):
    import shutil
    odd = os.path.join(os.fsencode(tmp_path), b"perf\xff.data")
    shutil.copy(PIE_PROFILE, odd)
    out = tmp_path / "out.json"
    code, text = cli("annotate", os.fsdecode(odd), PIE_BINARY, "--format", "json", "-o", str(out))
    assert code == 0, text
    assert b"perf\xff.data" in out.read_bytes()


@have_corpus
@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_negative_top_is_a_usage_error(fmt):
    code, text = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", fmt, "--top", "-5")
    assert code == 2, text


@have_corpus
def test_huge_top_lists_everything():
    code, text = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json", "--top", str(10**30))
    assert code == 0, text
    code0, text0 = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json", "--top", "0")
    assert json.loads(text)["functions"] == json.loads(text0)["functions"]


@have_corpus
def test_reader_closing_the_pipe_is_not_an_error():
    """``bbmap lookup PIE_BINARY ... | head -1``: the reader leaving is not 'could not read the
    input' (exit 3, 'Broken pipe' on stderr); exit quietly as a SIGPIPE'd tool does."""
    import subprocess
    import sys
    addrs = [str(a) for a in range(4096, 12000)]
    p = subprocess.Popen([sys.executable, "-c", "from bbmap.cli import main; main()",
                          "lookup", PIE_BINARY, *addrs, "--explain"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=300)
    assert err == b"", err
    assert p.returncode == 141


@pytest.mark.slow
@have_corpus
def test_dev_stdout_appending_to_a_file_is_not_clobbered(tmp_path):
    """``bbmap perf-info X -o /dev/stdout >> log``: the log keeps its old lines."""
    import subprocess
    import sys
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    with open(log, "a") as fh:
        r = subprocess.run([sys.executable, "-c", "from bbmap.cli import main; main()",
                            "perf-info", PIE_PROFILE, "-o", "/dev/stdout"], stdout=fh,
                           stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr
    text = log.read_text()
    assert text.startswith("earlier line\n") and "SAMPLE" in text


@pytest.mark.slow
@have_corpus
def test_dev_stdout_shares_the_shells_offset(tmp_path):
    """``{ bbmap verify PIE_BINARY -o /dev/stdout; echo done; } > log``: the shell's later
    writes must come after bbmap's report, not over it (a reopened /dev/stdout has its
    own offset)."""
    import subprocess
    import sys
    log = tmp_path / "log"
    cmd = (f"{sys.executable} -c 'from bbmap.cli import main; main()' verify {PIE_BINARY} "
           "-o /dev/stdout; echo done")
    with open(log, "w") as fh:
        subprocess.run(["sh", "-c", cmd], stdout=fh, timeout=300, check=True)
    text = log.read_text()
    assert "OK (" in text and text.endswith("done\n"), text
