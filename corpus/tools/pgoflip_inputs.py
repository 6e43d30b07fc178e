"""Write the two inputs of corpus/src/pgoflip.c (deterministic; corpus/build runs this).

* ``pgoflip-train.txt`` trains the instrumentation profile: short numbers (1-3 digits),
  90 % of them positive, 85 % of the operators ``+``;
* ``pgoflip-shift.txt`` is the deliberately different input: long numbers (9-10 digits),
  85 % negative, 85 % of the operators ``*``.

Low bits of the numbers are uniform in both, so ``pf_low_bits``'s branch does not move.

Usage: pgoflip_inputs.py OUT_DIR
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

RECORDS = 400
OPS = "+-*/"


def records(seed: int, digits: tuple[int, int], negative: float, hot_op: str) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(RECORDS):
        n = rng.randint(*digits)
        value = rng.randint(10 ** (n - 1) if n > 1 else 1, 10 ** n - 1)
        if rng.random() < negative:
            value = -value
        op = hot_op if rng.random() < 0.85 else rng.choice(OPS.replace(hot_op, ""))
        out.append(f"{op} {value}")
    return out


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "pgoflip-train.txt").write_text("\n".join(records(1, (1, 3), 0.10, "+")) + "\n")
    (out / "pgoflip-shift.txt").write_text("\n".join(records(2, (9, 10), 0.85, "*")) + "\n")


if __name__ == "__main__":
    main()
