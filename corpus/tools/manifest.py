"""Write corpus/manifest.json from the case tables that corpus/build prints on stdin.

Every file the manifest names is checked while it is written: a binary's map sections must
have the sh_type and first-byte versions its case expects, and build-ids are read from the
files themselves.  Anything missing or different is an error, so a manifest that exists is
one that describes the tree.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

SHT_MAP = {0x6FFF4C08, 0x6FFF4C0A}
PERF_MAGIC = b"PERFILE2"


def fail(msg: str) -> None:
    raise SystemExit(f"manifest: {msg}")


def elf_facts(path: Path) -> dict[str, Any]:
    """Build-id and the (sh_type, first byte) of every map section of an ELF file."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        build_id = None
        sections = []
        for sec in elf.iter_sections():
            t = sec.header["sh_type"]
            if sec.name == ".note.gnu.build-id":
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        build_id = note["n_desc"]
            if isinstance(t, int) and t in SHT_MAP:
                data = sec.data()
                # The V0 type has no version byte: its records start with the address.
                version = 0 if t == 0x6FFF4C08 else (data[0] if data else -1)
                sections.append((t, version, sec.name))
        return {"build_id": build_id, "e_type": elf.header["e_type"], "maps": sections}


def perf_mode(path: Path) -> str:
    head = path.read_bytes()[:16]
    if head[:8] != PERF_MAGIC:
        fail(f"{path} is not perf data")
    return "pipe" if int.from_bytes(head[8:16], "little") == 16 else "file"


def read_tables(stream: list[str]) -> dict[str, list[list[str]]]:
    tables: dict[str, list[list[str]]] = {}
    current = None
    for line in stream:
        line = line.rstrip("\n")
        if line.startswith("#"):
            current = tables.setdefault(line[1:], [])
        elif line and current is not None:
            current.append(line.split("|"))
    return tables


def binary_entry(row: list[str], corpus: Path) -> dict[str, Any]:
    name, compiler, kind, linker, path, sources, sh_type, versions, purpose, flags = row
    facts = elf_facts(corpus / path)
    want_type = int(sh_type, 16)
    want_versions = sorted(int(v) for v in versions.split(","))
    got_types = {t for t, _, _ in facts["maps"]}
    got_versions = sorted({v for _, v, _ in facts["maps"]})
    if got_types != {want_type} or got_versions != want_versions:
        fail(f"{name}: map sections {facts['maps']} != expected {sh_type} {want_versions}")
    goldens = sorted((corpus / "golden").glob(f"{name}.readobj*.json"))
    if len(goldens) != 1:
        fail(f"{name}: expected one readobj golden, found {goldens}")
    tool = "llvm-readobj-" + goldens[0].name.rsplit(".readobj", 1)[1].split(".")[0]
    return {
        "name": name,
        "path": path,
        "sources": sources.split(","),
        "compiler": compiler,
        # The clone's location is not part of the case: write it as <corpus>.
        "flags": shlex.split(flags.replace(str(corpus), "<corpus>")),
        "linker": linker,
        "kind": kind,
        "map": {"sh_type": sh_type, "versions": want_versions,
                "sections": len(facts["maps"])},
        "purpose": purpose,
        "build_id": facts["build_id"],
        "goldens": {"readobj": str(goldens[0].relative_to(corpus)), "readobj_tool": tool},
    }


def debug_entries(corpus: Path, binaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The separate debug files of stripped cases, found the way a debugger finds them."""
    out = []
    for b in binaries:
        if b["kind"] != "stripped":
            continue
        bid = b["build_id"]
        rel = f"debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
        facts = elf_facts(corpus / rel)
        if facts["build_id"] != bid:
            fail(f"{rel}: build-id {facts['build_id']} != {bid}")
        name = b["name"].replace("-pie", "-debug")
        out.append({
            **b,
            "name": name,
            "path": rel,
            "kind": "debug",
            "flags": b["flags"] + ["(objcopy --only-keep-debug)"],
            "purpose": f"separate debug file of {b['name']}, found by build-id under debug/",
            "debug_for": b["name"],
            "map": {**b["map"], "sections": len(facts["maps"])},
            "goldens": {"readobj": f"golden/{name}.readobj22.json",
                        "readobj_tool": "llvm-readobj-22"},
        })
    return out


def perf_goldens(d: Path, corpus: Path) -> dict[str, str]:
    names = {"script": "script.txt", "script_mmap": "script-mmap.txt", "report": "report.txt",
             "report_sym": "report-sym.txt", "buildid_list": "buildid-list.txt",
             "report_D_stats": "report-D-stats.json", "brstack": "script-brstack.txt"}
    out = {}
    for key, fname in names.items():
        if (d / fname).exists():
            out[key] = str((d / fname).relative_to(corpus))
    for key in ("script", "report", "buildid_list", "report_D_stats"):
        if key not in out:
            fail(f"{d}: golden {names[key]} missing")
    return out


def profile_entry(row: list[str], corpus: Path, known: set[str]) -> dict[str, Any]:
    name, bins, kinds, _opts, _cmd = row
    d = corpus / "profiles" / name
    return profile_common(name, d, corpus, bins.split(","), kinds.split(","), known)


def profile_common(name: str, d: Path, corpus: Path, bins: list[str], kinds: list[str],
                   known: set[str]) -> dict[str, Any]:
    data = d / "perf.data"
    if not data.exists():
        fail(f"{data} missing")
    for b in bins:
        if b not in known:
            fail(f"{name}: unknown binary {b}")
    stats = json.loads((d / "report-D-stats.json").read_text())
    return {
        "name": name,
        "path": str(data.relative_to(corpus)),
        "binaries": bins,
        "mode": perf_mode(data),
        "command": (d / "command.txt").read_text().strip(),
        "kinds": kinds,
        "samples": stats.get("SAMPLE", 0),
        "goldens": perf_goldens(d, corpus),
    }


def lbr_entry(row: list[str], corpus: Path, known: set[str]) -> dict[str, Any]:
    name, binary, _rounds, _every, variant = row[:5]  # a sixth field: the run's stdin
    d = corpus / "lbr" / name
    names = {"skylake": "skylake-quirk", "hw_index": "hw-index", "pipe": "pipe"}
    kinds = ["lbr"] + [names[v] for v in variant.split(",") if v != "none"]
    entry = profile_common(name, d, corpus, [binary], kinds, known)
    entry["exact_counts"] = str((d / "exact-counts.json").relative_to(corpus))
    entry["lbr"] = json.loads((d / "lbr-info.json").read_text())
    if "brstack" not in entry["goldens"]:
        fail(f"{name}: script-brstack.txt missing")
    return entry


def ip_entry(row: list[str], corpus: Path, known: set[str]) -> dict[str, Any]:
    """An IP-only profile of the same deterministic run as an LBR case (inference bench)."""
    name, lbr, _runs, _opts = row
    d = corpus / "ip" / name
    info = json.loads((d / "ip-info.json").read_text())
    data = d / "perf.data"
    if info["binary"] not in known:
        fail(f"{name}: unknown binary {info['binary']}")
    stats = json.loads((d / "report-D-stats.json").read_text())
    return {"name": name, "path": str(data.relative_to(corpus)), "binaries": [info["binary"]],
            "mode": perf_mode(data), "command": (d / "command.txt").read_text().strip(),
            "samples": stats.get("SAMPLE", 0), "lbr_case": lbr,
            "runs": info["runs"], "rounds": info["rounds"],
            "exact_counts": f"lbr/{lbr}/exact-counts.json"}


def precise_entry(row: list[str], corpus: Path, known: set[str],
                  lbr_rows: dict[str, list[str]]) -> dict[str, Any]:
    """A precise instruction-sample profile (tools/precise.py) of an LBR case's run, with
    the exact counts of its own traced run."""
    name, lbr, every = row
    if lbr not in lbr_rows:
        fail(f"{name}: unknown lbr case {lbr}")
    binary = lbr_rows[lbr][1]
    if binary not in known:
        fail(f"{name}: unknown binary {binary}")
    d = corpus / "precise" / name
    data = d / "perf.data"
    info = json.loads((d / "precise-info.json").read_text())
    if info["every"] != int(every):
        fail(f"{name}: precise-info.json says every {info['every']}, the case {every}")
    exact = d / "exact-counts.json"
    if not exact.exists():
        fail(f"{exact} missing")
    return {"name": name, "path": str(data.relative_to(corpus)), "binaries": [binary],
            "mode": perf_mode(data), "command": (d / "command.txt").read_text().strip(),
            "event": info["event"], "samples": info["samples"],
            "samples_in_binary": info["samples_in_binary"], "every": info["every"],
            "seed": info["seed"], "lbr_case": lbr,
            "exact_counts": str(exact.relative_to(corpus)),
            "info": str((d / "precise-info.json").relative_to(corpus))}


def go_binary_entry(row: list[str], corpus: Path) -> dict[str, Any]:
    """A Go binary: its GNU build-id read from the file, its Go build id from the golden
    ``go tool buildid`` wrote (the manifest and the golden cannot disagree)."""
    name, kind, path, tags, ldflags, purpose = row
    facts = elf_facts(corpus / path)
    if facts["maps"]:
        fail(f"{name}: a Go binary with block-map sections {facts['maps']}")
    goldens = {"command": f"golden/{name}.go-build.txt",
               "go_buildid": f"golden/{name}.go-buildid.txt",
               "readelf_n": f"golden/{name}.readelf-n.txt",
               "go_version_m": f"golden/{name}.go-version-m.txt"}
    for g in goldens.values():
        if not (corpus / g).exists():
            fail(f"{name}: golden {g} missing")
    go_id = (corpus / goldens["go_buildid"]).read_text().strip()
    version = (corpus / goldens["go_version_m"]).read_text().split("\n", 1)[0].split()[-1]
    want_gnu = kind == "gnu-build-id"
    if bool(facts["build_id"]) != want_gnu:
        fail(f"{name}: kind {kind} but GNU build-id {facts['build_id']}")
    cmd = shlex.split((corpus / goldens["command"]).read_text())[3:]  # after "cd DIR &&"
    return {"name": name, "path": path, "sources": ["src/gohot"], "compiler": version,
            "kind": kind, "flags": cmd, "tags": tags, "purpose": purpose,
            "build_id": facts["build_id"], "go_build_id": go_id,
            "size": (corpus / path).stat().st_size, "goldens": goldens}


def go_profile_entry(row: list[str], corpus: Path, known: set[str]) -> dict[str, Any]:
    name, binary, _opts, rounds = row
    e = profile_common(name, corpus / "go" / name, corpus, [binary], ["plain"], known)
    extra = corpus / "go" / name / "report-sym-unstripped.txt"
    if extra.exists():
        e["goldens"]["report_sym_unstripped"] = str(extra.relative_to(corpus))
    e["rounds"] = int(rounds)
    return e


def recorded(d: Path) -> bool:
    if (d / "perf.data").exists():
        return True
    print(f"manifest: warning: {d.name} not recorded yet, left out", file=sys.stderr)
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--stage-dir", required=True)
    args = ap.parse_args()
    corpus: Path = args.corpus
    tables = read_tables(sys.stdin.readlines())
    binaries = [binary_entry(r, corpus) for r in tables.get("binaries", [])]
    binaries += debug_entries(corpus, binaries)
    known = {b["name"] for b in binaries}
    profiles = [profile_entry(r, corpus, known) for r in tables.get("profiles", [])
                if recorded(corpus / "profiles" / r[0])]
    profiles += [lbr_entry(r, corpus, known) for r in tables.get("lbr", [])
                 if recorded(corpus / "lbr" / r[0])]
    go_binaries = [go_binary_entry(r, corpus) for r in tables.get("go", [])
                   if (corpus / r[2]).exists()]
    go_known = {b["name"] for b in go_binaries}
    manifest = {
        "about": "bbmap corpus: rebuild with corpus/build; see spec/corpus.md",
        "stage_dir": args.stage_dir,
        "pgo_profiles": sorted(str(p.relative_to(corpus))
                               for p in (corpus / "pgo").glob("*.profdata")),
        "binaries": binaries,
        "profiles": profiles,
        "ip_profiles": [ip_entry(r, corpus, known) for r in tables.get("ip", [])
                        if recorded(corpus / "ip" / r[0])],
        "precise_profiles": [precise_entry(r, corpus, known,
                                           {x[0]: x for x in tables.get("lbr", [])})
                             for r in tables.get("precise", [])
                             if recorded(corpus / "precise" / r[0])],
        "go_binaries": go_binaries,
        "go_profiles": [go_profile_entry(r, corpus, go_known)
                        for r in tables.get("go-profiles", [])
                        if recorded(corpus / "go" / r[0])],
    }
    json.dump(manifest, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
