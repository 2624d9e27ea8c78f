"""Benchmark harness: `python -m benchmarks [NAME...]` (see shared spec 06 §1)."""
