"""A team's own Hugging Face Trainer script, as it runs on SageMaker today: TrainingArguments
parsed from the command line with HfArgumentParser, a tiny BERT from a config (random weights).
It knows nothing of compiled-training."""

import os
import zlib
from dataclasses import dataclass

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


class Reviews(torch.utils.data.Dataset):
    """``label<TAB>text`` lines, words hashed into the vocabulary, padded to one length."""

    def __init__(self, path, max_length, vocab_size):
        self.rows = []
        with open(path) as lines:
            text_lines = list(lines)
        for line in text_lines:
            label, text = line.rstrip("\n").split("\t")
            ids = [zlib.crc32(word.encode()) % (vocab_size - 1) + 1 for word in text.split()]
            ids = ids[:max_length] + [0] * (max_length - len(ids[:max_length]))
            self.rows.append((ids, int(label)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        ids, label = self.rows[index]
        return {"input_ids": torch.tensor(ids),
                "attention_mask": (torch.tensor(ids) > 0).long(), "labels": torch.tensor(label)}


def main():
    data_args, training_args = HfArgumentParser(
        (DataArguments, TrainingArguments)).parse_args_into_dataclasses()
    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=2)
    model = BertForSequenceClassification(config)
    train = Reviews(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "reviews.tsv"),
                    data_args.max_length, config.vocab_size)
    print(f"torch_compile={training_args.torch_compile} mode={training_args.torch_compile_mode}")
    Trainer(model=model, args=training_args, train_dataset=train).train()
    if training_args.process_index == 0:
        model.save_pretrained(os.environ["SM_MODEL_DIR"])


if __name__ == "__main__":
    main()
