"""What the synth reads in a team's script about the job it is given, on a plain job: the old
switches it still reads, a Hugging Face Trainer script's arguments, and which jobs run behind
the warm start's launcher. Each warning has its twin that draws none."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from compiled_training import Compiler, Distribution, Framework
from compiled_training.definition import compile_cache
from compiled_training.definition.script_checks import script_warnings
from compiled_training.definition.trainer_script import TrainerScript, trainer_script
from compiled_training.definition.training import build_definition
from compiled_training.values.job import TrainingJob
from compiled_training_runtime import contract

PARSED = """
from transformers import HfArgumentParser, Trainer, TrainingArguments
(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
Trainer(model=None, args=args)
"""
IN_CODE = """
from transformers import Trainer, TrainingArguments
Trainer(model=None, args=TrainingArguments(output_dir="/opt/ml/model", max_steps=10))
"""
OLD_SWITCHES = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--compiled_training_torch_compile", default="false")
args, _ = parser.parse_known_args()
compiled = args.compiled_training_torch_compile == "true"
"""
NEW_SWITCHES = """
import os
compiled = os.environ.get("COMPILED_TRAINING_TORCH_COMPILE") == "true"
"""


def _job(tmp_path: Path, script: str, **changes) -> TrainingJob:
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    job = TrainingJob(
        pipeline_name="team", framework=Framework.pytorch("2.9.0"),
        compiler=Compiler.torch_compile(), distribution=Distribution.NONE,
        instance_type="ml.g5.2xlarge", instance_count=1, volume_size_gib=30,
        max_runtime_seconds=3600, image_uri="", role_arn="arn:aws:iam::111122223333:role/r",
        region="eu-west-1", output_s3_uri="s3://b/team/output", entry_point="train.py",
        source_s3_uri="s3://b/code/sourcedir.tar.gz", source_dir=tmp_path,
        torch_compile_cache_s3_uri="s3://b/team/compile-cache/")
    return replace(job, **changes)


def _rules(job: TrainingJob) -> list[str]:
    return [rule for rule, _ in script_warnings(job)]


def _arguments(job: TrainingJob) -> dict:
    return build_definition(job)["Steps"][0]["Arguments"]


def test_a_script_reading_the_old_switches_is_warned_that_it_now_runs_eager(tmp_path):
    ((rule, message),) = script_warnings(_job(tmp_path, OLD_SWITCHES))
    assert rule == "ReadsOldSwitches"
    assert message == ("entry_point 'train.py' reads compiled_training_torch_compile, which arrive "
                       "as environment variables now (COMPILED_TRAINING_TORCH_COMPILE), so it "
                       "trains eager; read os.environ (docs/guides/runtime.md)")
    # The warning is right: run with what the job passes, the script finds it off.
    result = subprocess.run([sys.executable, "-c", OLD_SWITCHES + "print(compiled)"],
                            env={"COMPILED_TRAINING_TORCH_COMPILE": "true"},
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("compiler", [Compiler.none(), Compiler.training_compiler()],
                         ids=["eager", "training-compiler"])
def test_old_switches_read_on_a_pipeline_without_them_draw_nothing(tmp_path, compiler):
    assert _rules(_job(tmp_path, OLD_SWITCHES, compiler=compiler)) == []


def test_a_script_reading_the_environment_draws_nothing(tmp_path):
    assert _rules(_job(tmp_path, NEW_SWITCHES)) == []
    result = subprocess.run([sys.executable, "-c", NEW_SWITCHES + "print(compiled)"],
                            env={**_arguments(_job(tmp_path, NEW_SWITCHES))["Environment"]},
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize(("script", "kind"), [
    (PARSED, TrainerScript.PARSED),
    (PARSED.replace("TrainingArguments", "Seq2SeqTrainingArguments"), TrainerScript.PARSED),
    (IN_CODE, TrainerScript.IN_CODE),
    # Its own dataclasses parsed, TrainingArguments built in code: the job's switches would be
    # arguments its strict parser refuses, so none are given.
    (IN_CODE + "from transformers import HfArgumentParser\n"
               "from dataclasses import dataclass\n@dataclass\nclass Model:\n    size: int = 1\n"
               "(model,) = HfArgumentParser(Model).parse_args_into_dataclasses()\n",
     TrainerScript.IN_CODE),
    (IN_CODE.replace("max_steps=10", "max_steps=10, torch_compile=True"), None),  # its own
    (NEW_SWITCHES, None),
    ("def broken(:\n", None),
])
def test_how_a_trainer_script_makes_its_arguments(tmp_path, script, kind):
    (tmp_path / "train.py").write_text(script)
    assert trainer_script("train.py", tmp_path) is kind


def test_a_parsed_trainer_script_gets_torch_compiles_switches_as_training_arguments_takes_them(
        tmp_path):
    job = _job(tmp_path, PARSED, compiler=Compiler.torch_compile(mode="max-autotune"))
    hyperparameters = _arguments(job)["HyperParameters"]
    assert (hyperparameters["torch_compile"], hyperparameters["torch_compile_mode"]) == (
        "true", '"max-autotune"')
    assert _rules(job) == []
    # What the team sets itself stays.
    own = replace(job, hyperparameters={"torch_compile_mode": "reduce-overhead"})
    assert _arguments(own)["HyperParameters"]["torch_compile_mode"] == '"reduce-overhead"'


@pytest.mark.parametrize("changes", [{"compiler": Compiler.none()},
                                     {"instance_type": "ml.trn2.48xlarge"}],
                         ids=["eager", "trainium"])
def test_a_trainer_script_not_compiled_with_inductor_gets_no_switches(tmp_path, changes):
    job = _job(tmp_path, PARSED, **changes)
    assert "torch_compile" not in _arguments(job)["HyperParameters"]


def test_a_trainer_built_in_code_is_warned_it_will_not_read_them(tmp_path):
    ((rule, message),) = script_warnings(_job(tmp_path, IN_CODE))
    assert rule == "TrainerIgnoresSwitches" and "trains eager; pass torch_compile=True" in message
    assert "torch_compile" not in _arguments(_job(tmp_path, IN_CODE))["HyperParameters"]
    assert _rules(_job(tmp_path, IN_CODE, compiler=Compiler.none())) == []  # the twin


@pytest.mark.parametrize(("changes", "launched"), [
    ({}, True),
    ({"distribution": Distribution.TORCH_DISTRIBUTED, "instance_type": "ml.g5.12xlarge"}, True),
    ({"torch_compile_cache_s3_uri": None}, False),
    ({"network_isolation": True}, False),
    ({"framework": Framework.pytorch("2.3.0")}, False),
    ({"compiler": Compiler.none()}, False),
    ({"source_dir": None}, False),                    # code not packaged here
    ({"entry_point": "train.sh"}, False),
])
def test_which_jobs_run_behind_the_launcher(tmp_path, changes, launched):
    job = _job(tmp_path, NEW_SWITCHES, **changes)
    assert compile_cache.plan(job).launched is launched
    arguments = _arguments(job)
    assert (arguments["HyperParameters"]["sagemaker_program"] == f'"{contract.LAUNCHER}"') is \
        launched
    assert (arguments.get("Environment", {}).get(contract.ENV_ENTRY_POINT) == job.entry_point) \
        is launched


def test_a_script_that_imports_the_runtime_keeps_control(tmp_path):
    job = _job(tmp_path, "from compiled_training_runtime.warm_start import compile_cache\n")
    assert not compile_cache.plan(job).launched
    assert _arguments(job)["HyperParameters"]["sagemaker_program"] == '"train.py"'


@pytest.mark.parametrize(("made", "why"), [
    ("compiled_training_runtime/__init__.py", "holds a compiled_training_runtime folder"),
    # The toolkit runs a package's entry point as `python -m <program>`: the launcher's path
    # would be no module name.
    ("setup.py", "holds a setup.py (the toolkit runs its entry point with python -m)"),
])
def test_a_source_dir_the_launcher_cannot_front_gets_none_and_a_warning(tmp_path, made, why):
    (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / made).write_text("")
    job = _job(tmp_path, NEW_SWITCHES)
    assert not compile_cache.plan(job).launched
    assert _arguments(job)["HyperParameters"]["sagemaker_program"] == '"train.py"'
    ((rule, message),) = script_warnings(job)
    assert rule == "CompileCacheUnused" and why in message


def test_a_request_decides_its_compile_cache_once_and_every_section_reads_it(tmp_path,
                                                                           monkeypatch):
    from compiled_training.definition.training import training_job_arguments

    job = _job(tmp_path, PARSED)
    planned = []
    plan = compile_cache.plan
    monkeypatch.setattr(compile_cache, "plan", lambda j: planned.append(j) or plan(j))
    arguments = training_job_arguments(job)
    assert planned == [job]
    # What the one plan decided reached the sections that read it: the launcher's entry point,
    # its cache prefix, and the Trainer's own switch.
    assert arguments["HyperParameters"]["sagemaker_program"] == f'"{contract.LAUNCHER}"'
    assert arguments["HyperParameters"]["torch_compile"] == "true"
    assert arguments["Environment"][contract.ENV_COMPILE_CACHE_URL] == (
        "s3://b/team/compile-cache/Train/")
