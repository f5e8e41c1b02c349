"""``make run-local``: the reference document-classification pipeline, run whole on this
machine with ``compiled-training run``.

The team trains BERT in fp16 under Training Compiler's XLA mechanism: its training step runs in
the torch-xla 2.8 environment ``make test-envs`` builds (2.8 still has the loss scaler), on a
tiny BERT (``--set``) and a few random token sequences written here as its channels' data.
Arguments after the script's name go to ``compiled-training run`` (``--param
MinValidationAccuracy=1.01`` sees the gate fail).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiled_training.tools.cli import main  # noqa: E402
from compiled_training_runtime.local import TINY_BERT, write_examples  # noqa: E402
from tests.environments import XLA_WITH_GRAD_SCALER, built  # noqa: E402

DATA = "s3://example-document-classification-data/bert"
WORK = ROOT / ".local-run"


def arguments(extra: list[str]) -> list[str]:
    write_examples(WORK / "data" / "train", 64, seed=0)
    write_examples(WORK / "data" / "validation", 16, seed=1)
    tiny = {**TINY_BERT, "batch_size": 4, "max_steps": 4, "log_every": 2}
    return ["run", str(ROOT / "cdk.out"), "--pipeline", "DocumentClassification/Pipeline",
            "--python", str(built(XLA_WITH_GRAD_SCALER).executable),
            "--data", f"{DATA}/train/={WORK / 'data' / 'train'}",
            "--data", f"{DATA}/validation/={WORK / 'data' / 'validation'}",
            *[arg for name, value in tiny.items() for arg in ("--set", f"Train.{name}={value}")],
            "--param", "MinValidationAccuracy=0.5", "--workdir", str(WORK / "work"), *extra]


if __name__ == "__main__":
    sys.exit(main(arguments(sys.argv[1:])))
