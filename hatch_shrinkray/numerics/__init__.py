"""Pure numpy numerics: quantization grids and output-aware rounding (no onnx, no onnxruntime)."""
