"""Benchmark harness of hatch-shrinkray (not part of the wheel). Entry point: ``python benchmarks/run.py``."""
