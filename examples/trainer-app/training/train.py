"""A Hugging Face Trainer script as a team writes it for SageMaker, with nothing of
compiled-training in it: TrainingArguments parsed from the command line (HfArgumentParser), a
tiny BERT from a config (random weights, no download), an F1 score from ``compute_metrics``.

Trainer logs each evaluation as a dict on one line, which the pipeline's metric definition
reads: ``{'eval_loss': '0.4012', 'eval_f1': '0.8571', ...}`` (transformers 5 quotes the
values; 4.x did not).
"""

import os
import zlib
from dataclasses import dataclass

import numpy as np
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)


@dataclass
class DataArguments:
    max_length: int = 16
    """Every review padded or cut to this many tokens: one shape for the compiler."""


class Reviews(torch.utils.data.Dataset):
    """``label<TAB>text`` lines; words hashed into the vocabulary."""

    def __init__(self, path, max_length, vocab_size):
        self.rows = []
        with open(path) as lines:
            for line in lines:
                label, text = line.rstrip("\n").split("\t")
                ids = [zlib.crc32(w.encode()) % (vocab_size - 1) + 1 for w in text.split()]
                ids = ids[:max_length] + [0] * (max_length - len(ids[:max_length]))
                self.rows.append((ids, int(label)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        ids, label = self.rows[index]
        ids = torch.tensor(ids)
        return {"input_ids": ids, "attention_mask": (ids > 0).long(),
                "labels": torch.tensor(label)}


def f1(prediction):
    """The positive class's F1 score."""
    predicted = np.argmax(prediction.predictions, axis=-1)
    labels = prediction.label_ids
    true_positives = int(((predicted == 1) & (labels == 1)).sum())
    found, actual = int((predicted == 1).sum()), int((labels == 1).sum())
    return {"f1": 2 * true_positives / (found + actual) if found + actual else 0.0}


def main():
    data_args, training_args = HfArgumentParser(
        (DataArguments, TrainingArguments)).parse_args_into_dataclasses()
    config = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=2)
    model = BertForSequenceClassification(config)

    def reviews(channel):
        path = os.path.join(os.environ[f"SM_CHANNEL_{channel.upper()}"], "reviews.tsv")
        return Reviews(path, data_args.max_length, config.vocab_size)

    trainer = Trainer(model=model, args=training_args, train_dataset=reviews("train"),
                      eval_dataset=reviews("validation"), compute_metrics=f1)
    trainer.train()
    if training_args.process_index == 0:
        model.save_pretrained(os.environ["SM_MODEL_DIR"])


if __name__ == "__main__":
    main()
