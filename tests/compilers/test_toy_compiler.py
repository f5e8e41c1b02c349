"""A compiler added from outside: one module (``toy/toy_jit.py``) and one entry-point line
register it, and it goes through synthesis (from the API and from cdk.json), its own synth-time
check, the rule pack's reading of a step (its own rule and the workload rules),
``compiled-training advise`` and ``compiled-training run`` with a script that reads its switch.
Its runtime backend (``toy/toy_jit_backend.py``, a second line) trains ``bench --ab``'s arms;
a second toy (``toy/toy_aot.py``) has none, and is refused there.

The toy is found through ``importlib.metadata`` as an installed package's would be: its folder
holds a ``dist-info`` and goes on ``PYTHONPATH`` of the processes that synthesize and run.
What stands in for AWS in the run is the local runner's: moto's S3 and one host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

HERE = Path(__file__).parent
DATA = "s3://toy-data/train/"
SYNTH = """
import json, sys
import aws_cdk as cdk
from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from compiled_training.compilers import compiler_names
from compiled_training.nag.rule_pack import RULES, TrainingStep
from tests.helpers import definitions

app = cdk.App(outdir=sys.argv[1])
stack = cdk.Stack(app, "Toy", env=cdk.Environment(region="ap-southeast-2"))
compiler = Compiler.named("toy-jit", level=int(sys.argv[3]))
TrainingPipeline(stack, "Toy", pipeline_name="toy-jit", framework=Framework.pytorch("2.9.0"),
                 compiler=compiler, instance_type=sys.argv[2], source_dir=sys.argv[4],
                 entry_point="train.py", channels=[InputChannel("train", sys.argv[5])])
assembly = app.synth()
template = assembly.get_stack_by_name("Toy").template
step = next(s for s in definitions(template)[0]["Steps"] if s["Type"] == "Training")
# A workload the library recorded for the step: short runs, dynamic shapes, fp32, on XGBoost's
# image; the workload and framework rules judge a registered compiler's steps as any other's.
workload = {"name": "toy", "framework": "pytorch", "model_family": "toy-net",
            "instance_type": sys.argv[2], "instance_count": 1, "hours_per_run": 0.05,
            "runs_per_week": 1, "static_shapes": False, "precision": "fp32"}
judged = TrainingStep({**step["Arguments"], "AlgorithmSpecification": {
    "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"}},
    {"workload": workload})
print(json.dumps({"names": list(compiler_names()), "describe": compiler.describe(),
                  "environment": step["Arguments"]["Environment"],
                  "rule_pack_sees": TrainingStep(step["Arguments"], {}).compiler.name,
                  "rules": [rule.id for rule in RULES],
                  "verdicts": {rule.id: rule.check(TrainingStep(step["Arguments"], {}))
                               for rule in RULES if rule.id in ("TOY1", "CT4", "CT15")},
                  "workload_verdicts": {rule.id: rule.check(judged) for rule in RULES
                                        if rule.id in ("CT5", "CT6", "CT7", "CT10")}}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE / "toy"), os.environ.get("PYTHONPATH", "")])}


def _synth(outdir: Path, instance_type: str, level: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SYNTH, str(outdir), instance_type, str(level),
                           str(HERE / "toy_script"), DATA], env=_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def _run(assembly: Path, workdir: Path, data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compiled_training.tools.cli", "run", str(assembly),
         "--pipeline", "toy-jit", "--data", f"{DATA}={data}", "--workdir", str(workdir)],
        env=_env(), capture_output=True, text=True, timeout=600, check=False)


WORKLOAD = """workloads:
  - name: toy
    framework: pytorch
    framework_version: "2.9.0"
    model_family: {family}
    instance_type: ml.g5.12xlarge
    instance_count: 1
    hours_per_run: 4
    runs_per_week: 3
    static_shapes: true
    precision: bf16
"""


def _advise(tmp_path: Path, family: str) -> dict[str, object]:
    workloads = tmp_path / f"{family}.yaml"
    workloads.write_text(WORKLOAD.format(family=family))
    result = subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "advise",
                             "--json", str(workloads)], env=_env(), capture_output=True,
                            text=True, timeout=300, check=True)
    (assessment,) = json.loads(result.stdout)
    return assessment


def test_the_advisor_asks_a_registered_compiler_about_its_own_family(tmp_path):
    toy = _advise(tmp_path, "toy-net")
    assert (toy["compiler"], toy["verdict"]) == ("toy-jit", "ENABLE")
    assert toy["reasons"]["compiler"] == "Toy JIT: built for toy-net"
    assert "the toy's own bench" in toy["reasons"]["model"]


def test_the_registered_compiler_leaves_other_families_to_the_built_in_ones(tmp_path):
    bert = _advise(tmp_path, "bert")
    assert bert["compiler"] == "torch-compile"
    assert bert["reasons"]["compiler"] == "torch.compile: PyTorch 2.9.0 has it; Training " \
        "Compiler is frozen at " + bert["reasons"]["compiler"].split("frozen at ")[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toy-data")
    (folder / "rows.csv").write_text("1,2\n3,4\n")
    return folder


def test_a_registered_compiler_synthesizes_and_the_rule_pack_recognizes_it(tmp_path):
    result = _synth(tmp_path / "cdk.out", "ml.g5.xlarge", 2)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["names"][-1] == "toy-jit" and "torch-compile" in seen["names"]
    assert seen["describe"] == "Toy JIT (level 2)"
    assert seen["environment"]["TOY_JIT_LEVEL"] == "2"
    assert not any(name.startswith("COMPILED_TRAINING_TORCH") for name in seen["environment"])
    assert seen["rule_pack_sees"] == "toy-jit"
    # Its own rule joins the pack after the built-in ones, asked of its steps alone.
    assert seen["rules"][-1] == "TOY1" and seen["rules"][0] == "CT1"
    assert seen["verdicts"] == {"TOY1": True, "CT4": None, "CT15": None}
    # CT5-CT7 and CT10 judge its step as they judge torch.compile's: each finds it wanting.
    assert seen["workload_verdicts"] == {"CT5": False, "CT6": False, "CT7": False, "CT10": False}


def test_a_registered_compilers_own_rule_finds_its_step_non_compliant(tmp_path):
    result = _synth(tmp_path / "cdk.out", "ml.g5.xlarge", 5)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["verdicts"]["TOY1"] is False


def test_a_registered_compilers_own_check_refuses_a_job_at_synth(tmp_path):
    result = _synth(tmp_path / "cdk.out", "ml.m5.xlarge", 2)
    assert result.returncode != 0
    assert "Toy JIT compiles for GPUs, got 'ml.m5.xlarge'" in result.stderr


def test_without_the_entry_point_the_name_is_refused_with_the_names_known(tmp_path):
    result = subprocess.run([sys.executable, "-c", "from compiled_training import Compiler; "
                             "Compiler.named('toy-jit')"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode != 0
    assert "'toy-jit'" in result.stderr and "torch-compile" in result.stderr


def test_a_local_run_hands_the_script_its_switch(tmp_path, data):
    assembly = tmp_path / "cdk.out"
    assert _synth(assembly, "ml.g5.xlarge", 2).returncode == 0
    run = _run(assembly, tmp_path / "work", data)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Succeeded" in run.stdout
    models = list((tmp_path / "work").rglob("model.tar.gz"))
    assert models, run.stdout


def test_a_local_run_fails_when_the_script_gets_another_level(tmp_path, data):
    assembly = tmp_path / "cdk.out"
    assert _synth(assembly, "ml.g5.xlarge", 1).returncode == 0
    run = _run(assembly, tmp_path / "work", data)
    assert run.returncode != 0
    assert "toy-jit switch missing: TOY_JIT_LEVEL='1'" in run.stdout + run.stderr
    assert "Succeeded" not in run.stdout.splitlines()[-1]


CDK_JSON_SYNTH = """
import json, sys
import aws_cdk as cdk
from app import build_app
from tests.helpers import cdk_json_context, definitions

context = cdk_json_context()
team = {k: v for k, v in context["compiled-training:teams"]["Creative"].items()
        if k != "benchmark"}
team.update(framework_version="2.9.0", compiler="toy-jit",
            compiler_options={"level": int(sys.argv[2])})
context["compiled-training:teams"] = {"Creative": team}
assembly = build_app(cdk.App(outdir=sys.argv[1], context=context)).synth()
template = assembly.get_stack_by_name("Creative").template
steps = [s for d in definitions(template) for s in d["Steps"] if s["Type"] == "Training"]
print(json.dumps([step["Arguments"]["Environment"].get("TOY_JIT_LEVEL") for step in steps]))
"""


def test_a_team_sets_a_registered_compilers_option_in_cdk_json(tmp_path):
    result = subprocess.run([sys.executable, "-c", CDK_JSON_SYNTH, str(tmp_path / "out"), "3"],
                            env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["3"]
    # The twin: an option the toy does not take is refused, naming the cdk.json key.
    wrong = subprocess.run([sys.executable, "-c", CDK_JSON_SYNTH.replace(
        '{"level": int(sys.argv[2])}', '{"speed": int(sys.argv[2])}'), str(tmp_path / "x"), "3"],
        env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert wrong.returncode != 0
    assert ("Creative: compiler_options: compiler 'toy-jit' takes the options level, got speed"
            in wrong.stderr)


def _bench_ab(tmp_path: Path, compiler: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", "bench", "--ab",
                           "--compiler", compiler, "--out", str(tmp_path / compiler)],
                          env=_env(), capture_output=True, text=True, timeout=900, check=False)


def test_bench_ab_trains_the_compiler_arms_through_its_runtime_backend(tmp_path):
    result = _bench_ab(tmp_path, "toy-jit")
    assert result.returncode in (0, 1), result.stderr  # ship or hold: either is a verdict
    comparison = json.loads((tmp_path / "toy-jit" / "comparison.json").read_text())
    trained = {arm["name"]: arm["compiler"] for arm in comparison["arms"]}
    assert trained == {"baseline": "none", "compiler": "toy-jit",
                       "compiler-large-batch": "toy-jit"}


def test_bench_ab_refuses_a_compiler_without_a_runtime_backend_in_one_line(tmp_path):
    result = _bench_ab(tmp_path, "toy-aot")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "compiled-training bench: --compiler: compiler 'toy-aot' has no runtime backend to "
        "train with; install the package that adds one (compiled_training_runtime.backends)"]
