"""The Go side of a binary (seed 002): build id, build info and function table.

Oracles: the goldens ``go tool buildid``, ``readelf -n`` and ``go version -m`` wrote for
each committed Go binary (corpus/build, stage go); the ``.symtab`` of the unstripped build
for the function table of the stripped one (the same ``.text``); and, when the machine has
them, Go binaries of newer toolchains (1.22-1.25: another function-table magic, PIE,
external linking, a Bazel-style ``redacted`` build id) against the installed ``go``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import CORPUS, all_corpus_binaries, go_case, go_cases, load_manifest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.pclntab_ref import pclntab_functions_ref

from bbmap.binary import load_binary
from bbmap.binary.go import (
    PclntabError,
    compare_go_build_ids,
    exact_match_flag,
    no_block_map_reason,
    parse_modinfo,
    pclntab_functions,
    read_go,
    split_go_build_id,
)
from bbmap.formats.go import (
    GO118_MAGIC,
    GO120_MAGIC,
    MODINFO_END,
    MODINFO_START,
    func_prefix_struct,
    functab_struct,
    pclntab_header_size,
    pclntab_header_struct,
)

GO_BINARIES = go_cases("go_binaries")
GO = shutil.which("go")


def _golden(entry: dict, key: str) -> str:
    return (CORPUS / entry["goldens"][key]).read_text()


def _readelf_ids(text: str) -> tuple[str | None, str | None]:
    """(GNU build-id, Go build id) as ``readelf -n`` printed them."""
    gnu = re.search(r"Build ID: ([0-9a-f]+)", text)
    go = re.search(r"Go\s+0x[0-9a-f]+\s+GO BUILDID\s+description data: ([0-9a-f ]+)", text)
    return (gnu.group(1) if gnu else None,
            bytes.fromhex(go.group(1)).decode() if go else None)


def _version_m(text: str) -> dict:
    """``go version -m``: version, path, mod, deps and build settings."""
    lines = text.splitlines()
    out: dict = {"version": lines[0].split(": ", 1)[1], "path": None, "mod": None,
                 "deps": [], "build": []}
    for line in lines[1:]:
        cols = line.split("\t")[1:]
        if cols[0] == "path":
            out["path"] = cols[1]
        elif cols[0] == "mod":
            out["mod"] = tuple((cols[1:] + ["", "", ""])[:3])
        elif cols[0] == "dep":
            out["deps"].append(tuple((cols[1:] + ["", "", ""])[:3]))
        elif cols[0] == "build":
            k, _, v = cols[1].partition("=")
            out["build"].append((k, v))
    return out


@pytest.mark.parametrize("entry", GO_BINARIES, ids=[e["name"] for e in GO_BINARIES])
def test_both_build_ids_equal_the_tools(entry):
    b = load_binary(CORPUS / entry["path"])
    go_tool = _golden(entry, "go_buildid").strip()
    gnu, go_note = _readelf_ids(_golden(entry, "readelf_n"))
    assert b.go is not None
    assert b.go.build_id == go_tool == go_note == entry["go_build_id"]
    assert b.build_id == gnu == entry["build_id"]
    assert (gnu is not None) == (entry["kind"] == "gnu-build-id")
    assert not len(b.diagnostics), list(b.diagnostics)


@pytest.mark.parametrize("entry", GO_BINARIES, ids=[e["name"] for e in GO_BINARIES])
def test_build_info_equals_go_version_m(entry):
    b = load_binary(CORPUS / entry["path"])
    want = _version_m(_golden(entry, "go_version_m"))
    bi = b.go.build_info
    assert bi.version == want["version"] == entry["compiler"]
    assert bi.path == want["path"] and bi.main == want["mod"]
    assert bi.deps == want["deps"]
    assert bi.settings == want["build"]
    assert b.go.compiler == "gc"


def test_go_build_id_parts_say_what_changed():
    ids = {e["name"]: e["go_build_id"] for e in GO_BINARIES}
    if len(ids) < 4:
        pytest.skip("Go corpus absent")
    parts = {n: split_go_build_id(i) for n, i in ids.items()}
    # the same main package compile, linked three ways; v2 compiled a changed source
    assert parts["go-plain"]["content_main"] == parts["go-bid"]["content_main"] \
        == parts["go-stripped"]["content_main"] != parts["go-bid-v2"]["content_main"]
    assert "compiled differently" in compare_go_build_ids(ids["go-bid"], ids["go-bid-v2"])
    assert "the link differs" in compare_go_build_ids(ids["go-plain"], ids["go-bid"])
    assert compare_go_build_ids(ids["go-bid"], ids["go-bid"]).startswith("the same")
    assert split_go_build_id("redacted") is None


def test_stripped_function_table_equals_the_unstripped_symbols():
    """-s drops .symtab; .gopclntab still names every function at the same addresses
    (go-plain and go-stripped have byte-identical .text)."""
    plain = load_binary(CORPUS / go_case("go-plain")["path"])
    stripped = load_binary(CORPUS / go_case("go-stripped")["path"])
    assert not any(s.name == ".symtab" for s in stripped.sections)
    fs = stripped.symbols
    assert stripped.symbols_source == ".gopclntab" and plain.symbols_source == "symbol table"
    sym = plain.symbols
    by_addr = {}
    for a, n, z in zip(sym.address.tolist(), sym.names, sym.size.tolist()):
        by_addr.setdefault(a, []).append((n, z))
    assert len(fs) > 1000
    ends = np.append(fs.address[1:], fs.address[-1] + fs.size[-1])
    for a, n, z, end in zip(fs.address.tolist(), fs.names, fs.size.tolist(), ends.tolist()):
        cands = by_addr[a]
        # the symbol table adds the ABI suffix of assembly functions; the runtime's table
        # abbreviates array types in generated names ("[5]T" -> "[...]T")
        norm = [re.sub(r"\[\d+\]", "[...]", c.removesuffix(".abi0")) for c, _ in cands]
        assert n in norm, (hex(a), n, cands)
        size = cands[norm.index(n)][1]
        assert size <= z and a + z == end  # .gopclntab's extent includes the padding
    for name in ("main.mix", "main.collatz", "main.sieve", "main.matmul", "main.main"):
        assert name in fs.names


@pytest.mark.parametrize("entry", GO_BINARIES, ids=[e["name"] for e in GO_BINARIES])
def test_function_table_fast_path_equals_reference(entry):
    b = load_binary(CORPUS / entry["path"])
    sec = next(s for s in b.sections if s.name == ".gopclntab")
    text = next(s for s in b.sections if s.name == ".text")
    data = b.section_data(sec.index)
    fast = pclntab_functions(data, True, text.sh_addr)
    ref = pclntab_functions_ref(data, True, text.sh_addr)
    assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1])
    assert fast[2] == ref[2]


def _table(entries: list[tuple[int, str]], end: int, little: bool, ptr: int,
           magic: int) -> bytes:
    """A function table built with the declarations (entry offset, name) -> bytes."""
    names = b""
    name_off = []
    for _, n in entries:
        name_off.append(len(names))
        names += n.encode() + b"\0"
    hsize = pclntab_header_size(ptr)
    funcname_offset = hsize
    functab_offset = funcname_offset + len(names)
    functab_offset += -functab_offset % 4
    n = len(entries)
    recs_at = (2 * n + 1) * 4
    fp = func_prefix_struct(little)
    recs = b"".join(fp.build({"entry_off": e, "name_off": o})
                    for (e, _), o in zip(entries, name_off))
    ft = functab_struct(little, n).build({
        "entries": [{"entry_off": e, "func_off": recs_at + 8 * i}
                    for i, (e, _) in enumerate(entries)], "end_off": end})
    hdr = pclntab_header_struct(little, ptr).build({
        "magic": magic, "quantum": 1, "ptr_size": ptr, "nfunc": n, "nfiles": 0,
        "text_start": 0x401000, "funcname_offset": funcname_offset, "cu_offset": 0,
        "filetab_offset": 0, "pctab_offset": 0, "functab_offset": functab_offset})
    body = hdr + names
    body += b"\0" * (functab_offset - len(body))
    return body + ft + recs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)),
    max_size=40), st.booleans(), st.sampled_from([4, 8]),
    st.sampled_from([GO118_MAGIC, GO120_MAGIC]))
@pytest.mark.slow
def test_function_table_fast_path_equals_reference_on_tables_built_from_the_declarations(
        funcs, little, ptr, magic):
    entries, off = [], 0
    for gap, name in funcs:
        entries.append((off, name))
        off += gap
    data = _table(entries, off, little, ptr, magic)
    fast = pclntab_functions(data, little)
    ref = pclntab_functions_ref(data, little)
    assert fast[2] == ref[2] == [n for _, n in entries]
    assert fast[0].tolist() == ref[0].tolist() == [0x401000 + e for e, _ in entries]
    assert fast[1].tolist() == ref[1].tolist() == [g for g, _ in funcs]


def test_damaged_function_tables_are_errors_with_offsets():
    data = _table([(0, "a"), (16, "b")], 32, True, 8, GO118_MAGIC)
    with pytest.raises(PclntabError, match="past the table end") as e:
        pclntab_functions(data[:-10], True)
    assert e.value.offset > 0
    bad = bytearray(data)
    bad[6] = 3  # quantum
    with pytest.raises(PclntabError, match="quantum"):
        pclntab_functions(bytes(bad), True)


def test_modinfo_with_deps_and_replacements():
    text = ("path\texample.com/cmd/x\nmod\texample.com\tv1.2.3\th1:abc=\n"
            "dep\tgolang.org/x/sys\tv0.1.0\th1:def=\n=>\t../sys\t(devel)\t\n"
            "build\t-ldflags=\"-X main.v=1\"\nbuild\tGOOS=linux\n")
    bi = parse_modinfo("go1.21.0", MODINFO_START + text.encode() + MODINFO_END)
    assert bi.path == "example.com/cmd/x" and bi.main == ("example.com", "v1.2.3", "h1:abc=")
    assert bi.deps == [("golang.org/x/sys => ../sys", "(devel)", "")]
    assert bi.setting("-ldflags") == "-X main.v=1" and bi.setting("GOOS") == "linux"


def test_explanations_name_the_compiler_and_the_flag():
    b = load_binary(CORPUS / go_case("go-plain")["path"])
    why = no_block_map_reason(b.go)
    assert "Go gc compiler (go1.19.8)" in why and "LLVM" in why and "gollvm" in why
    flag = exact_match_flag(b.go)
    assert "-ldflags=-B 0x<hex>" in flag and "-B gobuildid needs Go 1.20" in flag


def test_not_a_go_binary():
    c = next((CORPUS / e["path"] for e in
              load_manifest()["binaries"] if e["kind"] == "pie"), None)
    if c is None:
        pytest.skip("corpus absent")
    assert load_binary(c).go is None


@pytest.mark.slow
def test_go_precheck_never_hides_a_go_binary():
    """``Binary._may_be_go`` (which spares other binaries the Go reader's import) answers
    False only where ``read_go`` finds nothing, on every corpus binary, Go or not, and on
    the Go programs of the machine; and it does answer False for the C/C++ ones."""
    paths = [p.values[0] for p in all_corpus_binaries()] + [
        CORPUS / e["path"] for e in GO_BINARIES] + [Path(p) for p in MACHINE_GO]
    seen_c = 0
    for path in paths:
        if not Path(path).exists():
            continue
        try:
            b = load_binary(path)
        except Exception:  # noqa: BLE001 - hand-made broken ELF files: not this test's
            continue
        found = read_go(b)
        assert b._may_be_go() or found is None, path
        seen_c += found is None and not b._may_be_go()
    assert seen_c > 10


# ---------------------------------------------------------------- other Go toolchains
MACHINE_GO = [p for p in (
    "/usr/lib/google-cloud-sdk/bin/gcloud-crc32c",  # go1.24, -B: GNU id, stripped
    "/usr/lib/google-cloud-sdk/bin/gke-gcloud-auth-plugin",  # build id "redacted"
    "/usr/lib/google-cloud-sdk/bin/local-extract",  # external link: no Go note
    "/usr/local/bin/docker",  # go1.24 PIE, external link, .symtab, deps
) if Path(p).exists()]


@pytest.mark.skipif(not GO or not MACHINE_GO, reason="needs go and Go binaries of the machine")
@pytest.mark.parametrize("path", MACHINE_GO)
def test_go_binaries_of_newer_toolchains(path):
    b = load_binary(path)
    tool = subprocess.run([GO, "tool", "buildid", path], capture_output=True)
    assert tool.returncode == 0
    if b.go.build_id is None:  # no Go note: the go command falls back to the GNU id's bytes
        assert tool.stdout.rstrip(b"\n") == bytes.fromhex(b.build_id)
    else:
        assert b.go.build_id == tool.stdout.decode().strip()
    want = _version_m(subprocess.run([GO, "version", "-m", path], capture_output=True,
                                     text=True, check=True).stdout)
    bi = b.go.build_info
    assert bi.version == want["version"] and bi.path == want["path"]
    assert bi.main == want["mod"] and len(bi.deps) == len(want["deps"])
    assert [k for k, _ in bi.settings] == [k for k, _ in want["build"]]
    assert b.go.pclntab_magic == GO120_MAGIC and len(b.go.functions) > 1000
    if any(s.name == ".symtab" for s in b.sections):  # docker: the table vs the symbols
        sym = b.symbols
        have = set(zip(sym.address.tolist(), sym.names))
        fn = b.go.functions
        hits = sum((a, n) in have or (a, n + ".abi0") in have
                   for a, n in zip(fn.address.tolist(), fn.names))
        assert hits >= 0.97 * len(fn)


# ---------------------------------------------------------------- Go's own reader
GO119_BINARIES = [p for p in (
    "/usr/lib/go-1.19/pkg/tool/linux_amd64/compile", "/usr/lib/go-1.19/pkg/tool/linux_amd64/link",
    "/usr/bin/gofmt") if Path(p).exists()]


@pytest.fixture(scope="module")
def gosymdump(tmp_path_factory):
    """corpus/tools/gosymdump built with the installed Go: debug/gosym's function list."""
    if not GO:
        pytest.skip("needs go")
    out = tmp_path_factory.mktemp("gosym") / "gosymdump"
    r = subprocess.run([GO, "build", "-o", str(out), "."], cwd=CORPUS / "tools" / "gosymdump",
                       capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "CGO_ENABLED": "0",
                            "GOFLAGS": "-buildvcs=false", "GOPROXY": "off"})
    if r.returncode != 0:
        pytest.skip(f"cannot build gosymdump: {r.stderr[-200:]}")
    return out


@pytest.mark.parametrize("path", [str(CORPUS / e["path"]) for e in GO_BINARIES]
                         + GO119_BINARIES)
def test_function_table_equals_debug_gosym(gosymdump, path):
    """Every function's entry, end and name as Go 1.19's debug/gosym gives them (it reads
    the Go 1.18 layout; the 1.20 one only from Go 1.20 on)."""
    if not Path(path).exists():
        pytest.skip("absent")
    r = subprocess.run([str(gosymdump), path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = [(int(a, 16), int(e, 16), n) for a, e, n in
            (line.split(" ", 2) for line in r.stdout.splitlines())]
    f = load_binary(path).go.functions
    got = list(zip(f.address.tolist(), (f.address + f.size).tolist(), f.names))
    assert len(got) > 1000 and got == want


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([".note.go.buildid", ".go.buildinfo", ".gopclntab"]),
       st.integers(0, 1 << 16), st.binary(min_size=1, max_size=16))
@pytest.mark.slow
def test_damaged_go_sections_give_warnings_not_tracebacks(tmp_path_factory, name, at, junk):
    """Bytes overwritten anywhere in a Go section: Binary.go still answers, and what it
    could not read is a warning naming the file and section."""
    src = CORPUS / go_case("go-stripped")["path"]
    b0 = load_binary(src)
    sec = next(s for s in b0.sections if s.name == name)
    data = bytearray(src.read_bytes())
    pos = sec.sh_offset + at % max(sec.sh_size, 1)
    data[pos:pos + len(junk)] = junk[:max(0, sec.sh_offset + sec.sh_size - pos)]
    path = tmp_path_factory.mktemp("dmg") / "gohot"
    path.write_bytes(bytes(data))
    b = load_binary(path)
    go = b.go  # must not raise
    _ = b.symbols
    for d in b.diagnostics:
        assert d.file == str(path)
    if go is not None and go.functions is not None:
        assert len(go.functions) == len(go.functions.names)
