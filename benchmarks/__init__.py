"""Benchmark scripts: each prints its figures; BENCHMARKS.md records them with the command."""
