"""Carrying a profile of one build (N) onto the next build (N+1): functions matched by
name, blocks by the compiler's block hashes or the binary's own fingerprints, call
anchors and CFG neighbourhood, then counts inferred over N+1's CFG with the matched
samples as soft evidence (spec/stale.md)."""
