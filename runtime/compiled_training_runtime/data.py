"""Training data: pre-tokenized JSON lines, padded to one static shape.

Each line is ``{"input_ids": [...], "label": k}`` (sequence classification) or
``{"features": [...], "label": k}`` (a plain module). Padding every example to
``max_seq_length`` keeps one shape, so a compiler builds one graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .env import InputError, TrainingConfig


def load(channel: Path, config: TrainingConfig) -> dict[str, torch.Tensor]:
    files = sorted(p for p in channel.rglob("*.jsonl") if p.is_file())
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()
               if line.strip()]
    if not records:
        raise InputError(f"channel folder {channel} holds no examples (*.jsonl lines)")
    return tensors(records, config)


def tensors(records: list[dict[str, Any]], config: TrainingConfig, *,
            labels: bool = True) -> dict[str, torch.Tensor]:
    """Records as tensors, padded as in training; without labels for inference."""
    targets = {"labels": torch.tensor([int(r["label"]) for r in records], dtype=torch.long)
               } if labels else {}
    if "features" in records[0]:
        return {"features": torch.tensor([r["features"] for r in records], dtype=torch.float32),
                **targets}
    length = config.max_seq_length
    lengths = [len(r["input_ids"]) for r in records]
    if not config.static_shapes:
        # Opted out of static shapes: pad each batch to its own longest row (recompiles).
        length = max(lengths)
    ids = torch.zeros((len(records), length), dtype=torch.long)
    mask = torch.zeros((len(records), length), dtype=torch.long)
    for row, record in enumerate(records):
        tokens = record["input_ids"][:length]
        ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, : len(tokens)] = 1
    if not labels:
        return {"input_ids": ids, "attention_mask": mask}
    return {"input_ids": ids, "attention_mask": mask, **targets,
            "lengths": torch.tensor(lengths)}


def batch(data: dict[str, torch.Tensor], indices: torch.Tensor,
          config: TrainingConfig) -> dict[str, torch.Tensor]:
    rows = {k: v[indices] for k, v in data.items() if k != "lengths"}
    if "input_ids" in rows and not config.static_shapes:
        longest = int(data["lengths"][indices].clamp(max=rows["input_ids"].shape[1]).max())
        rows["input_ids"] = rows["input_ids"][:, :longest]
        rows["attention_mask"] = rows["attention_mask"][:, :longest]
    return rows


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A prebuilt 4D additive attention mask.

    Given a 2D mask, Transformers checks ``padding_mask.all()`` on the host, which forces
    an XLA execution mid-step; a 4D mask goes straight into attention.
    """
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
