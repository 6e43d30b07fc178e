#!/usr/bin/env python3
"""Time bbmap's Go function-table reader against Go's own ``debug/gosym`` on the same binary.

Peer: ``corpus/tools/gosymdump`` (built here with the installed Go), which times
``gosym.NewTable(nil, gosym.NewLineTable(data, text))`` in-process and prints every
function; bbmap: :func:`bbmap.binary.go.pclntab_functions` (numpy) on the same section
bytes, and the construct reference :func:`pclntab_functions_ref` for scale.  Both sides
exclude reading the file; the function lists are checked equal first.  Best of
``--repeat`` runs each; the ratio bbmap/gosym is printed (> 1: bbmap is slower), with the
load average, since the machine is shared.

Inputs: the Go 1.19 tool binaries (``compile``: ~14,000 functions) and the corpus's
stripped Go program; binaries in the newer 1.20 layout, which Go 1.19's debug/gosym cannot
read, are timed for bbmap alone (``--extra PATH``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bbmap.binary import load_binary
from bbmap.binary.go import pclntab_functions

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the test oracles (tests/oracles/)
from oracles.pclntab_ref import pclntab_functions_ref  # noqa: E402

DEFAULT = ["/usr/lib/go-1.19/pkg/tool/linux_amd64/compile",
           str(REPO / "corpus/bin/go/stripped/gohot")]


def build_peer(out: Path) -> Path:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false", "GOPROXY": "off"}
    subprocess.run(["go", "build", "-o", str(out), "."], check=True, env=env,
                   cwd=REPO / "corpus/tools/gosymdump")
    return out


def table(path: str) -> tuple[bytes, int]:
    b = load_binary(path)
    sec = next(s for s in b.sections if s.name == ".gopclntab")
    text = next(s for s in b.sections if s.name == ".text")
    return b.section_data(sec.index), text.sh_addr


def best(fn, repeat: int) -> float:
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("binaries", nargs="*", default=DEFAULT)
    ap.add_argument("--extra", action="append", default=[],
                    help="a Go 1.20+ binary: bbmap alone (debug/gosym 1.19 cannot read it)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    if not shutil.which("go"):
        sys.exit("needs go")
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        peer = build_peer(Path(tmp) / "gosymdump")
        for path in args.binaries:
            if not Path(path).exists():
                print(f"{path}: absent, skipped")
                continue
            data, text = table(path)
            addr, size, names = pclntab_functions(data, True, text)
            out = subprocess.run([str(peer), path], capture_output=True, text=True, check=True)
            want = [line.split(" ", 2)[2] for line in out.stdout.splitlines()]
            assert want == names, f"{path}: function lists differ"
            gosym = []
            for _ in range(args.repeat):
                r = subprocess.run([str(peer), path], capture_output=True, text=True,
                                   check=True)
                gosym.append(float(r.stderr.split()[-2]))
            t_go = min(gosym)
            t_np = best(lambda d=data, t=text: pclntab_functions(d, True, t), args.repeat)
            t_ref = best(lambda d=data, t=text: pclntab_functions_ref(d, True, t), 1)
            print(f"{Path(path).name}: {len(names)} functions; debug/gosym {t_go * 1e3:.2f} ms, "
                  f"bbmap numpy {t_np * 1e3:.2f} ms, construct reference {t_ref * 1e3:.0f} ms; "
                  f"bbmap/gosym {t_np / t_go:.2f}, reference/numpy {t_ref / t_np:.0f}")
        for path in args.extra:
            b = load_binary(path)
            t0 = time.perf_counter()
            n = len(b.go.functions)
            print(f"{Path(path).name}: {n} functions, whole Go read (notes, build info, "
                  f"table) {(time.perf_counter() - t0) * 1e3:.0f} ms (no 1.19 peer)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
