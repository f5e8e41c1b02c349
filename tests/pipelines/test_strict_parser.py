"""A script whose ``argparse`` would refuse what the job passes it (the toolkit hands every
hyperparameter but SageMaker's own to the script as ``--name value``) is a synth warning naming
the arguments, read with ``ast``; its twins, a parser that keeps unknown arguments or defines
them all, or one this check cannot follow, draw none. The warning is then proven right: the
script, run with the arguments the toolkit builds, exits 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk.assertions import Annotations, Match

from compiled_training import Compiler, Framework, TrainingPipeline
from tests.helpers import new_stack

STRICT = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--learning-rate", "--learning_rate", type=float, default=0.1)
args = parser.parse_args()
print(args)
"""


def _warnings(tmp_path: Path, script: str, compiler: Compiler) -> list[str]:
    (tmp_path / "train.py").write_text(script)
    stack = new_stack()
    TrainingPipeline(stack, "Clf", pipeline_name="classifier", framework=Framework.pytorch("2.14"),
                     compiler=compiler, instance_type="ml.g5.2xlarge", source_dir=str(tmp_path),
                     entry_point="train.py",
                     hyperparameters={"epochs": 3, "learning_rate": 0.01, "dropout": 0.1})
    return [str(w.entry.data) for w in
            Annotations.from_stack(stack).find_warning("*", Match.any_value())
            if "ParserRefuses" in str(w.entry.data)]


def test_a_strict_parser_is_warned_of_each_argument_it_would_refuse(tmp_path):
    (warning,) = _warnings(tmp_path, STRICT, Compiler.torch_compile())
    # Only the team's own argument: the library's switches are in the environment.
    assert "entry_point 'train.py' calls parse_args(), which stops the job on --dropout: " \
           in warning
    assert "--epochs" not in warning and "--learning_rate" not in warning
    # The warning is right: the script refuses exactly those, as the toolkit would pass them.
    result = subprocess.run([sys.executable, str(tmp_path / "train.py"), "--epochs", "3",
                             "--learning_rate", "0.01", "--dropout", "0.1"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "unrecognized arguments: --dropout 0.1" in result.stderr


@pytest.mark.parametrize("script", [
    STRICT.replace("parser.parse_args()", "parser.parse_known_args()[0]"),
    STRICT.replace('parser.add_argument("--epochs"', 'parser.add_argument("--dropout")\n'
                   'parser.add_argument("--epochs"'),
    STRICT.replace('"--epochs"', "'--' + 'epochs'"),  # computed: not followed
    "print('no parser')\n",
])
def test_a_parser_that_takes_them_or_cannot_be_read_draws_nothing(tmp_path, script):
    assert _warnings(tmp_path, script, Compiler.none()) == []


TRAINER = """
from dataclasses import dataclass
from transformers import HfArgumentParser, TrainingArguments

@dataclass
class ScriptArguments:
    dropout: float = 0.1

script, training = HfArgumentParser((ScriptArguments, TrainingArguments)).parse_args_into_dataclasses()
"""


def test_a_trainer_script_s_parser_is_warned_of_what_its_dataclasses_lack(tmp_path):
    # epochs is no field of TrainingArguments (num_train_epochs is); learning_rate is, dropout is
    # the script's own.
    (warning,) = _warnings(tmp_path, TRAINER, Compiler.torch_compile())
    assert warning.startswith("entry_point 'train.py': HfArgumentParser(ScriptArguments, "
                              "TrainingArguments) of transformers 5.24.0 stops the job on "
                              "--epochs: ")
    # Its twin names the field TrainingArguments has.
    renamed = TRAINER.replace("dropout: float", "epochs: int = 1\n    dropout: float")
    assert _warnings(tmp_path, renamed, Compiler.torch_compile()) == []
