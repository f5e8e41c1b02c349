"""Models: Hugging Face sequence classification (the BERT family), a small MLP on features, or
the user's module."""

from __future__ import annotations

import importlib

import torch

from .env import InputError, TrainingConfig


class SequenceClassifier(torch.nn.Module):
    """A Transformers model for sequence classification, built from a config: random
    weights, nothing downloaded. Takes the prebuilt additive mask."""

    def __init__(self, config: TrainingConfig) -> None:
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification

        # num_labels and attn_implementation are PretrainedConfig keywords the stubs omit.
        self.model = BertForSequenceClassification(BertConfig(  # type: ignore[call-arg]
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            num_hidden_layers=config.num_hidden_layers,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            max_position_embeddings=max(512, config.max_seq_length),
            num_labels=config.num_labels,
            attn_implementation="eager",
        ))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.predict(input_ids, attention_mask)
        return torch.nn.functional.cross_entropy(logits.float(), labels), logits

    def predict(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The logits, for serving (no labels)."""
        logits: torch.Tensor = self.model(input_ids=input_ids,
                                          attention_mask=attention_mask).logits
        return logits


class FeatureClassifier(torch.nn.Module):
    """Wraps a plain module that maps features to logits."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, features: torch.Tensor,
                labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.predict(features)
        return torch.nn.functional.cross_entropy(logits.float(), labels), logits

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        """The logits, for serving (no labels)."""
        logits: torch.Tensor = self.module(features)
        return logits


BUILT_IN_FAMILIES = ("bert", "roberta", "distilbert", "mlp")


def mlp(config: TrainingConfig) -> torch.nn.Module:
    """``num_features`` inputs, one hidden layer of ``hidden_size``, ``num_labels`` logits."""
    features = config.num_features
    if features is None or features < 1:
        raise InputError(f"model_family 'mlp' needs the hyperparameter 'num_features', a "
                         f"positive int (the length of each example's features), got "
                         f"{features!r}")
    return torch.nn.Sequential(torch.nn.Linear(features, config.hidden_size), torch.nn.ReLU(),
                               torch.nn.Linear(config.hidden_size, config.num_labels))


def build(config: TrainingConfig) -> SequenceClassifier | FeatureClassifier:
    if config.model_factory:
        module_name, _, function = config.model_factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), function)
        except (ImportError, AttributeError) as error:
            raise InputError(f"hyperparameter 'model_factory' must name module:function, "
                             f"got {config.model_factory!r} ({error})") from None
        return FeatureClassifier(factory(config))
    if config.model_family.lower() in BUILT_IN_FAMILIES[:3]:
        return SequenceClassifier(config)
    if config.model_family.lower() == "mlp":
        return FeatureClassifier(mlp(config))
    raise InputError(f"hyperparameter 'model_family' {config.model_family!r} is not built in "
                     f"(built in: {', '.join(BUILT_IN_FAMILIES)}); name a 'model_factory' "
                     "(module:function returning a torch.nn.Module)")
