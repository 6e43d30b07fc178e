"""Test support that users need for their own tests too, kept out of the pipeline.

:mod:`bbmap.testing.perf_oracle` parses what real ``perf`` prints (``perf report -D``
record counts, ``perf script`` samples and branch stacks, ``perf buildid-list``) so a
reading of a perf.data file by bbmap can be held against perf's own: bbmap's tests and
benches do, and so can anyone checking bbmap on their profiles.  Nothing in the
pipeline imports this package; test-only code that users would not need (binary
mutators, shared fixtures) lives under ``tests/``.
"""
