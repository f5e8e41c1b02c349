"""Templates that release 0.2.0 synthesized (stored in ``templates-0.2.0/``: the team-app
example's, torch.compile's switch a hyperparameter then, and the reference platform's
DocumentClassification stack, Training Compiler with a Neuron arm) still read as they did: the
rule pack, through a stack that includes them, sees each step's compiler and holds it to the
same rules; the local runner starts the same launchers for them."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import cloudformation_include

from compiled_training.compilers import value_of
from compiled_training.local.training import compiles_through_xla
from compiled_training.nag.rule_pack import RULES
from compiled_training.nag.step import training_steps
from compiled_training.wiring.acknowledgements import flatten

TEMPLATES = Path(__file__).parent / "templates-0.2.0"

# Each training step: its compiler as the rule pack sees it, the rules that apply and their
# verdicts, and whether the local runner runs it through torch-xla.
READ = {
    "RankingTraining": {
        "Train": ("torch-compile", {"CT10": True, "CT15": True}, False),
    },
    "DocumentClassification": {
        "Train": ("training-compiler", {"CT1": True, "CT2": True, "CT3": True, "CT4": True,
                                        "CT8": True, "CT9": False, "CT10": True}, True),
        "TrainBaseline": ("none", {}, False),
        "TrainCompiler": ("training-compiler", {"CT1": True, "CT2": True, "CT3": True,
                                                "CT4": True, "CT8": True, "CT9": False,
                                                "CT10": True}, True),
        "PrecompileTrainium": ("neuron-xla", {"CT11": True}, True),
        "TrainTrainium": ("neuron-xla", {"CT11": True, "CT12": True}, True),
    },
}


def _steps_as_read(template: Path) -> dict[str, tuple[str, dict[str, bool], bool]]:
    stack = cdk.Stack(cdk.App(), "Released")
    included = cloudformation_include.CfnInclude(stack, "Template", template_file=str(template))
    found = {}
    for logical_id, resource in json.loads(template.read_text())["Resources"].items():
        if resource["Type"] != "AWS::SageMaker::Pipeline":
            continue
        node = included.get_resource(logical_id)
        body = stack.resolve(node.pipeline_definition)["PipelineDefinitionBody"]  # type: ignore[attr-defined]
        names = [step["Name"] for step in json.loads(flatten(body))["Steps"]
                 if step["Type"] == "Training"]
        for name, step in zip(names, training_steps(node), strict=True):
            verdicts = {rule.id: verdict for rule in RULES
                        if (verdict := rule.check(step)) is not None}
            found[name] = (value_of(step.compiler.name), verdicts,
                           compiles_through_xla(step.arguments))
    return found


@pytest.mark.parametrize("name", sorted(READ))
def test_a_0_2_0_template_reads_as_it_did(name):
    assert _steps_as_read(TEMPLATES / f"{name}.template.json") == READ[name]


def test_without_0_2_0s_switch_its_step_reads_as_eager(tmp_path):
    """The twin: the same template less torch.compile's hyperparameter reads as no compiler."""
    text = (TEMPLATES / "RankingTraining.template.json").read_text()
    switch = '\\"compiled_training_torch_compile\\":\\"true\\",'
    assert switch in text
    (tmp_path / "eager.json").write_text(text.replace(switch, ""))
    (compiler, verdicts, _), = _steps_as_read(tmp_path / "eager.json").values()
    assert (compiler, verdicts) == ("none", {})
