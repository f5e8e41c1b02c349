"""The README's import example runs as written."""

from __future__ import annotations

import re

from tests.helpers import ROOT, SAMPLE_ENTRY_POINT


def test_readme_example_synthesizes_with_cdk_nag(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
                  if "app.synth()" in block]
    assert len(example.strip().splitlines()) <= 25
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "train.py").write_text(SAMPLE_ENTRY_POINT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)  # raises on any nag finding
    template = scope["app"].synth().get_stack_by_name("NlpTraining").template
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::SageMaker::Pipeline" in kinds


def _run_with_import_example(tmp_path, monkeypatch, marker: str) -> tuple[dict, dict]:
    """The README block containing ``marker``, added to the import example's stack before its
    app.synth(), run; returns its scope and the stack's template."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    (example,) = [b for b in blocks if "app.synth()" in b]
    (addition,) = [b for b in blocks if marker in b]
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "train.py").write_text(SAMPLE_ENTRY_POINT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    program = example.replace("app.synth()", addition + "\napp.synth()")
    scope: dict = {}
    exec(compile(program, "README.md", "exec"), scope)  # raises on any nag finding
    return scope, scope["app"].synth().get_stack_by_name("NlpTraining").template


def test_readme_benchmark_example_adds_to_the_import_example(tmp_path, monkeypatch):
    scope, template = _run_with_import_example(tmp_path, monkeypatch, "CompilerBenchmark(")
    pipelines = [r for r in template["Resources"].values()
                 if r["Type"] == "AWS::SageMaker::Pipeline"]
    assert len(pipelines) == 2
    assert scope["benchmark"].decision_parameter_name.startswith("/compiled-training/")
    # The Trainium arm, on instances of its own, priced for the comparison.
    assert list(scope["benchmark"].arms) == ["baseline", "compiler", "compiler-large-batch",
                                             "trainium"]
    assert scope["benchmark"].prices["trainium"] == 24.725
    assert scope["benchmark"].prices["baseline"] == 5.67  # the README's own price


def test_readme_registration_example_adds_to_the_import_example(tmp_path, monkeypatch):
    _, template = _run_with_import_example(tmp_path, monkeypatch, "ModelRegistration(")
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::SageMaker::ModelPackageGroup" in kinds


def test_readme_imported_pipeline_example_adds_to_the_import_example(tmp_path, monkeypatch):
    _, template = _run_with_import_example(tmp_path, monkeypatch, "from_pipeline_name(")
    rules = [r["Properties"]["EventPattern"]["detail"]["pipelineArn"]
             for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert any("pipeline/churn-sdk" in str(arn) for arn in rules)


def test_readme_trainium_example_adds_to_the_import_example_and_passes_cdk_nag(tmp_path,
                                                                               monkeypatch):
    from tests.helpers import definitions

    _, template = _run_with_import_example(tmp_path, monkeypatch, "\"BertTrn1\"")
    (trainium,) = [d for d in definitions(template)
                   if d["Steps"][0]["Arguments"]["ResourceConfig"]["InstanceType"]
                   == "ml.trn1.32xlarge"]
    assert [step["Name"] for step in trainium["Steps"]] == ["Precompile", "Train"]


def test_readme_governed_example_adds_to_the_import_example(tmp_path, monkeypatch):
    from tests.helpers import definitions

    scope, template = _run_with_import_example(tmp_path, monkeypatch, '"BertGoverned"')
    governed = scope["governed"]
    assert governed.role.role_arn == "arn:aws:iam::123456789012:role/ml-execution"
    (definition,) = [d for d in definitions(template)
                     if d["Steps"][0]["Arguments"]["RoleArn"] == governed.role.role_arn]
    assert {"Key": "cost-center", "Value": "ml-42"} in definition["Steps"][0]["Arguments"]["Tags"]


def test_readme_team_scope_example_adds_to_the_import_example(tmp_path, monkeypatch):
    _, template = _run_with_import_example(tmp_path, monkeypatch, "TeamScope(")
    resources = template["Resources"]
    team_roles = [k for k, r in resources.items() if r["Type"] == "AWS::IAM::Role"
                  and k.startswith(("CvExecution", "CvPipelines"))]
    assert len(team_roles) == 2
    (runner,) = [r for k, r in resources.items() if r["Type"] == "AWS::IAM::Policy"
                 and k.startswith("CvPipelinesDefaultPolicy")]
    creates = [s for s in runner["Properties"]["PolicyDocument"]["Statement"]
               if s["Action"] == "sagemaker:CreateTrainingJob"]
    # Once for the team, not once a pipeline.
    assert [s["Condition"] for s in creates] == [
        {"StringLike": {"aws:RequestTag/compiled-training:pipeline": "cv-*"}}]
