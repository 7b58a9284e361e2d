"""Benchmarks: `make bench` (python -m benchmarks) prints jobs/s and latencies."""
