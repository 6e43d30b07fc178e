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
@have_corpus
@pytest.mark.parametrize("cmd", [
    ("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json"),
    ("perf-info", PIE_PROFILE, "--json"),
    ("verify", PIE_BINARY),
    ("cfg", PIE_PROFILE, PIE_BINARY),
])
def test_output_into_missing_directory_is_exit_3_naming_it(tmp_path, cmd):
    out = tmp_path / "missing" / "out.txt"
    code, text = cli(*cmd, "-o", str(out))
    line = one_error_line(text)
    assert code == 3 and str(out) in line and ".bbmap-" not in line, text


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
