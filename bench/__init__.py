"""Benchmarks and corpus builders (never run as timed tests)."""
