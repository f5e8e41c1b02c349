"""Entry point SageMaker runs (sagemaker_program): the compiled-training runtime."""

from compiled_training_runtime.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
