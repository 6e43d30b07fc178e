"""The corpus manifest describes the tree: every case listed exists and is what it says.

Everything iterates corpus/manifest.json, so a new case adds coverage without new test code.
No LLVM or perf is needed: ELF facts come from pyelftools and the first bytes of each map
section, perf facts from the file header and the committed goldens.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
BINARIES: list[dict[str, Any]] = MANIFEST["binaries"]
PROFILES: list[dict[str, Any]] = MANIFEST["profiles"]
BY_NAME = {b["name"]: b for b in BINARIES}
SHT_MAP = {0x6FFF4C08, 0x6FFF4C0A}
KINDS = {"pie", "nopie", "so", "obj", "stripped", "debug"}
PROFILE_KINDS = {"plain", "callgraph", "pipe", "zstd", "so", "two-processes",
                 "injected-buildids", "buildid-mmap", "lbr", "skylake-quirk", "hw-index"}
LIMIT_BYTES = 40 * 1024 * 1024

sys.path.insert(0, str(CORPUS / "tools"))
import perf_stats  # noqa: E402


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in cases]


def elf_maps(path: Path) -> tuple[ELFFile, list[tuple[int, int, Any]]]:
    f = path.open("rb")
    elf = ELFFile(f)
    maps = []
    for sec in elf.iter_sections():
        t = sec.header["sh_type"]
        if isinstance(t, int) and t in SHT_MAP:
            data = sec.data()
            maps.append((t, 0 if t == 0x6FFF4C08 else data[0], sec))
    return elf, maps


def build_id_of(elf: ELFFile) -> str | None:
    sec = elf.get_section_by_name(".note.gnu.build-id")
    if sec is None:
        return None
    return next(n["n_desc"] for n in sec.iter_notes() if n["n_type"] == "NT_GNU_BUILD_ID")


def merge_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """llvm-readobj's JSON repeats "BBAddrMap" once per map section (relocatable objects
    have several): concatenate the repeats instead of keeping the last."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out and isinstance(v, list):
            out[k] = out[k] + v
        else:
            out[k] = v
    return out


def readobj_functions(golden: Path) -> list[dict[str, Any]]:
    top = json.loads(golden.read_text(), object_pairs_hook=merge_duplicate_keys)[0]
    if "BBAddrMap" not in top:  # llvm-readobj 13/14 nest the file under its name
        top = next(iter(top.values()))
    return [rec["Function"] for rec in top["BBAddrMap"]]


# ------------------------------------------------------------------------ manifest shape
def test_manifest_shape() -> None:
    assert BINARIES and PROFILES
    names = ids(BINARIES) + ids(PROFILES)
    assert len(names) == len(set(names)), "case names must be unique"
    for b in BINARIES:
        for key in ("name", "path", "sources", "compiler", "flags", "linker", "kind", "map",
                    "purpose", "build_id", "goldens"):
            assert key in b, (b["name"], key)
        assert b["kind"] in KINDS
        assert b["linker"] in {"bfd", "lld", "none"}
        assert re.fullmatch(r"clang(\+\+)?-\d+", b["compiler"])
        assert b["map"]["sh_type"] in {"0x6fff4c08", "0x6fff4c0a"}
        assert (b["kind"] == "obj") == (b["linker"] == "none")
    for p in PROFILES:
        assert set(p["kinds"]) <= PROFILE_KINDS, p["kinds"]
        assert p["mode"] in {"file", "pipe"}
        assert all(name in BY_NAME for name in p["binaries"])


def test_demo_case_is_there() -> None:
    assert BY_NAME["demo"]["compiler"] == "clang-22" and BY_NAME["demo"]["kind"] == "pie"
    demo = next(p for p in PROFILES if p["name"] == "demo-plain")
    assert demo["binaries"] == ["demo"] and demo["samples"] > 1000


def test_every_kind_and_format_is_covered() -> None:
    kinds = {b["kind"] for b in BINARIES}
    assert kinds >= KINDS
    versions = {v for b in BINARIES for v in b["map"]["versions"]}
    assert {0, 1, 2, 5} <= versions
    assert {"bfd", "lld"} <= {b["linker"] for b in BINARIES}
    pkinds = {k for p in PROFILES for k in p["kinds"]}
    assert pkinds >= PROFILE_KINDS


def test_corpus_under_size_limit() -> None:
    total = sum(f.stat().st_size for f in CORPUS.rglob("*")
                if f.is_file() and "work" not in f.relative_to(CORPUS).parts[:1])
    assert total < LIMIT_BYTES, f"corpus is {total / 2**20:.1f} MB"


# ------------------------------------------------------------------------ binaries
@pytest.mark.parametrize("b", BINARIES, ids=ids(BINARIES))
def test_binary_files_exist(b: dict[str, Any]) -> None:
    assert (CORPUS / b["path"]).is_file()
    for src in b["sources"]:
        assert (CORPUS / src).is_file()
    assert (CORPUS / b["goldens"]["readobj"]).is_file()
    assert re.fullmatch(r"llvm-readobj-\d+", b["goldens"]["readobj_tool"])


@pytest.mark.parametrize("b", BINARIES, ids=ids(BINARIES))
def test_binary_map_sections_match_manifest(b: dict[str, Any]) -> None:
    elf, maps = elf_maps(CORPUS / b["path"])
    assert maps, "no map section"
    assert {f"{t:#x}" for t, _, _ in maps} == {b["map"]["sh_type"]}
    assert sorted({v for _, v, _ in maps}) == b["map"]["versions"]
    assert len(maps) == b["map"]["sections"]
    for _, _, sec in maps:
        assert sec.header["sh_flags"] & 0x80, "SHF_LINK_ORDER"  # linked to its text section
        assert not sec.header["sh_flags"] & 0x2, "map sections are not SHF_ALLOC"


@pytest.mark.parametrize("b", BINARIES, ids=ids(BINARIES))
def test_binary_build_id_and_kind(b: dict[str, Any]) -> None:
    elf, _ = elf_maps(CORPUS / b["path"])
    assert build_id_of(elf) == b["build_id"]
    e_type = elf.header["e_type"]
    want = {"pie": "ET_DYN", "so": "ET_DYN", "stripped": "ET_DYN", "debug": "ET_DYN",
            "nopie": "ET_EXEC", "obj": "ET_REL"}[b["kind"]]
    assert e_type == want
    if b["kind"] == "obj":
        assert b["build_id"] is None
        relas = [s for s in elf.iter_sections() if s.name.startswith(".rela.llvm_bb_addr_map")]
        assert relas, "relocatable maps carry their relocations"
    else:
        assert b["build_id"]
    symtab = elf.get_section_by_name(".symtab")
    if b["kind"] == "stripped":
        assert symtab is None
    elif b["kind"] != "obj":
        assert symtab is not None


@pytest.mark.parametrize("b", [b for b in BINARIES if b["kind"] == "debug"],
                         ids=ids([b for b in BINARIES if b["kind"] == "debug"]))
def test_debug_file_found_by_build_id(b: dict[str, Any]) -> None:
    stripped = BY_NAME[b["debug_for"]]
    bid = stripped["build_id"]
    assert b["path"] == f"debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
    assert b["build_id"] == bid


@pytest.mark.parametrize("b", [b for b in BINARIES if b["linker"] == "lld"],
                         ids=ids([b for b in BINARIES if b["linker"] == "lld"]))
def test_lld_text_offset_differs_from_vaddr(b: dict[str, Any]) -> None:
    elf, _ = elf_maps(CORPUS / b["path"])
    text = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
    assert len(text) == 1 and text[0]["p_offset"] != text[0]["p_vaddr"]


@pytest.mark.parametrize("b", BINARIES, ids=ids(BINARIES))
def test_readobj_golden_matches_case(b: dict[str, Any]) -> None:
    funcs = readobj_functions(CORPUS / b["goldens"]["readobj"])
    assert funcs, "the newest reader that decodes the case must print functions"
    flags = " ".join(b["flags"])
    if "-fbasic-block-sections=list" in flags or "-fsplit-machine-functions" in flags:
        assert any(len(f.get("BB Ranges", [])) > 1 for f in funcs), "multi-range expected"
    if "unwind.cpp" in " ".join(b["sources"]):
        entries = [e for f in funcs for r in f.get("BB Ranges", [f])
                   for e in r.get("BB Entries", r.get("BB entries", []))]
        assert any(e["IsEHPad"] for e in entries), "landing pads expected"
    if "skip-bb-entries" in flags:
        assert all(not r.get("BB Entries") for f in funcs for r in f.get("BB Ranges", []))


# ------------------------------------------------------------------------ profiles
@pytest.mark.parametrize("p", PROFILES, ids=ids(PROFILES))
def test_profile_files_and_header(p: dict[str, Any]) -> None:
    head = (CORPUS / p["path"]).read_bytes()[:16]
    assert head[:8] == b"PERFILE2"
    assert (int.from_bytes(head[8:16], "little") == 16) == (p["mode"] == "pipe")
    for key in ("script", "report", "buildid_list", "report_D_stats"):
        assert (CORPUS / p["goldens"][key]).is_file(), key
    if "lbr" in p["kinds"]:
        assert (CORPUS / p["exact_counts"]).is_file()
        assert (CORPUS / p["goldens"]["brstack"]).is_file()


@pytest.mark.parametrize("p", PROFILES, ids=ids(PROFILES))
def test_profile_goldens_agree(p: dict[str, Any]) -> None:
    stats = json.loads((CORPUS / p["goldens"]["report_D_stats"]).read_text())
    assert stats["SAMPLE"] == p["samples"]
    assert p["samples"] > (300 if "lbr" in p["kinds"] else 1000)
    lines = (CORPUS / p["goldens"]["script"]).read_text().splitlines()
    if "callgraph" not in p["kinds"]:
        assert len([ln for ln in lines if ln.strip()]) == p["samples"]
    assert ("COMPRESSED" in stats) == ("zstd" in p["kinds"])
    buildids = (CORPUS / p["goldens"]["buildid_list"]).read_text()
    expect_ids = not ({"pipe", "zstd"} & set(p["kinds"])) or \
        {"injected-buildids", "buildid-mmap", "lbr"} & set(p["kinds"])
    for name in p["binaries"]:
        bid = BY_NAME[name]["build_id"]
        assert (bid in buildids) == bool(expect_ids), (name, bid)


@pytest.mark.parametrize("p", [p for p in PROFILES if "two-processes" in p["kinds"]],
                         ids=ids([p for p in PROFILES if "two-processes" in p["kinds"]]))
def test_two_processes(p: dict[str, Any]) -> None:
    text = (CORPUS / p["goldens"]["script"]).read_text()
    binary = Path(BY_NAME[p["binaries"][0]]["path"]).name
    pids = {ln.split()[0] for ln in text.splitlines() if binary in ln}
    assert len(pids) >= 2


@pytest.mark.parametrize("p", [p for p in PROFILES if "so" in p["kinds"]],
                         ids=ids([p for p in PROFILES if "so" in p["kinds"]]))
def test_hot_code_in_shared_library(p: dict[str, Any]) -> None:
    libs = [Path(BY_NAME[n]["path"]).name for n in p["binaries"] if BY_NAME[n]["kind"] == "so"]
    lines = (CORPUS / p["goldens"]["script"]).read_text().splitlines()
    in_lib = sum(1 for ln in lines if any(lib in ln for lib in libs))
    assert in_lib > len(lines) // 2


LBR = [p for p in PROFILES if "lbr" in p["kinds"]]


@pytest.mark.parametrize("p", LBR, ids=ids(LBR))
def test_lbr_stacks(p: dict[str, Any]) -> None:
    skylake = "skylake-quirk" in p["kinds"]
    n = 0
    for line in (CORPUS / p["goldens"]["brstack"]).read_text().splitlines():
        if not line.strip():
            continue
        ip, *tokens = line.split()
        entries = [t for t in tokens if "/" in t]  # pipe-mode output adds the symbol
        pairs = [tuple(int(x, 16) for x in e.split("/")[:2]) for e in entries]
        assert len(pairs) == p["lbr"]["depth"] == 32
        assert pairs[0][1] == int(ip, 16), "entry 0 is the newest branch: its target is the ip"
        if skylake:
            assert pairs[0] == pairs[1]
        n += 1
    assert n == p["samples"] == p["lbr"]["samples"]


@pytest.mark.parametrize("p", LBR, ids=ids(LBR))
def test_lbr_exact_counts(p: dict[str, Any]) -> None:
    exact = json.loads((CORPUS / p["exact_counts"]).read_text())
    b = BY_NAME[p["binaries"][0]]
    assert exact["build_id"] == b["build_id"]
    blocks = exact["blocks"]
    golden = readobj_functions(CORPUS / b["goldens"]["readobj"])
    assert len(blocks) == sum(len(r["BB Entries"]) for f in golden for r in f["BB Ranges"])
    counts = {(x["function"], x["id"]): x["count"] for x in blocks}
    assert counts[("main", 0)] == 1
    cold = {"lay_die", "pf_bad"} & {f for f, _ in counts}  # layout.c's, pgoflip.c's
    assert cold and all(counts[(f, 0)] == 0 for f in cold)  # cold error paths never run
    assert max(c or 0 for c in counts.values()) > 100_000
    assert sum(e["count"] for e in exact["edges"]) == exact["taken_branches_in_binary"]
    # every sampled branch is one the traced run really took
    base = int(p["lbr"]["base"], 16)
    edges = {(int(e["from"], 16), int(e["to"], 16)) for e in exact["edges"]}
    for line in (CORPUS / p["goldens"]["brstack"]).read_text().splitlines()[:200]:
        for entry in [t for t in line.split()[1:] if "/" in t]:
            f, t = (int(x, 16) - base for x in entry.split("/")[:2])
            assert (f, t) in edges


def test_perf_stats_parser() -> None:
    text = ["junk\n", "Aggregated stats:\n", "           TOTAL events:       12\n",
            "            MMAP events:          1  ( 8.3%)\n",
            "          SAMPLE events:         11  (91.7%)\n", "cpu-clock stats:\n",
            "          SAMPLE events:         11\n"]
    assert perf_stats.aggregated_stats(text) == {"MMAP": 1, "SAMPLE": 11}
