"""What the guides' examples build: each addition, run inside the full example of "In your own
CDK app" (`test_examples.py` runs every block; these read what a few of them make)."""

from __future__ import annotations

from tests.docs.blocks import base_example, block_with
from tests.docs.test_examples import run_addition, run_program
from tests.helpers import definitions


def _template(scope: dict) -> dict:
    return scope["app"].synth().get_stack_by_name("NlpTraining").template


def test_the_full_example_is_short_and_makes_a_pipeline(tmp_path, monkeypatch):
    example = base_example()
    assert example.path.name == "your-own-app.md"
    assert len(example.code.strip().splitlines()) <= 25
    kinds = {r["Type"] for r in _template(run_program(example.code, tmp_path,
                                                      monkeypatch))["Resources"].values()}
    assert "AWS::SageMaker::Pipeline" in kinds


def test_the_benchmark_example_runs_its_trainium_arm_priced(tmp_path, monkeypatch):
    scope = run_addition(block_with('"BertCompilerTrial"'), tmp_path, monkeypatch)
    pipelines = [r for r in _template(scope)["Resources"].values()
                 if r["Type"] == "AWS::SageMaker::Pipeline"]
    assert len(pipelines) == 2
    assert scope["benchmark"].decision_parameter_name.startswith("/compiled-training/")
    assert list(scope["benchmark"].arms) == ["baseline", "compiler", "compiler-large-batch",
                                             "trainium"]
    assert scope["benchmark"].prices["trainium"] == 24.725
    assert scope["benchmark"].prices["baseline"] == 5.67  # the guide's own price


def test_the_registration_example_makes_a_model_package_group(tmp_path, monkeypatch):
    scope = run_addition(block_with('"BertRegistered"'), tmp_path, monkeypatch)
    kinds = {r["Type"] for r in _template(scope)["Resources"].values()}
    assert "AWS::SageMaker::ModelPackageGroup" in kinds


def test_the_own_metric_example_gates_on_f1(tmp_path, monkeypatch):
    scope = run_addition(block_with("MetricDefinition(\"f1\""), tmp_path, monkeypatch)
    (classifier,) = [d for d in definitions(_template(scope))
                     if d["Steps"][0]["Arguments"]["AlgorithmSpecification"].get(
                         "MetricDefinitions") == [{"Name": "f1", "Regex": r"F1 score: ([0-9.]+)"}]]
    gate = next(step for step in classifier["Steps"] if step["Type"] == "Condition")
    assert gate["Arguments"]["Conditions"][0]["LeftValue"] == {
        "Get": "Steps.Train.FinalMetricDataList['f1'].Value"}


def test_the_imported_pipeline_example_watches_its_runs(tmp_path, monkeypatch):
    scope = run_addition(block_with("from_pipeline_name("), tmp_path, monkeypatch)
    rules = [r["Properties"]["EventPattern"]["detail"]["pipelineArn"]
             for r in _template(scope)["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert any("pipeline/churn-sdk" in str(arn) for arn in rules)


def test_the_trainium_example_precompiles_then_trains(tmp_path, monkeypatch):
    scope = run_addition(block_with('"BertTrn1"'), tmp_path, monkeypatch)
    (trainium,) = [d for d in definitions(_template(scope))
                   if d["Steps"][0]["Arguments"]["ResourceConfig"]["InstanceType"]
                   == "ml.trn1.32xlarge"]
    assert [step["Name"] for step in trainium["Steps"]] == ["Precompile", "Train"]


def test_the_governed_example_runs_as_the_given_roles_with_its_tags(tmp_path, monkeypatch):
    scope = run_addition(block_with('"BertGoverned"'), tmp_path, monkeypatch)
    governed = scope["governed"]
    assert governed.role.role_arn == "arn:aws:iam::123456789012:role/ml-execution"
    (definition,) = [d for d in definitions(_template(scope))
                     if d["Steps"][0]["Arguments"]["RoleArn"] == governed.role.role_arn]
    assert {"Key": "cost-center", "Value": "ml-42"} in definition["Steps"][0]["Arguments"]["Tags"]


def test_the_team_scope_example_gives_the_teams_statements_once(tmp_path, monkeypatch):
    scope = run_addition(block_with("TeamScope("), tmp_path, monkeypatch)
    resources = _template(scope)["Resources"]
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


def test_the_schedule_example_starts_the_full_examples_pipeline(tmp_path, monkeypatch):
    scope = run_addition(block_with('RetrainingSchedule(stack, "Retrain"'), tmp_path,
                         monkeypatch)
    schedules = [r for r in _template(scope)["Resources"].values()
                 if r["Type"] == "AWS::Scheduler::Schedule"]
    assert [s["Properties"]["ScheduleExpression"] for s in schedules] == [
        "cron(0 1 ? * MON,WED,FRI *)"]
