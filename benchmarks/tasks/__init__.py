"""Task metrics of the benchmark, one module per model family."""
