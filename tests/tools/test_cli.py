"""`compiled-training advise`: the table, JSON, the plot, and bad input as one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from compiled_training.catalog.prices import ON_DEMAND_PRICES_USD
from compiled_training.tools.cli import main
from tests.helpers import ROOT

WORKLOADS = ROOT / "workloads.yaml"


def test_table_lists_verdicts_compilers_and_dollars(capsys):
    assert main(["advise", str(WORKLOADS)]) == 0
    rows = {line.split()[0]: line.split()[1:4] for line in capsys.readouterr().out.splitlines()
            if line and not line.startswith(("-", " ")) and ":" not in line.split()[0]}
    assert rows["document-classification"] == ["ENABLE", "training-compiler", "$157,538"]
    assert rows["creative"][:2] == ["BENCHMARK", "torch-compile"]
    assert rows["tabular"][:2] == ["SKIP", "none"]
    assert rows["llm-fine-tune"][:2] == ["ENABLE", "torch-compile"]


def test_json_is_for_machines(capsys):
    assert main(["advise", str(WORKLOADS), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(w["verdict"], w["compiler"]) for w in document[:4]] == [
        ("ENABLE", "training-compiler"), ("BENCHMARK", "torch-compile"), ("SKIP", "none"),
        ("SKIP", "training-compiler")]
    assert document[0]["recommended_batch_size"] == 48
    assert document[0]["deciding_factor"] == "model"


def test_an_unknown_price_is_a_row_not_an_error(tmp_path, capsys):
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOADS.read_text().replace("ml.p5.48xlarge", "ml.p5en.48xlarge"))
    assert main(["advise", str(path)]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines()
              if line.startswith("llm-fine-tune ")]
    assert row.split()[1:5] == ["ENABLE", "torch-compile", "price", "unknown"]


def test_a_prices_file_comes_before_the_table(tmp_path, capsys):
    prices = tmp_path / "prices.yaml"
    prices.write_text(f"ml.g5.48xlarge: {ON_DEMAND_PRICES_USD['ml.g5.48xlarge'] / 2}\n")
    runs = []
    for extra in ([], ["--prices", str(prices)]):
        assert main(["advise", str(WORKLOADS), "--json", *extra]) == 0
        runs.append({w["name"]: w["dollars_per_run"] for w in json.loads(capsys.readouterr().out)})
    table, given = runs
    assert given["document-classification"] == pytest.approx(table["document-classification"] / 2,
                                                             abs=0.01)
    assert given["creative"] == table["creative"]


def test_the_guide_shows_the_table_advise_prints(capsys):
    section = (ROOT / "docs" / "guides" / "decision.md").read_text()
    (shown,) = re.findall(r"```text\n(workload .*?)```", section, flags=re.S)[:1]
    assert main(["advise", str(WORKLOADS)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(shown.rstrip() + "\n\n")


def test_plot_is_a_png(tmp_path, capsys):
    target = tmp_path / "advise.png"
    assert main(["advise", str(WORKLOADS), "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("arguments", "missing", "message"), [
    (["advise", str(WORKLOADS), "--plot", "advise.png"], "matplotlib",
     "compiled-training advise: advise --plot needs matplotlib (not installed): "
     "pip install 'compiled-training[plot]'\n"),
    (["bench", "--ab"], "torch",
     "compiled-training bench: bench --ab needs torch (not installed): "
     "pip install 'compiled-training[bench]'\n"),
    (["bench", "--compilers", "none"], "transformers",
     "compiled-training bench: bench needs transformers (not installed): "
     "pip install 'compiled-training[bench]'\n"),
])
def test_fails_without_an_extra_with_one_line_naming_it(monkeypatch, tmp_path, capsys,
                                                        arguments, missing, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed
    assert main(arguments) == 2
    printed = capsys.readouterr()
    assert printed.err == message
    assert printed.out == ""  # no report before the refusal
    assert not list(tmp_path.iterdir())  # failed before writing or running anything


def test_the_installed_command_runs_without_starting_the_cdk():
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "compiled_training.tools.cli",
                             "advise", str(WORKLOADS), "--json"],
                            capture_output=True, text=True, check=True)
    assert "aws_cdk" not in result.stderr and "jsii" not in result.stderr


@pytest.mark.parametrize(("content", "message"), [
    ("workloads: [\n  - name: a\n  framework: [", r"malformed YAML at line \d+"),
    ("workloads:\n  - name: bert\n    framework: pytorch\n", r"workload 'bert': model_family, instance_type, instance_count, hours_per_run, "
     r"runs_per_week, static_shapes, precision are required$"),
    (WORKLOADS.read_text().replace("ml.m6i.12xlarge", "m6i.12xlarge"),
     r"workload 'tabular': instance_type must be a SageMaker training instance type such as "
     r"'ml.g5.48xlarge', got 'm6i.12xlarge' \(did you mean 'ml.m6i.12xlarge'\?\)$"),
    # A typo that still looks like an instance type (the README's newcomer) is not priced as
    # "unknown" and advised: CreateTrainingJob's own list refuses it.
    (WORKLOADS.read_text().replace("ml.g5.12xlarge", "ml.g5.12xlage"),
     r"workload 'creative': instance_type must be a SageMaker training instance type such as "
     r"'ml.g5.48xlarge', got 'ml.g5.12xlage' \(did you mean 'ml.g5.12xlarge'\?\)$"),
    (WORKLOADS.read_text().replace("precision: fp16", "precision: fp61", 1),
     r"workload 'document-classification': precision must be one of fp32, fp16, bf16, got "
     r"'fp61' \(did you mean 'fp16'\?\)$"),
    (WORKLOADS.read_text().replace('framework_version: "2.5"', "framework_version: 2.10"),
     r"workload 'llm-fine-tune': framework_version must be a quoted version such as "
     r"'2.10', got 2.1$"),
    # A version with no image gets no verdict: refused as a pipeline refuses it.
    (WORKLOADS.read_text().replace('framework_version: "2.5"', 'framework_version: "2.99"'),
     r"workload 'llm-fine-tune': PyTorch 2.99 has no SageMaker training image; supported "
     r"pytorch versions: 0.4.0, .*, 2.10.0, 2.11, 2.12, 2.13, 2.14$"),
    (WORKLOADS.read_text().replace('framework_version: "2.5"', 'framework_version: "2.7.0"'),
     r"workload 'llm-fine-tune': PyTorch 2.7.0 has no SageMaker training image; supported "
     r"pytorch versions: .*, 2.7.1, .*"),
    (WORKLOADS.read_text().replace('framework_version: "2.5"', 'framework_version: "2.12.1"'),
     r"workload 'llm-fine-tune': PyTorch 2.12.1 has no SageMaker training image: from 2.11 on "
     r"AWS publishes one image a minor version, .*; give '2.12'$"),
    (WORKLOADS.read_text().replace("framework: xgboost", "framework: xgbost"),
     r"workload 'tabular': framework must be one of pytorch, huggingface, tensorflow, .*, got "
     r"'xgbost' \(did you mean 'xgboost'\?\)$"),
    (WORKLOADS.read_text().replace("hours_per_run: 6.2", "hours_per_run: \"6.2\""),
     r"workload 'document-classification': hours_per_run must be a float, got str '6.2'$"),
    (WORKLOADS.read_text().replace("framework: xgboost", "framework: xgboost\n    region: eu-cental-1"),
     r"workload 'tabular': region 'eu-cental-1' has no SageMaker training image \(did you mean "
     r"'eu-central-1'\?\); regions with one: af-south-1, .*"),
    (WORKLOADS.read_text().replace("static_shapes: true", "static_shapes: 1", 1),
     r"workload 'document-classification': static_shapes must be a bool, got int 1$"),
    (WORKLOADS.read_text().replace("hours_per_run: 6.2", "hours_per_run: -6.2"),
     r"workload 'document-classification': hours_per_run must be positive, got -6.2"),
    (WORKLOADS.read_text().replace("instance_count: 8\n", "instance_count: eight\n", 1),
     r"workload 'document-classification': instance_count must be an int, got str 'eight'"),
    ("[]", r"expected a list of workloads"),
])
def test_fails_on_bad_input_with_one_line_and_exit_code_2(tmp_path, content, message):
    path = tmp_path / "w.yaml"
    path.write_text(content)
    _fails_with_one_line(["advise", str(path)], message)


@pytest.mark.parametrize("version", ["2.14", "2.14.0", "2.11"])
def test_the_newest_pytorch_versions_are_advised(tmp_path, capsys, version):
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOADS.read_text().replace('framework_version: "2.5"',
                                                  f'framework_version: "{version}"'))
    assert main(["advise", str(path), "--json"]) == 0
    (llm,) = [w for w in json.loads(capsys.readouterr().out) if w["name"] == "llm-fine-tune"]
    assert llm["compiler"] == "torch-compile"
    assert f"torch.compile: PyTorch {version} has it" in llm["reasons"]["compiler"]
    # Machines tell a price from a figure derived from AWS's claims too.
    assert {o["instance_type"]: o["claimed"] for o in llm["options"]} == {
        "ml.p5.48xlarge": False, "ml.trn1.32xlarge": True, "ml.trn2.48xlarge": True}


@pytest.mark.parametrize(("content", "message"), [
    ("ml.p5.48xlarge: free\n", r"prices.yaml: price for 'ml.p5.48xlarge' must be a positive "
                               r"number of USD per hour for an 'ml.' instance type, got 'free'$"),
    ("p5.48xlarge: 55\n", r"price for 'p5.48xlarge' must be a positive number"),
    ("- 55\n", r"prices.yaml: expected a mapping of instance type to USD per hour"),
])
def test_fails_on_a_bad_prices_file_with_one_line_and_exit_code_2(tmp_path, content, message):
    prices = tmp_path / "prices.yaml"
    prices.write_text(content)
    _fails_with_one_line(["advise", str(WORKLOADS), "--prices", str(prices)], message)


def _fails_with_one_line(arguments: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "compiled_training.tools.cli", *arguments],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(message, result.stderr), result.stderr


def test_every_help_text_reads_as_typed_without_restructuredtext_quoting():
    from compiled_training.tools.cli import command_parsers, parser

    for command in (parser(), *command_parsers().values()):
        text = command.format_help()
        assert "``" not in text, text
    assert "compiled-training: the command line." in parser().format_help()
