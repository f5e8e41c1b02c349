"""The entry point SageMaker runs: read the contract, pick the compiler's backend, train.

Training Compiler (XLA) when ``sagemaker_training_compiler_enabled`` is true,
``torch.compile`` when the library's ``COMPILED_TRAINING_TORCH_COMPILE`` says so, none (eager)
otherwise. Any bad input ends in a
clear message in ``/opt/ml/output/failure`` (what SageMaker shows as the failure reason)
and a non-zero exit.
"""

from __future__ import annotations

import json
import sys
import traceback

from . import contract
from .env import InputError, SageMakerEnv, parse_hyperparameters


def main(environ: dict[str, str] | None = None) -> int:
    env = SageMakerEnv.from_environ(environ)
    try:
        # The toolkit moves sagemaker_* hyperparameters (Training Compiler's switches among
        # them) out of SM_HPS and into SM_FRAMEWORK_PARAMS; the library's are in the environment.
        config = parse_hyperparameters({**env.framework_params, **env.hyperparameters}, environ)
        from . import backends, loop  # torch loads only once the input is known to be good

        backend = backends.create(backends.compiler_of(config, environ), config)
        cache = backend.compile_cache(environ)
        if cache is not None:
            cache.restore()  # after the process group exists: the ranks wait for it
        summary = loop.run(env, config, backend)
        if cache is not None:
            cache.save()
            summary[contract.SUMMARY_COMPILE_CACHE] = cache.summary()
    except InputError as error:
        env.write_failure(f"InputError: {error}")
        print(f"compiled-training: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        from .loop import INTERRUPTED_EXIT, Interrupted

        if isinstance(error, Interrupted):
            print(f"compiled-training: {error}", file=sys.stderr)
            return INTERRUPTED_EXIT
        env.write_failure(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
        raise
    steps = summary["steps"]
    compiles = summary["counters"].get("compiles")
    if compiles is not None and not config.static_shapes:
        print(f"compiled-training: warning: {compiles} graphs compiled for {steps} steps; "
              "varying shapes recompile, pad to max_seq_length (static_shapes=true)",
              file=sys.stderr)
    if summary["rank"] != 0:
        return 0  # one run summary per job, from the first replica
    env.output_data_dir.mkdir(parents=True, exist_ok=True)
    (env.output_data_dir / contract.RUN_SUMMARY_FILE).write_text(json.dumps(summary, indent=2,
                                                                  sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
