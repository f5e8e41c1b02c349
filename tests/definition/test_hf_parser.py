"""A Hugging Face ``Trainer`` script's ``HfArgumentParser``, read at synth: which of the job's
arguments it would refuse. The real parser is the oracle: transformers in the newest PyTorch
image's environment parses every generated case, and the synth's verdict must match it; the
catalog the synth reads is held to that environment's classes."""

from __future__ import annotations

import json
import random
import subprocess
import textwrap

from compiled_training.catalog.training_arguments import argument_fields, transformers_version
from compiled_training.definition.trainer_script import _parser_refuses
from scripts.training_arguments import TARGET, catalog_text
from tests.environments import NEWEST_GPU_IMAGE, require

# The scripts a team writes: its own dataclass beside TrainingArguments, a subclass of it, and
# Seq2SeqTrainingArguments named through the module.
SCRIPTS = {
    "own-dataclass": """
        from dataclasses import dataclass, field
        from transformers import HfArgumentParser, TrainingArguments

        @dataclass
        class ScriptArguments:
            model_name: str = "tiny-bert"
            max_seq_length: int = 128
            use_lora: bool = True
            label_column: str = field(default="label")

        def main():
            parser = HfArgumentParser((ScriptArguments, TrainingArguments))
            script, training = parser.parse_args_into_dataclasses()
        """,
    "subclass": """
        from dataclasses import dataclass
        from transformers import HfArgumentParser, TrainingArguments

        @dataclass
        class DistillArguments(TrainingArguments):
            temperature: float = 2.0
            distill: bool = False

        def main():
            (arguments,) = HfArgumentParser(DistillArguments).parse_args_into_dataclasses()
        """,
    "seq2seq": """
        import transformers

        def main():
            parser = transformers.HfArgumentParser([transformers.Seq2SeqTrainingArguments])
            (arguments,) = parser.parse_args_into_dataclasses()
        """,
}
OWN = {"own-dataclass": ["model_name", "max_seq_length", "use_lora", "label_column"],
       "subclass": ["temperature", "distill"], "seq2seq": []}
UNKNOWN = ["epochs", "lr", "batch_size", "model", "train_dir", "seed_value"]
# Runs in the environment: each case's script defined afresh, its main() called with the
# case's arguments as SageMaker's toolkit passes them (--name value); prints each outcome.
DRIVER = """
import contextlib, io, json, sys
outcomes = []
for source, names in json.load(sys.stdin):
    namespace = {"__name__": "case"}
    exec(compile(source, "train.py", "exec"), namespace)
    sys.argv = ["train.py", *[part for name in names for part in ("--" + name, "1")]]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace["main"]()
        outcomes.append("accepted")
    except Exception as error:  # an unknown argument; or the names parsed, and then the
        # values or the machine refused (this environment has no accelerate)
        outcomes.append("refused" if "not used by the HfArgumentParser" in str(error)
                        else "accepted")
    except SystemExit:  # argparse: an ambiguous abbreviation, or a value of the wrong type
        outcomes.append("refused" if "ambiguous option" in stderr.getvalue() else "accepted")
print(json.dumps(outcomes))
"""


def _misspelt(name: str, rng: random.Random) -> str:
    at = rng.randrange(1, len(name) - 1)
    return name[:at] + name[at + 1:]


def generated_cases() -> list[tuple[str, list[str]]]:
    """Known fields (as written, hyphenated, abbreviated), the script's own, misspelt and
    unknown names, negated booleans, and mixes; derandomized."""
    rng = random.Random(53)
    fields, true_booleans = argument_fields("TrainingArguments") or (frozenset(), frozenset())
    known = sorted(fields)
    cases: list[tuple[str, list[str]]] = []
    for script in SCRIPTS:
        picks = rng.sample(known, 4)
        cases += [(script, [name]) for name in picks]
        cases += [(script, [picks[0].replace("_", "-")]), (script, [_misspelt(picks[1], rng)])]
        cases += [(script, [name]) for name in OWN[script][:2]]
        cases += [(script, [rng.choice(UNKNOWN)]), (script, ["torch_compile", "torch_compile_mode"])]
        cases += [(script, ["num_train"]), (script, ["num"]), (script, ["per_device_train"])]
        cases += [(script, [f"no_{sorted(true_booleans)[0]}"]), (script, [picks[2], "epochs"])]
    cases.append(("own-dataclass", ["no_use_lora"]))
    cases.append(("seq2seq", ["predict_with_generate", "generation_max_length"]))
    return cases


def test_the_catalog_is_the_newest_image_s_transformers():
    python = str(require(NEWEST_GPU_IMAGE).executable)
    assert catalog_text(python) == TARGET.read_text(), (
        "catalog/training-arguments.json is not this environment's transformers: run "
        "make training-arguments")
    assert transformers_version() == json.loads(TARGET.read_text())["transformers"]


def test_the_synth_refuses_what_the_real_parser_refuses():
    python = str(require(NEWEST_GPU_IMAGE).executable)
    cases = generated_cases()
    sources = {name: textwrap.dedent(source) for name, source in SCRIPTS.items()}
    found = subprocess.run([python, "-c", DRIVER], input=json.dumps(
        [(sources[script], names) for script, names in cases]), capture_output=True, text=True,
        timeout=600)
    assert found.returncode == 0, found.stderr[-3000:]
    real = json.loads(found.stdout.strip().splitlines()[-1])
    synth = []
    for script, names in cases:
        verdict = _parser_refuses(sources[script].encode(), tuple(names))
        assert verdict is not None, (script, names)  # every script is read
        synth.append("refused" if verdict[0] else "accepted")
    differing = [(case, r, s) for case, r, s in zip(cases, real, synth, strict=True)
                 if r != s]
    assert differing == [], "\n".join(map(str, differing))
    assert len(cases) >= 20
    assert 5 <= real.count("refused") <= len(cases) - 5  # both outcomes, well represented


def test_a_parser_that_keeps_what_it_does_not_know_is_not_judged():
    source = textwrap.dedent(SCRIPTS["own-dataclass"]).replace(
        "parse_args_into_dataclasses()", "parse_args_into_dataclasses(return_remaining_strings=True)")
    assert _parser_refuses(source.encode(), ("epochs",)) is None
    imported = "from team.arguments import ScriptArguments\n" + textwrap.dedent(
        SCRIPTS["own-dataclass"]).split("@dataclass")[0] + "\ndef main():\n    HfArgumentParser(" \
        "(ScriptArguments, TrainingArguments)).parse_args_into_dataclasses()\n"
    assert _parser_refuses(imported.encode(), ("epochs",)) is None  # a class not read here
    assert _parser_refuses(textwrap.dedent(SCRIPTS["subclass"]).encode(), ("epochs",)) == (
        ["epochs"], ["DistillArguments"])
    # A list of its own to parse, not the command line: not judged.
    own_list = source.replace("parse_args_into_dataclasses(return_remaining_strings=True)",
                              "parse_args_into_dataclasses(args=['--model_name', 'x'])")
    assert _parser_refuses(own_list.encode(), ("epochs",)) is None
    # A field the parser skips (init=False) is no option of it.
    hidden = textwrap.dedent(SCRIPTS["own-dataclass"]).replace(
        'label_column: str = field(default="label")',
        'label_column: str = field(default="label", init=False)')
    assert _parser_refuses(hidden.encode(), ("label_column",)) == (
        ["label_column"], ["ScriptArguments", "TrainingArguments"])
