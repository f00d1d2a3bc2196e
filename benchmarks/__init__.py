"""Benchmark harness of hatch-shrinkray (not part of the wheel). Its drivers: benchmarks/README.md."""
