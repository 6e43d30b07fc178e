"""JSON output (shape in spec/annotate-json.md).

Written as one document with a fixed key order, each top-level value and each function
compact on its own line: diffable, greppable, byte-identical between runs, and encoded by
the C JSON encoder (an indented dump of a 20,000-function profile is 4x slower).
"""

from __future__ import annotations

import json

from bbmap.aggregate.result import AnnotateResult


def render_json(result: AnnotateResult, *, top: int | None = None) -> str:
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    parts = ["{"]
    for k, v in result.header_json().items():
        parts.append(f"{enc(k)}:{enc(v)},")
    funcs = [enc(result.function_json(fv)) for fv in result.hot_functions(top)]
    parts.append(f"{enc('functions')}:[")
    parts.append(",\n".join(funcs))
    parts.append("],")
    parts.append(f"{enc('warnings')}:{enc([d.to_json() for d in result.warnings])}")
    parts.append("}")
    return "\n".join(parts) + "\n"
