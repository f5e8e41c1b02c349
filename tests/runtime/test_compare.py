"""The comparison step of a CompilerBenchmark, on the outputs of real CPU runs of the runtime.

Three arms train for real (eager baseline, XLA as Training Compiler runs it, XLA at twice
the batch with the learning rate scaled); their ``/opt/ml/output/data`` folders are packed as
SageMaker packs them (``output.tar.gz``). The comparison then runs exactly as the pipeline
runs it: the synthesized step's entry-point script, over the runtime package's archive,
with the synthesized arguments. Only SageMaker's own timings (``TrainingTimeInSeconds``,
``BillableTimeInSeconds``) cannot exist here: the tests supply them, and say so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from compiled_training_runtime import contract
from compiled_training_runtime.compare import (
    ArmRun,
    ComparisonError,
    Fleet,
    Thresholds,
    compare,
    main,
    to_markdown,
)
from compiled_training_runtime.local import pack_output
from tests.helpers import TINY_BERT, condition_outcome
from tests.pipelines.test_compiler_benchmark import benchmark_definition
from tests.runtime.harness import metrics, opt_ml, run_direct

XLA = {"sagemaker_training_compiler_enabled": True}
ARMS = {
    contract.ARM_BASELINE: {},
    contract.ARM_COMPILER: XLA,
    contract.ARM_COMPILER_LARGE_BATCH: {**XLA, "batch_size": 8, "base_batch_size": 4},
}


@pytest.fixture(scope="module")
def arm_outputs(tmp_path_factory):
    """Each arm's run summary, and the folder the comparison step receives them in."""
    root = tmp_path_factory.mktemp("benchmark")
    inputs = root / "processing" / "input"
    summaries = {}
    for name, overrides in ARMS.items():
        hyperparameters = {**TINY_BERT, **overrides}
        base = opt_ml(root / name, hyperparameters, train=32, validation=16)
        result = run_direct(base, hyperparameters)
        assert result.returncode == 0, result.stderr[-3000:]
        summaries[name] = metrics(base)
        # SageMaker uploads /opt/ml/output/data as <job>/output/output.tar.gz, and the
        # processing input downloads that object into input/<arm>/.
        pack_output(base, inputs / name)
    return inputs, summaries


def _synthesized_compare_step(tmp_path: Path) -> tuple[dict, dict]:
    definition = benchmark_definition(tmp_path, large_batch_size=8)
    (step,) = [s for s in definition["Steps"] if s["Name"] == "Compare"]
    (decision,) = [s for s in definition["Steps"] if s["Name"] == "ShipDecision"]
    return step, decision


def _run_compare_step(step: dict, root: Path, timings: dict[str, tuple[int, int]],
                      thresholds: dict[str, float]) -> subprocess.CompletedProcess[str]:
    """The step's container, here: its entry point and arguments, with SageMaker's timings
    (mocked: they come from AWS) and threshold parameters filled in."""
    from compiled_training.definition.sourcedir import write_sourcedir
    from compiled_training.pipelines.compiler_benchmark import RUNTIME_PACKAGE_DIR

    (root / "input" / "code").mkdir(parents=True, exist_ok=True)
    # Where SageMaker puts an S3Prefix input naming one object: under the object's own name.
    (code,) = [i["S3Input"]["S3Uri"] for i in step["Arguments"]["ProcessingInputs"]
               if i["InputName"] == "code"]
    shutil.copy(write_sourcedir(RUNTIME_PACKAGE_DIR),
                root / "input" / "code" / str(code).rpartition("/")[2])
    arguments = []
    for argument in step["Arguments"]["AppSpecification"]["ContainerArguments"]:
        if isinstance(argument, dict):
            values = argument["Std:Join"]["Values"]
            if isinstance(values[0], str) and values[0].endswith("="):
                name = values[0][:-1]
                argument = f"{name}={timings[name][0]}:{timings[name][1]}"
            else:
                parameter = values[0]["Get"].split(".")[1]
                argument = str(thresholds[parameter])
        arguments.append(argument.replace("/opt/ml/processing", str(root)))
    entrypoint = step["Arguments"]["AppSpecification"]["ContainerEntrypoint"]
    # The system's python3, not this virtualenv's: the step needs the standard library only.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PROCESSING_ROOT": str(root),
           "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([*entrypoint, *arguments], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_comparison_step_reads_real_runs_and_writes_what_the_condition_reads(arm_outputs,
                                                                              tmp_path):
    inputs, summaries = arm_outputs
    step, decision_step = _synthesized_compare_step(tmp_path)
    root = inputs.parent
    # WHEN the compiler arms finish in 800 s and 600 s against the baseline's 1000 s
    timings = {"baseline": (1000, 1000), "compiler": (800, 800),
               "compiler-large-batch": (600, 600)}
    thresholds = {"SpeedupThreshold": 0.2, "QualityTolerance": 100.0}
    result = _run_compare_step(step, root, timings, thresholds)
    assert result.returncode == 0, result.stderr
    # THEN every number comes from the arms' own run summaries and SageMaker's timings
    comparison = json.loads((root / "output" / contract.COMPARISON_JSON).read_text())
    arms = {arm["name"]: arm for arm in comparison["arms"]}
    assert list(arms) == list(ARMS)
    for name, summary in summaries.items():
        assert arms[name]["compiler"] == summary["compiler"]
        assert arms[name]["quality"] == summary["validation_accuracy"]
        assert arms[name]["samples_per_second"] == summary["samples_per_second"]
        assert arms[name]["training_seconds"] == timings[name][0]
    assert [arms[n]["compiler"] for n in ARMS] == ["none", "training-compiler", "training-compiler"]
    assert [arms[n]["global_batch_size"] for n in ARMS] == [4, 4, 8]
    # The large-batch arm's learning rate was scaled linearly by the runtime itself.
    assert arms["compiler-large-batch"]["learning_rate"] == pytest.approx(
        2 * arms["baseline"]["learning_rate"])
    assert arms["compiler"]["speedup"] == pytest.approx(0.25)
    assert arms["compiler-large-batch"]["speedup"] == pytest.approx(2 / 3)
    decision = comparison["decision"]
    assert decision["verdict"] == "ship" and decision["arm"] == "compiler-large-batch"
    assert decision["global_batch_size"] == 8
    markdown = (root / "output" / contract.COMPARISON_MARKDOWN).read_text()
    assert markdown.count("\n| ") == 1 + len(ARMS)  # header and one row per arm
    assert decision["reason"] in markdown
    assert condition_outcome(decision_step, thresholds, {"Comparison": comparison}) is True


@pytest.mark.parametrize("compiler_seconds, threshold, verdict", [
    (800, 0.25, "ship"),   # exactly at the threshold ships
    (800, 0.26, "hold"),   # just above it holds
    (1000, 0.0, "ship"),   # no faster, with no speedup asked
    (1250, 0.0, "hold"),   # slower than the baseline never ships
])
def test_speedup_threshold_on_both_sides_with_real_runs(arm_outputs, tmp_path,
                                                        compiler_seconds, threshold, verdict):
    inputs, _ = arm_outputs
    step, decision_step = _synthesized_compare_step(tmp_path)
    root = tmp_path / "processing"
    shutil.copytree(inputs, root / "input")
    timings = {"baseline": (1000, 1000), "compiler": (compiler_seconds, compiler_seconds),
               "compiler-large-batch": (2000, 2000)}
    thresholds = {"SpeedupThreshold": threshold, "QualityTolerance": 100.0}
    result = _run_compare_step(step, root, timings, thresholds)
    assert result.returncode == 0, result.stderr
    comparison = json.loads((root / "output" / contract.COMPARISON_JSON).read_text())
    assert comparison["decision"]["verdict"] == verdict
    assert comparison["decision"]["arm"] == "compiler"
    # The pipeline's own condition, evaluated on the same document, agrees with the verdict.
    assert condition_outcome(decision_step, thresholds, {"Comparison": comparison}) is (
        verdict == "ship")


def test_fails_with_a_clear_message_when_an_arm_has_no_run_summary(arm_outputs, tmp_path,
                                                                   capsys):
    inputs, _ = arm_outputs
    shutil.copytree(inputs, tmp_path / "input")
    arm = tmp_path / "input" / "compiler"
    (arm / "output.tar.gz").unlink()
    (arm / "model.pt").write_bytes(b"weights")
    with tarfile.open(arm / "model.tar.gz", "w:gz") as archive:  # an archive, but no summary
        archive.add(arm / "model.pt", arcname="model.pt")
    (arm / "model.pt").unlink()
    arguments = ["--input-dir", str(tmp_path / "input"), "--output-dir", str(tmp_path / "out"),
                 "--arm", "baseline=10:10", "--arm", "compiler=8:8"]
    assert main(arguments) == 2
    assert not (tmp_path / "out").exists()
    assert re.search(r"no metrics.json in .*/input/compiler \(found: model.tar.gz\); did the "
                     r"arm's training job run the compiled-training runtime\?",
                     capsys.readouterr().err)
    (arm / "model.tar.gz").write_bytes(b"")  # a truncated upload
    assert main(arguments) == 2
    assert re.search(r"model.tar.gz is not a readable tar.gz archive", capsys.readouterr().err)


def test_fails_on_a_malformed_arm_argument(capsys, tmp_path):
    assert main(["--input-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                 "--arm", "baseline=ten:10"]) == 2
    assert "--arm must be NAME=TRAINING_SECONDS:BILLABLE_SECONDS, got 'baseline=ten:10'" in (
        capsys.readouterr().err)


def test_an_arms_precompilation_adds_to_its_time(arm_outputs, tmp_path):
    inputs, _ = arm_outputs
    out = tmp_path / "out"
    assert main(["--input-dir", str(inputs), "--output-dir", str(out),
                 "--arm", "baseline=100:100", "--arm", "compiler=50:50",
                 "--precompile", "compiler=30:30"]) in (0, 2)
    comparison = json.loads((out / contract.COMPARISON_JSON).read_text())
    compiler = next(arm for arm in comparison["arms"] if arm["name"] == "compiler")
    assert (compiler["training_seconds"], compiler["billable_seconds"]) == (80.0, 80.0)
    assert compiler["speedup"] == pytest.approx(0.25)


def test_fails_on_a_malformed_fleet_argument(capsys, tmp_path):
    assert main(["--input-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                 "--arm", "baseline=10:10", "--fleet", "baseline=ml.g5.12xlarge:0:7.09"]) == 2
    assert ("--fleet must be NAME=INSTANCE_TYPE:COUNT:USD_PER_INSTANCE_HOUR (USD may be "
            "'unknown'), got 'baseline=ml.g5.12xlarge:0:7.09'") in capsys.readouterr().err


def test_fails_when_the_runs_had_no_validation_channel(tmp_path, capsys):
    for name in ("baseline", "compiler"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(
            {"compiler": "none", "global_batch_size": 4, "learning_rate": 0.001,
             "samples_per_second": 10.0}))
    assert main(["--input-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                 "--arm", "baseline=10:10", "--arm", "compiler=8:8"]) == 2
    assert re.search(r"arm 'baseline': the run summary lacks validation_accuracy; "
                     r"validation_accuracy needs a validation channel", capsys.readouterr().err)


# --- the decision alone, on both sides of each threshold ----------------------------------

def _run(name: str, seconds: float, accuracy: float, batch: int = 32, *, epochs: float = 1.0,
         fleet: Fleet | None = None) -> ArmRun:
    return ArmRun(name=name, compiler="none" if name == "baseline" else "training-compiler",
                  global_batch_size=batch, learning_rate=5e-5 * batch / 32,
                  samples_per_second=1000.0 / seconds, quality=accuracy,
                  training_seconds=seconds, billable_seconds=seconds, epochs=epochs,
                  fleet=fleet)


# --- arms on other instances: judged by cost per epoch --------------------------------------

# Prices as a CompilerBenchmark passes them (USD per instance-hour); round numbers so that
# the arithmetic below is exact: the baseline's epoch costs 2 x 3600 s x $9 / 3600 = $18.
GPU = Fleet("ml.g5.12xlarge", 2, 9.0)


def test_a_slower_arm_on_cheaper_instances_ships_on_cost_per_epoch():
    trainium = _run("trainium", 4800, 0.9, fleet=Fleet("ml.trn1.32xlarge", 1, 10.0))
    comparison = compare([_run("baseline", 3600, 0.9, fleet=GPU), trainium], Thresholds())
    arm = comparison["arms"][1]
    # 4800 s x 1 x $10 / 3600 = $13.33 an epoch against $18: 35 % more epochs per dollar,
    # although it is 25 % slower in wall-clock time.
    assert arm["cost_per_epoch"] == pytest.approx(13.3333, rel=1e-4)
    assert arm["speedup"] == pytest.approx(-0.25)
    assert arm["gain"] == arm["cost_gain"] == pytest.approx(0.35)
    decision = comparison["decision"]
    assert (decision["verdict"], decision["arm"], decision["basis"]) == ("ship", "trainium",
                                                                         "cost")
    assert (decision["instance_type"], decision["instance_count"]) == ("ml.trn1.32xlarge", 1)
    assert decision["reason"] == (
        "ship: trainium on 1 x ml.trn1.32xlarge trains 35.0% more epochs per dollar ($13.33 an "
        "epoch) than the baseline (threshold 20%) and loses 0 points of validation_accuracy "
        "(tolerance 0.1 points)")
    table = to_markdown(comparison)
    assert "| trainium | 1 x ml.trn1.32xlarge | training-compiler |" in table
    assert "| 4800.0 | 13.33 | 0.9000 | -25.0% | +35.0% |" in table


def test_a_faster_arm_on_dearer_instances_holds_on_cost_per_epoch():
    dear = _run("trainium", 1800, 0.9, fleet=Fleet("ml.trn1.32xlarge", 4, 10.0))
    decision = compare([_run("baseline", 3600, 0.9, fleet=GPU), dear], Thresholds())["decision"]
    # Twice as fast, but 1800 s x 4 x $10 / 3600 = $20 an epoch against $18.
    assert decision["speedup"] == pytest.approx(1.0)
    assert decision["gain"] == pytest.approx(-0.1)
    assert decision["verdict"] == "hold"
    assert decision["reason"].startswith(
        "hold (too costly): trainium on 4 x ml.trn1.32xlarge trains 10.0% fewer epochs per dollar "
        "($20.00 an epoch)")


def test_an_arm_on_the_baselines_instances_is_judged_by_time_per_epoch():
    # Two epochs in 1.5 times the baseline's one: 0.75 of its time an epoch, 33 % faster.
    arm = _run("compiler", 5400, 0.9, epochs=2.0, fleet=GPU)
    decision = compare([_run("baseline", 3600, 0.9, fleet=GPU), arm], Thresholds())["decision"]
    assert (decision["basis"], decision["verdict"]) == ("wall-clock", "ship")
    assert decision["gain"] == decision["speedup"] == pytest.approx(1 / 3)


def test_an_arm_on_other_instances_without_a_price_is_refused():
    unpriced = _run("trainium", 1800, 0.9, fleet=Fleet("ml.trn2.48xlarge", 1, None))
    with pytest.raises(ComparisonError, match=re.escape(
            "arm 'trainium' runs on 1 x ml.trn2.48xlarge and the baseline on 2 x "
            "ml.g5.12xlarge: comparing them needs both prices")):
        compare([_run("baseline", 3600, 0.9, fleet=GPU), unpriced], Thresholds())


# Accuracies a power of two apart, so that the point arithmetic is exact.
@pytest.mark.parametrize("accuracy, tolerance, verdict", [
    (0.5, 0.0, "ship"),                # no loss at all
    (0.515625, 0.0, "ship"),           # a gain
    (0.498046875, 0.1953125, "ship"),  # 0.1953125 points lost, exactly the tolerance
    (0.498046875, 0.1, "hold"),        # the same loss, tolerance 0.1
])
def test_quality_tolerance_on_both_sides(accuracy, tolerance, verdict):
    comparison = compare([_run("baseline", 1000, 0.5), _run("compiler", 500, accuracy)],
                         Thresholds(speedup=0.2, quality_tolerance=tolerance))
    assert comparison["decision"]["verdict"] == verdict
    if verdict == "hold":
        assert comparison["decision"]["reason"].startswith("hold (quality lost): compiler is ")


def test_validation_loss_counts_a_rise_as_lost_quality():
    thresholds = Thresholds(speedup=0.2, quality_tolerance=0.01, quality_metric="validation_loss")
    better = compare([_run("baseline", 1000, 0.5), _run("compiler", 500, 0.5)], thresholds)
    worse = compare([_run("baseline", 1000, 0.5), _run("compiler", 500, 0.53125)], thresholds)
    assert better["decision"]["verdict"] == "ship"
    assert worse["decision"]["quality_drop"] == pytest.approx(0.03125)
    assert worse["decision"]["verdict"] == "hold"


def test_the_fastest_arm_that_keeps_quality_is_chosen_and_a_fast_lossy_one_is_not():
    comparison = compare([
        _run("baseline", 1000, 0.90),
        _run("compiler", 750, 0.90),
        _run("compiler-large-batch", 600, 0.80, batch=48),  # fastest, 10 points worse
    ], Thresholds())
    decision = comparison["decision"]
    assert decision["verdict"] == "ship" and decision["arm"] == "compiler"
    assert decision["global_batch_size"] == 32


def test_hold_names_the_closest_arm_and_every_threshold_it_missed():
    comparison = compare([_run("baseline", 1000, 0.90), _run("compiler", 1000, 0.80)],
                         Thresholds())
    assert comparison["decision"]["reason"] == (
        "hold (too slow, quality lost): compiler is 0.0% faster than the baseline (threshold "
        "20%) and loses 10 points of validation_accuracy (tolerance 0.1 points)")
    assert "| compiler | - | training-compiler | 32 |" in to_markdown(comparison)


def test_fails_without_a_baseline_arm():
    with pytest.raises(Exception, match=r"a comparison needs the 'baseline' arm and at least "
                                        r"one other, got \['compiler'\]"):
        compare([_run("compiler", 500, 0.9)], Thresholds())


def test_fails_on_an_unknown_quality_metric():
    with pytest.raises(ValueError, match=r"quality_metric must be one of validation_accuracy, "
                                         r"validation_loss, got 'bleu'"):
        Thresholds(quality_metric="bleu")
