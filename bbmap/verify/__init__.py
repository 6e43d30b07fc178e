"""Check compiler-emitted block metadata against symbols, sections and instructions.

Lazy exports so that the pytest plugin (loaded in every pytest run) stays cheap::

    from bbmap.verify import verify, assert_valid_bb_map
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "verify": "bbmap.verify.api",
    "assert_valid_bb_map": "bbmap.verify.api",
    "VerifyReport": "bbmap.verify.api",
    "Finding": "bbmap.verify.context",
    "CHECKS": "bbmap.verify.checks",
    "verify_profile": "bbmap.verify.api",
    "judge_profile": "bbmap.verify.api",
    "assert_pgo_map_matches": "bbmap.verify.api",
    "ProfileReport": "bbmap.verify.profile_report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bbmap.verify' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
