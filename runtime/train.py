"""Entry point SageMaker runs (``sagemaker_program``): the compiled-training runtime.

How each launcher starts it:

- one process, or ``torchrun`` (``torch_distributed``): ``python train.py``, so ``__main__``
  runs ``main()``;
- ``pytorchxla`` (the Training Compiler DLCs): AWS's ``torch_xla.distributed.xla_spawn``
  imports this file as a module by its stem, in the launcher and again in every child (its
  ``__main__`` block never runs), and calls ``_mp_fn(index)`` in each child. So importing it
  only defines names.
"""

from compiled_training_runtime.entry import main


def _mp_fn(index: int) -> None:
    """One ``pytorchxla`` replica; ``index`` is its global ordinal (the runtime reads the same
    ordinal from torch_xla)."""
    code = main()
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    raise SystemExit(main())
