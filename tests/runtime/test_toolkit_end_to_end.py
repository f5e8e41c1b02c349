"""End to end: the document-classification team's synthesized training step, run through the
real sagemaker-training toolkit on a tiny BERT (random weights, nothing downloaded)."""

from __future__ import annotations

import json
import re

from compiled_training.sourcedir import build_sourcedir
from compiled_training_runtime import contract
from tests.helpers import definitions, substitute_expressions
from tests.runtime.harness import RUNTIME, TINY_BERT, opt_ml, run_with_toolkit

# The team's model is BERT-base; the test keeps its hyperparameters and shrinks the model.
TINY = {k: v for k, v in TINY_BERT.items() if k not in ("epochs", "learning_rate")}


def test_team_training_step_trains_through_the_toolkit(reference_assembly, tmp_path):
    template = reference_assembly.get_stack_by_name("DocumentClassification").template
    (definition,) = definitions(template)
    defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    step = substitute_expressions(definition["Steps"][0]["Arguments"], defaults)
    hyperparameters = dict(step["HyperParameters"])  # strings, as SageMaker passes them
    assert hyperparameters["sagemaker_training_compiler_enabled"] == "true"

    code = tmp_path / "sourcedir.tar.gz"
    code.write_bytes(build_sourcedir(RUNTIME))  # what the construct uploads
    hyperparameters.update({k: json.dumps(v) for k, v in TINY.items()})
    hyperparameters["max_steps"] = "4"
    hyperparameters["log_every"] = "2"
    hyperparameters["sagemaker_submit_directory"] = json.dumps(str(code))
    base = opt_ml(tmp_path / "opt_ml", hyperparameters, validation=8)

    result = run_with_toolkit(base)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (base / "model" / "model.pt").exists()
    assert (base / "checkpoints" / "checkpoint.pt").exists()
    summary = json.loads((base / "output" / "data" / "metrics.json").read_text())
    assert summary["backend"] == "xla" and summary["steps"] == 4
    assert (base / "output" / "success").exists()
    # SageMaker reads metrics with the regexes the construct declared in the template.
    declared = step["AlgorithmSpecification"]["MetricDefinitions"]
    logs = result.stdout + result.stderr
    for metric in declared:
        assert re.search(metric["Regex"], logs), metric["Name"]
    assert declared == contract.metric_definitions()
