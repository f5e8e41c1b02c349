"""Mistakes a team makes with its own script and roles, each told at synth: a role of another
account (an error where both accounts are known, a warning where the stack's is not), spot
training whose script never checkpoints (an acknowledgeable warning), each with its twin that
draws nothing."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match

from compiled_training import Compiler, Framework, InputChannel, TrainingPipeline
from tests.helpers import ACCOUNT, new_stack

OTHER = "210987654321"


def _pipeline(stack: cdk.Stack, source: Path, **props: object) -> TrainingPipeline:
    return TrainingPipeline(
        stack, "Clf", pipeline_name="classifier", framework=Framework.pytorch("2.14"),
        compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
        source_dir=str(source), entry_point="train.py",
        channels=[InputChannel("train", "s3://team-data/clf/train/")], **props)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


@pytest.mark.parametrize("prop", ["role", "pipeline_role"])
def test_a_role_of_another_account_is_refused_naming_both(script, prop):
    stack = new_stack()
    role = iam.Role.from_role_arn(stack, "Given", f"arn:aws:iam::{OTHER}:role/team-training")
    with pytest.raises(ValueError, match=rf"^TrainingPipeline Team/Clf: {prop} "
                                         rf"arn:aws:iam::{OTHER}:role/team-training is a role of "
                                         rf"account {OTHER}, and the stack deploys to {ACCOUNT}: "
                                         r"SageMaker runs only roles of the caller's account "
                                         rf"\(iam:PassRole\), so give one of {ACCOUNT}$"):
        _pipeline(stack, script, **{prop: role})


def test_a_role_of_the_stacks_account_or_made_here_is_taken(script):
    stack = new_stack()
    given = iam.Role.from_role_arn(stack, "Given", f"arn:aws:iam::{ACCOUNT}:role/team-training")
    _pipeline(stack, script, role=given)
    made = iam.Role(stack, "Made", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    TrainingPipeline(stack, "Other", pipeline_name="other", framework=Framework.pytorch("2.14"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.2xlarge",
                     source_dir=str(script), entry_point="train.py", role=made)
    assert not any("RoleAccount" in str(w.entry.data) for w in
                   Annotations.from_stack(stack).find_warning("*", Match.any_value()))


def test_an_environment_agnostic_stack_warns_of_a_roles_account(script):
    stack = new_stack(env=None)
    role = iam.Role.from_role_arn(stack, "Given", f"arn:aws:iam::{OTHER}:role/team-training")
    _pipeline(stack, script, role=role)
    (warning,) = [w for w in Annotations.from_stack(stack).find_warning("*", Match.any_value())
                  if "RoleAccount" in str(w.entry.data)]
    assert f"role arn:aws:iam::{OTHER}:role/team-training is a role of account {OTHER}, and " \
           "this stack's account is known only at deployment" in str(warning.entry.data)


@pytest.mark.parametrize(("code", "warned"), [
    ("print('training')\n", True),
    ("import os\nCHECKPOINTS = '/opt/ml/checkpoints'\n", False),
    ("import os\nfolder = os.environ['COMPILED_TRAINING_CHECKPOINT_DIR']\n", False),
    ("from compiled_training_runtime import entry\n", False),
])
def test_spot_without_checkpoints_warns_of_what_an_interruption_costs(tmp_path, code, warned):
    (tmp_path / "train.py").write_text(code)
    stack = new_stack()
    _pipeline(stack, tmp_path, spot=True)
    found = [w for w in Annotations.from_stack(stack).find_warning("*", Match.any_value())
             if "SpotWithoutCheckpoints" in str(w.entry.data)]
    assert len(found) == int(warned)
    if warned:
        assert "an interruption restarts the job from step 0" in str(found[0].entry.data)


def test_a_checkpointing_module_beside_the_script_counts(tmp_path):
    (tmp_path / "train.py").write_text("import saving\n")
    (tmp_path / "saving.py").write_text("FOLDER = '/opt/ml/checkpoints'\n")
    stack = new_stack()
    _pipeline(stack, tmp_path, spot=True)
    assert not [w for w in Annotations.from_stack(stack).find_warning("*", Match.any_value())
                if "SpotWithoutCheckpoints" in str(w.entry.data)]
