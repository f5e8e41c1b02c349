"""Entry point SageMaker runs (sagemaker_program): the compiled-training runtime."""

from compiled_training_runtime.contract import CHANNEL_TRAIN

if __name__ == "__main__":
    raise SystemExit(
        "compiled-training runtime: the training loop ships with the runtime issue; "
        f"this entry point reads channel {CHANNEL_TRAIN!r}."
    )
