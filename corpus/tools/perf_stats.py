"""Read `perf report -D` output on stdin; print its "Aggregated stats" table as JSON.

The keys are record type names as perf prints them without PERF_RECORD_ (SAMPLE, MMAP2, ...);
the TOTAL line is left out because it is the sum of the others.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable

_LINE = re.compile(r"^\s*([A-Z0-9_]+) events:\s+(\d+)")


def aggregated_stats(lines: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    inside = False
    for line in lines:
        if line.startswith("Aggregated stats:"):
            inside = True
            continue
        if not inside:
            continue
        m = _LINE.match(line)
        if m is None:
            break  # the per-event tables ("cpu-clock stats:") follow
        if m.group(1) != "TOTAL":
            counts[m.group(1)] = int(m.group(2))
    if not inside:
        raise SystemExit("perf_stats: no 'Aggregated stats:' table in the input")
    return counts


def main() -> None:
    json.dump(aggregated_stats(sys.stdin), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
