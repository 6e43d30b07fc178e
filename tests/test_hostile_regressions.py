"""Issue 18's reproducers, each a bit-level mutant of a corpus file made here.

Every fault a hostile user found must end as one line in bbmap's words that names the
file, section or record and byte offset, with the exit code the README's table gives --
never ``internal error``, never a library's parse path.  (Each test failed on the code
before issue 18: the comment says how.)
"""

from __future__ import annotations

import os
import struct

import pytest
from helpers import PIE_BINARY, PIE_PROFILE, cli, have_corpus, one_error_line
from mutate import (
    compressed_map_bomb,
    perf_records,
    read_bytes,
    section_field,
    set_ehdr,
    set_section,
    write_mutant,
)

from bbmap.errors import is_decoding_error, library_words

OBJ = PIE_BINARY.replace("layout.pie", "layout.o")
LIBRARY_WORDS = ("internal error", "Error in path", "ssize_t", "C long", "Python int",
                 "ELFParseError", "construct")


def clean(out: str) -> None:
    for w in LIBRARY_WORDS:
        assert w not in out, out


# ------------------------------------------------------------------ the six internal errors
@have_corpus
def test_mmap_length_with_top_byte_set_is_a_skipped_record(tmp_path):
    """Was: OverflowError in mappings.py (start + length past 2**64)."""
    d = read_bytes(PIE_PROFILE)
    for off, typ, _ in perf_records(d):
        if typ == 1:  # the kernel's MMAP: start 0xffffffff81000000 + 0xff.. wraps
            d[off + 8 + 8 + 8 + 7] = 0xFF
    m = write_mutant(tmp_path / "perf.data", d)
    code, out = cli("annotate", m, PIE_BINARY)
    clean(out)
    assert code == 0, out
    code, out = cli("perf-info", m)
    clean(out)
    assert "cannot decode MMAP record" in out and "runs past the end of the address space" \
        in out and "offset 0x" in out, out


@have_corpus
@pytest.mark.parametrize("cmd", ["dump", "verify", "annotate", "lookup"])
def test_wild_e_phoff_names_the_elf_header_field(tmp_path, cmd):
    """Was: OverflowError inside pyelftools (seeking to 0x8000000000000000)."""
    m = write_mutant(tmp_path / "bin", set_ehdr(read_bytes(PIE_BINARY), "e_phoff",
                                                 0x8000000000000000))
    args = {"dump": [m], "verify": [m], "annotate": [PIE_PROFILE, m],
            "lookup": [m, "0x1210"]}[cmd]
    code, out = cli(cmd, *args)
    line = one_error_line(out)
    clean(out)
    assert code == 3, out
    assert "ELF header: offset 0x20" in line and "program header table" in line \
        and "lies outside the file" in line, line


@pytest.mark.slow
@have_corpus
def test_damaged_gnu_property_note_is_not_an_internal_error(tmp_path):
    """Was: ArrayError from pyelftools' note parser in Binary.build_id."""
    d = read_bytes(PIE_BINARY)
    off = section_field(d, ".note.gnu.property", "sh_offset")
    for k in range(0, 0x20, 3):
        for v in (0x00, 0xFF, 0x7F):
            m = bytearray(d)
            m[off + k] = v
            p = write_mutant(tmp_path / "bin", m)
            for args in (["dump", p], ["lookup", p, "0x1210"]):
                code, out = cli(*args)
                clean(out)
                assert code in (0, 1), (k, v, args, out)


@have_corpus
def test_relocation_section_with_wrong_entsize_is_read_by_its_layout(tmp_path):
    """Was: ELFError 'Expected sh_entsize of SHT_RELA section to be 24' (verify)."""
    m = write_mutant(tmp_path / "x.o", set_section(read_bytes(OBJ), ".rela.text",
                                                     "sh_entsize", 7))
    code, out = cli("verify", m)
    clean(out)
    assert code == 0, out


@have_corpus
def test_relocation_section_past_the_file_is_named(tmp_path):
    """Was: ELFParseError 'expected 8, found 0' (verify)."""
    m = write_mutant(tmp_path / "x.o", set_section(read_bytes(OBJ), ".rela.rodata",
                                                     "sh_size", 0x7FFFFFFF))
    code, out = cli("verify", m)
    clean(out)
    assert "section [11] .rela.rodata: offset 0x0: section extends past the end of the file" \
        in out, out


@have_corpus
def test_exec_section_with_top_bit_in_its_size_is_left_out_with_a_note(tmp_path):
    """Was: OverflowError in verify/coverage.py (sh_addr + sh_size as int64)."""
    m = write_mutant(tmp_path / "bin", set_section(read_bytes(PIE_BINARY), ".fini", "sh_size",
                                                    0x8000000000000009))
    code, out = cli("verify", m)
    clean(out)
    assert code == 0 and ".fini: size 0x8000000000000009" in out and "not checked" in out, out


@have_corpus
def test_attr_read_fault_is_said_in_bbmaps_words(tmp_path):
    """Was: 'cannot decode perf_event_attr: Error in path (parsing) -> _peek'."""
    d = read_bytes(PIE_PROFILE)
    struct.pack_into("<Q", d, 0x18, 0xFFFF)  # attrs.offset: into the middle of the data
    m = write_mutant(tmp_path / "perf.data", d)
    for args in (["perf-info", m], ["annotate", m, PIE_BINARY]):
        code, out = cli(*args)
        line = one_error_line(out)
        clean(out)
        assert code == 3 and "attr 0: offset 0xffff" in line, line


def test_library_errors_in_bbmaps_words():
    import construct
    from elftools.common.exceptions import ELFParseError

    try:
        construct.Int64ul.parse(b"\0\0")
    except construct.ConstructError as e:
        words = library_words(e)
        assert is_decoding_error(e) and "needs 8 bytes, only 2" in words, words
    assert "too large" in library_words(OverflowError("Python int too large to convert to "
                                                      "C ssize_t"))
    assert "past the end" in library_words(ELFParseError("expected 8, found 0")) or \
        "needs 8 bytes" in library_words(ELFParseError("expected 8, found 0"))
    assert not is_decoding_error(RuntimeError("a bug"))


def test_guard_maps_an_unguarded_decoder_fault_to_one_line(tmp_path):
    """Any OverflowError/construct/pyelftools error escaping a decoder: one line naming
    the input, exit 3 -- not 'internal error'."""
    import click
    from click.testing import CliRunner

    from bbmap.cli import guarded

    f = tmp_path / "input.bin"
    f.write_bytes(b"x")

    @click.command()
    @click.argument("path")
    @guarded
    def cmd(path):
        raise OverflowError("Python int too large to convert to C ssize_t")

    r = CliRunner().invoke(cmd, [str(f)])
    assert r.exit_code == 3, r.output
    assert r.output.startswith(f"bbmap: error: {f}: cannot decode:") and \
        "internal" not in r.output and "ssize_t" not in r.output, r.output


# ------------------------------------------------------------------ bounded memory
@have_corpus
@pytest.mark.parametrize("algo", ["zlib", "zstd"])
def test_decompression_bomb_is_refused_before_inflating(tmp_path, algo):
    """Was: a 1.46 MB ELF inflating its map to 1.5 GB drove dump to 20 GB of RSS.  Here a
    64 MB bomb (declared truthfully) is refused by the ratio rule, at once."""
    pytest.importorskip("zstandard")
    m = compressed_map_bomb(PIE_BINARY, tmp_path / "bomb", 64 << 20, algo=algo)
    code, out = cli("dump", m)
    line = one_error_line(out)
    assert code in (1, 3), out
    assert "section [29] .llvm_bb_addr_map: offset 0x0: compressed section declares" in line \
        and "--max-section-size" in line, line


@have_corpus
def test_declared_size_over_the_limit_and_the_flag_that_raises_it(tmp_path, monkeypatch):
    monkeypatch.setenv("BBMAP_MAX_SECTION_SIZE", "1G")  # restored after the test
    monkeypatch.delenv("BBMAP_MAX_SECTION_SIZE")
    m = compressed_map_bomb(PIE_BINARY, tmp_path / "b", 20 << 20)  # 20 MiB of zeros
    code, out = cli("dump", "--max-section-size", "1M", m)
    assert "over the limit of 1.0 MiB (--max-section-size)" in one_error_line(out), out
    code, out = cli("dump", "--max-section-size", "64M", m)
    assert "compressed section declares" not in out  # inflated, then decoded (zeros: bad)
    code, out = cli("dump", "--max-section-size", "lots", m)
    assert code == 2 and "is not a size" in out, out


@have_corpus
def test_section_inflating_past_its_declared_size_stops_there(tmp_path):
    m = compressed_map_bomb(PIE_BINARY, tmp_path / "b", 8 << 20, declared=4096)
    code, out = cli("dump", m)
    assert "inflates past its declared size ch_size 4096" in one_error_line(out), out


# ------------------------------------------------------------------ exit codes
@have_corpus
def test_perf_info_on_a_truncated_profile_exits_1(tmp_path):
    """Was: exit 0 with trust_end set (``head -c 7100`` of a corpus profile)."""
    p = tmp_path / "perf.data"
    p.write_bytes(read_bytes(PIE_PROFILE)[:7100])
    code, out = cli("perf-info", str(p))
    assert code == 1, out
    assert "damaged or truncated at offset 0x1bb8" in out, out


@have_corpus
def test_perf_info_on_a_wild_attr_size_exits_1(tmp_path):
    """Was: attr_size 0xffffffff: exit 0, no events, every sample dropped."""
    d = read_bytes(PIE_PROFILE)
    struct.pack_into("<Q", d, 0x10, 0xFFFFFFFF)
    m = write_mutant(tmp_path / "perf.data", d)
    code, out = cli("perf-info", m)
    assert code == 1 and "file header: offset 0x10: attr_size 0xffffffff" in out, out
    code, out = cli("annotate", m, PIE_BINARY)
    assert code == 1 and "attr_size 0xffffffff" in out, out


@have_corpus
def test_truncation_is_said_before_what_follows_from_it(tmp_path):
    """Was: 'the profile has no samples' (or advice to pass --name) came first."""
    p = tmp_path / "perf.data"
    p.write_bytes(read_bytes(PIE_PROFILE)[:1000])
    code, out = cli("annotate", str(p), PIE_BINARY)
    first = [ln for ln in out.splitlines() if ln.startswith("bbmap: error")][0]
    assert code == 1 and "damaged or truncated" in first, out


@have_corpus
def test_lookup_reads_addresses_as_perf_script_prints_them():
    """Was: 1210 read as decimal 1210 (0x4ba), exit 0."""
    c1, hex_bare = cli("lookup", PIE_BINARY, "1210")
    c2, hex_0x = cli("lookup", PIE_BINARY, "0x1210")
    assert c1 == c2 == 0
    assert hex_bare.split("vaddr=")[1] == hex_0x.split("vaddr=")[1], (hex_bare, hex_0x)
    assert "lay_insertion" in hex_bare


@have_corpus
def test_lookup_refusing_an_object_file_exits_2():
    """Was: exit 3, which the README keeps for unreadable input."""
    code, out = cli("lookup", OBJ, "0x10")
    assert code == 2 and "relocatable" in one_error_line(out), out


# ------------------------------------------------------------------ outputs a pipeline keeps
@have_corpus
@pytest.mark.parametrize("cmd", ["annotate-symorder", "annotate-propeller", "cfg", "layout",
                                 "annotate-aggregate", "fleet"])
@pytest.mark.slow
def test_a_run_that_maps_nothing_keeps_the_previous_output(tmp_path, cmd):
    """Was: exit 1, but the previous -o file replaced by an empty or header-only one; an
    aggregate (annotate --format aggregate, fleet) of nothing: exit 0, replaced, silent."""
    if cmd in ("annotate-aggregate", "fleet"):
        pytest.importorskip("pyarrow")
    if cmd == "fleet":
        pytest.importorskip("distributed")
    other = PIE_BINARY.replace("addrmap", "list")  # another build: nothing maps
    out = tmp_path / "previous.out"
    out.write_text("the last good profile\n")
    args = {"annotate-symorder": ["annotate", PIE_PROFILE, other, "--format", "symorder",
                                  "-o", str(out)],
            "annotate-propeller": ["annotate", PIE_PROFILE, other, "--format", "propeller",
                                   "-o", str(out)],
            "cfg": ["cfg", PIE_PROFILE, other, "-o", str(out)],
            "layout": ["layout", PIE_PROFILE, other, "--cc-profile", str(out)],
            "annotate-aggregate": ["annotate", PIE_PROFILE, other, "--format", "aggregate",
                                   "-o", str(out)],
            "fleet": ["fleet", PIE_PROFILE, other, "--local-workers", "1", "--no-progress",
                      "-o", str(out)]}[cmd]
    code, text = cli(*args)
    assert code == 1, text
    assert out.read_text() == "the last good profile\n"
    assert f"{out} not replaced (the run failed with exit 1" in text, text
    partial = os.path.exists(f"{out}.partial")  # what the run wrote, unless nothing
    assert partial == (f"in {out}.partial" in text), text
    assert "build-id mismatch" in text.split("not replaced")[0] or cmd in (
        "annotate-symorder", "annotate-propeller", "cfg", "layout"), text  # why, first
    fresh = tmp_path / "fresh.out"  # no previous file: written, as before (if not empty)
    code, text = cli(*[str(fresh) if a == str(out) else a for a in args])
    assert code == 1 and fresh.exists() == partial


_SIGTERM_WRITER = """
import os, signal, sys, time
import click
from bbmap.atomic import atomic_open
from bbmap.cli import guarded

@click.command()
@click.argument("out")
@guarded
def write(out):
    with atomic_open(out) as fh:
        fh.write("partial")
        fh.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)

write()
"""


def test_sigterm_while_writing_removes_the_temporary_file(tmp_path):
    """Was: SIGTERM (timeout, schedulers) left .bbmap-*.tmp beside the output."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _SIGTERM_WRITER, str(tmp_path / "out.txt")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 143, (r.returncode, r.stderr)
    assert "bbmap: terminated" in r.stderr
    assert sorted(os.listdir(tmp_path)) == [], os.listdir(tmp_path)


_SIGNAL_AT_CREATION = """
import os, signal, sys
import click
import bbmap.atomic
from bbmap.atomic import write_atomic
from bbmap.cli import guarded

# as an interactive run has them: a shell's background job inherits SIGINT ignored, and
# bbmap leaves an ignored SIGINT alone (what this test is not about)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

real_mkstemp = bbmap.atomic._mkstemp

def mkstemp_then_signal(*a, **k):  # the signal lands as the file exists, before its name
    fd, name = real_mkstemp(*a, **k)  # reaches the caller (what `timeout` hit at load 6)
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    for _ in range(1000):  # bytecodes: Python runs the handler here
        pass
    return fd, name

bbmap.atomic._mkstemp = mkstemp_then_signal

@click.command()
@click.argument("out")
@click.argument("sig")
@guarded
def write(out, sig):
    write_atomic(out, "whole")

write()
"""


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_as_the_temporary_file_is_created_leaves_nothing(tmp_path, sig, code):
    """Was: SIGTERM/SIGINT between mkstemp's open and its return (now bbmap.atomic's own
    ``_mkstemp``) raised there, before the cleanup knew the name: `.bbmap-*.tmp` left
    (2 of 10 runs of annotate SIGTERMed the moment the file appeared)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _SIGNAL_AT_CREATION, str(tmp_path / "out.txt"),
                        sig], capture_output=True, text=True, timeout=60)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert sorted(os.listdir(tmp_path)) == [], os.listdir(tmp_path)
