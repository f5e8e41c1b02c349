"""The README's import example runs as written."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def test_readme_example_synthesizes_with_cdk_nag(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
                  if "app.synth()" in block]
    assert len(example.strip().splitlines()) <= 25
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "train.py").write_text("print('train')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)  # raises on any nag finding
    template = scope["app"].synth().get_stack_by_name("NlpTraining").template
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::SageMaker::Pipeline" in kinds
