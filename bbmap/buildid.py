"""The one rule for comparing build-ids (hex strings) from ELF notes and perf.data.

perf stores a build-id in a 20-byte field and pads a shorter one (lld's 8-byte ids,
an MD5's 16) with zeros; which length it reports depends on the record (the
``MISC_BUILD_ID_SIZE`` bit, MMAP2's size byte).  Two ids match when they are equal
after padding the shorter with zeros -- a strict prefix that is not followed by zeros
is another build.  The mapping layer decides with this rule and the explanation of
an empty result quotes the same rule, so the two can never disagree.
"""

from __future__ import annotations


def build_ids_match(a: str | None, b: str | None) -> bool:
    """Equal after perf's zero padding (a 20-byte field holding a shorter id)."""
    if not a or not b:
        return False
    a, b = a.lower(), b.lower()
    n = min(len(a), len(b))
    rest = a[n:] + b[n:]
    return a[:n] == b[:n] and set(rest) <= {"0"}
