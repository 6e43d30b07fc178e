"""Fetch LLVM's llvm-profgen test inputs: real LBR profiles from other machines.

``llvm/test/tools/llvm-profgen/Inputs/`` holds ``perf script`` texts of LBR profiles
recorded on Intel machines (``cs-preinline-cost.perfscript``: 996 samples of 16 entries,
CentOS 7's ld-2.17 in its mappings) beside their binaries (``*.perfbin``).  They come from
Debian's source package of LLVM 16, fetched by name through apt (``deb-src`` must be
configured), the upstream tarball checked against the pinned sha256, and only that
directory extracted.  Nothing of it is committed: the default place is
``/work/cache/llvm16-src`` (``$BBMAP_LLVM_PROFGEN_INPUTS`` names the Inputs directory for
the tests, tests/test_outputs_bolt_real_lbr.py).

    python corpus/tools/fetch_profgen_inputs.py [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "llvm-toolchain-16"
VERSION = "1:16.0.6-15~deb12u1"  # Debian 12's; the .orig tarball is upstream 16.0.6
ARCHIVE = "llvm-toolchain-16_16.0.6.orig.tar.xz"
SHA256 = "5ab98480d3bc9f1896de1a1afafb46c318a9baa02bf21a4f6830c644d06c1cc0"
SIZE = 136_421_172
TOP = "llvm-toolchain-16_16.0.6"
INPUTS = f"{TOP}/llvm/test/tools/llvm-profgen/Inputs"
DEFAULT_CACHE = Path("/work/cache/llvm16-src")


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fetch(cache: Path) -> Path:
    """The Inputs directory (downloaded, checked and extracted once)."""
    inputs = cache / INPUTS
    if (inputs / "cs-preinline-cost.perfscript").exists():
        return inputs
    cache.mkdir(parents=True, exist_ok=True)
    arc = cache / ARCHIVE
    if not arc.exists() or arc.stat().st_size != SIZE or sha256(arc) != SHA256:
        arc.unlink(missing_ok=True)
        r = subprocess.run(["apt-get", "source", "--download-only", f"{PACKAGE}={VERSION}"],
                           cwd=cache, capture_output=True, text=True)
        if r.returncode != 0 or not arc.exists():
            raise SystemExit(f"fetch_profgen_inputs: apt-get source {PACKAGE}={VERSION} "
                             f"failed (is deb-src configured?): {r.stderr.strip()[-300:]}")
    got = sha256(arc)
    if got != SHA256:
        raise SystemExit(f"fetch_profgen_inputs: {arc}: sha256 {got}, pinned {SHA256}")
    tmp = cache / "extract.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    subprocess.run(["tar", "-xJf", str(arc), "-C", str(tmp), INPUTS], check=True)
    inputs.parent.mkdir(parents=True, exist_ok=True)
    (tmp / INPUTS).rename(inputs)
    shutil.rmtree(tmp)
    return inputs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    a = ap.parse_args(argv)
    print(fetch(a.cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
