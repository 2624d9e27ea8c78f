"""Benchmark harness: `python -m benchmarks [NAME...]` (see README.md)."""
