"""A one-screen summary of a synthesized app: stacks, pipelines, compiler settings, templates.

Usage: ``python -m compiled_training.tools.summary [cdk.out]``
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from compiled_training import tables
from compiled_training.schedules.expressions import next_start_times

PIPELINE_TYPE = "AWS::SageMaker::Pipeline"
SCHEDULE_TYPE = "AWS::Scheduler::Schedule"


def _templates(outdir: Path) -> Templates:
    manifest = json.loads((outdir / "manifest.json").read_text())
    found = []
    for name, artifact in sorted(manifest.get("artifacts", {}).items()):
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = outdir / artifact["properties"]["templateFile"]
            found.append((name, template_file, json.loads(template_file.read_text())))
    return found


Templates = list[tuple[str, Path, dict[str, Any]]]


def pipelines(templates: Templates) -> list[dict[str, Any]]:
    """One row per pipeline in the cloud assembly, read from the templates' metadata."""
    rows = []
    for name, template_file, template in templates:
        for resource in template.get("Resources", {}).values():
            if resource.get("Type") == PIPELINE_TYPE:
                meta = resource.get("Metadata", {}).get("compiled-training", {})
                rows.append({"stack": name, "template": str(template_file), **meta})
    return rows


def schedules(templates: Templates, now: datetime) -> list[str]:
    """One line per schedule: its expression and next five start times in its time zone."""
    lines = []
    for name, _, template in templates:
        for resource in template.get("Resources", {}).values():
            if resource.get("Type") != SCHEDULE_TYPE:
                continue
            props = resource["Properties"]
            zone = props.get("ScheduleExpressionTimezone", "UTC")
            expression = props["ScheduleExpression"]
            times = next_start_times(expression, zone, now=now)
            shown = ", ".join(t.strftime("%a %d %b %H:%M") for t in times)
            lines.append(f"{name}: {expression} {zone}; next: {shown}")
    return lines


def render(outdir: Path, now: datetime | None = None) -> str:
    templates = _templates(outdir)  # read once, for pipelines and schedules alike
    rows = pipelines(templates)
    columns = [("stack", "Stack"), ("pipelineName", "Pipeline"), ("framework", "Framework"),
               ("compiler", "Compiler"), ("distribution", "Distribution"),
               ("instances", "Instances")]
    lines = [tables.columns([title for _, title in columns],
                            [[str(row.get(key, "")) for key, _ in columns] for row in rows])]
    lines.append("")
    for row in rows:
        lines.append(f"{row['stack']}: image {row.get('image', '?')}; template {row['template']}")
        if row.get("registration"):
            lines.append(f"{row['stack']}: registers into {row['registration']}")
    lines.extend(schedules(templates, now or datetime.now(timezone.utc)))
    lines.append(_nag_line(outdir / "validation-report.json"))
    return "\n".join(lines)


def _nag_line(report: Path) -> str:
    """The packs' verdicts. The CDK writes the report whenever a validation plugin ran, so no
    report means no pack checked the app."""
    plugins = json.loads(report.read_text()).get("pluginReports", []) if report.exists() else []
    if not plugins:
        return ("cdk-nag: no pack ran, so nothing was checked; add them with "
                "cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), "
                "CompiledTrainingChecks(app))")
    verdicts = ", ".join(f"{p['pluginName']}: {p['conclusion']}" for p in plugins)
    return f"cdk-nag: {verdicts} ({report})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    outdir = Path(args[0] if args else "cdk.out")
    if not (outdir / "manifest.json").exists():
        print(f"no cloud assembly in {outdir}; run 'npx cdk synth' first", file=sys.stderr)
        return 2
    print(render(outdir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
