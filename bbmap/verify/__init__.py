"""Check compiler-emitted block metadata against symbols, sections and instructions.

Lazy exports so that the pytest plugin (loaded in every pytest run) stays cheap::

    from bbmap.verify import verify, assert_valid_bb_map
"""

from __future__ import annotations

from bbmap import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "verify": "bbmap.verify.api",
    "assert_valid_bb_map": "bbmap.verify.api",
    "VerifyReport": "bbmap.verify.api",
    "Finding": "bbmap.verify.context",
    "CHECKS": "bbmap.verify.checks",
    "verify_profile": "bbmap.verify.api",
    "judge_profile": "bbmap.verify.api",
    "assert_pgo_map_matches": "bbmap.verify.api",
    "ProfileReport": "bbmap.verify.profile_report",
})
