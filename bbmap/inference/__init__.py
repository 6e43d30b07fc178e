"""Profile inference: block and edge counts from IP samples (spec/inference.md)."""
