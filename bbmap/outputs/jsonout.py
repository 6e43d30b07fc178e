"""JSON output (shape in spec/annotate-json.md): one document, keys in a fixed order,
so two runs on the same input are byte-identical."""

from __future__ import annotations

import json

from bbmap.annotate.result import AnnotateResult


def render_json(result: AnnotateResult, *, top: int | None = None, indent: int | None = 1
                ) -> str:
    return json.dumps(result.to_json(top=top), indent=indent, ensure_ascii=False) + "\n"
