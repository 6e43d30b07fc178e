"""Where a sample or branch record lands: the one enumeration every layer uses.

The mapping layer (:mod:`bbmap.mappings`) can only tell that an address is in the
binary, in another DSO, in the kernel, unmapped, or of a process the caller excluded;
the index (:mod:`bbmap.index`) refines "in the binary" into in a block / in a function
without a block / outside every function; accounting (:mod:`bbmap.aggregate.accounting`)
tallies each code as a bucket.  All three use these numbers, so a code never needs
translating between layers and cannot mean two things.  The order runs from most to
least specific (spec/annotate.md, "Accounting").
"""

from __future__ import annotations

IN_BLOCK = 0
IN_FUNCTION_NO_BLOCK = 1
OUTSIDE_FUNCTION = 2  # in the binary, outside every function (PLT, stubs, gaps)
OTHER_DSO = 3
KERNEL = 4
UNMAPPED = 5
OTHER_PID = 6  # a process excluded by ``--pid``
DUPLICATE = 7  # branch records only: the hardware's duplicated newest LBR entry

# The mapping layer's "in the binary": outside every function until the index finds one.
IN_BINARY = OUTSIDE_FUNCTION

# Bucket names (JSON keys), indexed by code.
BUCKETS = ("in_block", "in_function_no_block", "outside_function", "other_dso", "kernel",
           "unmapped", "other_pid")
BRANCH_BUCKETS = (*BUCKETS, "duplicate")

BUCKET_LABELS = {
    "in_block": "in a basic block",
    "in_function_no_block": "in a function, no block",
    "outside_function": "in the binary, outside any function",
    "other_dso": "in another DSO",
    "kernel": "kernel",
    "unmapped": "unmapped",
    "other_pid": "other process (--pid)",
    "duplicate": "duplicated newest LBR entry (dropped)",
}


def status_name(code: int) -> str:
    """The hyphenated name a code has in lookup and mapping reports (``in-block``)."""
    return BRANCH_BUCKETS[code].replace("_", "-")
