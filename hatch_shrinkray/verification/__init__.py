"""Verification with onnxruntime: the inputs (recorded, a ``.npz`` or generated), running both models,
and comparing their outputs."""
