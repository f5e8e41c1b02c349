"""The public surface against its committed baseline: `make lint` fails on a removed or
incompatibly changed public name unless the changelog records it as breaking.

The public surface is what an importing app and a shell script use:

- every name in ``compiled_training.__all__`` and what it holds (a construct's parameters, a
  props TypedDict's keys, a factory's arguments, an enum's members), read statically by
  griffe, whose breaking-change detection compares it with the baseline (a removed object or
  parameter, a parameter made required, moved or of another kind, a default changed);
- what each public function, method and property returns, as annotated (griffe leaves return
  types out of its report): a changed one breaks the code that reads it;
- each public props TypedDict's ``Required`` keys (griffe reads a key made required as an
  annotation changed, which it does not report): a key made or added required breaks every
  app that leaves it out;
- the CLI's commands, options and positional arguments, read from its parsers (the same
  parsers ``--help`` prints).

The baseline (``api/``) is the surface as released; ``make api-baseline`` writes it anew, as a
release does. A breaking change passes only where ``CHANGELOG.md``'s ``[Unreleased]`` section
names it under ``### Breaking`` in backticks, as this script prints it.

Usage: python scripts/api_check.py [--write] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
BASELINE = Path("api")
PYTHON_BASELINE, CLI_BASELINE, VALUES_BASELINE, REQUIRED_BASELINE = (
    "python.json", "cli.json", "values.json", "required.json")
CLI = "compiled-training"


def python_surface(root: Path) -> griffe.Module:
    """``compiled_training``'s public names as one module of their definitions (so that a
    definition may move between modules without a breakage), docstrings left out."""
    package = griffe.load("compiled_training", search_paths=[root / "constructs", root / "runtime"],
                          resolve_aliases=True, resolve_external=False)
    # Relative: the baseline names no machine's folders.
    surface = griffe.Module("compiled_training",
                            filepath=Path("constructs") / "compiled_training" / "__init__.py")
    targets = {}
    for name in package.exports or ():
        member = package[name]
        targets[name] = member.final_target if member.is_alias else member
    for target in targets.values():  # in the package still, where the bases resolve
        if target.is_class:
            _with_inherited(target)
    for name, target in targets.items():
        surface.set_member(name, target)
    _strip_docstrings(surface)
    return surface


def _with_inherited(cls: Any) -> None:
    """A class's public members from its bases in this package, as its own: a removed
    ``pipeline_arn`` of `NamedPipeline` breaks `TrainingPipeline`'s users."""
    for name, inherited in cls.inherited_members.items():
        if not name.startswith("_") and name not in cls.members:
            target = inherited.final_target if inherited.is_alias else inherited
            cls.set_member(name, _copy(target))


def _copy(obj: Any) -> Any:
    """A copy of a griffe object (through its JSON), so that each class owns its own."""
    return json.loads(obj.as_json(), object_hook=griffe.json_decoder)


def _strip_docstrings(obj: Any) -> None:
    obj.docstring = None
    for member in getattr(obj, "members", {}).values():
        if not member.is_alias:
            _strip_docstrings(member)


def importable(root: Path) -> None:
    """Puts ``root``'s two packages first on the path, once (a process reads one checkout)."""
    for folder in (str(root / "runtime"), str(root / "constructs")):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def cli_surface(root: Path) -> dict[str, Any]:
    """Each command's options and positional arguments, from the CLI's own parsers (``root``'s:
    a process reads one checkout)."""
    importable(root)
    from compiled_training.tools.cli import command_parsers

    return {CLI: {name: _arguments(sub) for name, sub in command_parsers().items()}}


def _arguments(parser: argparse.ArgumentParser) -> dict[str, Any]:
    options, positionals = {}, []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        choices = sorted(map(str, action.choices)) if action.choices else None
        if action.option_strings:
            for option in action.option_strings:
                options[option] = {"required": bool(action.required),
                                   "takes_value": action.nargs != 0, "choices": choices}
        else:
            positionals.append({"name": action.dest, "choices": choices,
                                "required": action.nargs not in ("?", "*")})
    return {"options": options, "positionals": positionals}


def enum_values(root: Path) -> dict[str, dict[str, str]]:
    """Each public enum's members and their values, as Python has them (griffe compares no
    attribute's value, and CompilerKind's are the contract's constants): the words cdk.json,
    the run summary and the CLI spell."""
    importable(root)
    import enum

    import compiled_training

    return {name: {member.name: str(member.value) for member in obj}
            for name in compiled_training.__all__
            if isinstance(obj := getattr(compiled_training, name), type)
            and issubclass(obj, enum.Enum)}


def required_props(root: Path) -> dict[str, list[str]]:
    """Each public props TypedDict's ``Required`` keys, inherited ones included, read as the
    library's own validation reads them."""
    importable(root)
    from typing_extensions import is_typeddict

    import compiled_training
    from compiled_training.typecheck import required_keys

    return {name: sorted(required_keys(obj)) for name in compiled_training.__all__
            if is_typeddict(obj := getattr(compiled_training, name))}


def required_breakages(old: dict[str, list[str]], new: dict[str, list[str]]
                       ) -> list[tuple[str, str]]:
    """A key that a props class did not require and now does (a removed class or key is
    griffe's to report)."""
    return [(f"compiled_training.{name}.{key}", "now required")
            for name, keys in new.items() if name in old
            for key in keys if key not in old[name]]


def value_breakages(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for name, members in old.items():
        for member, value in members.items():
            now = new.get(name, {}).get(member)
            if name in new and now is None:
                found.append((f"compiled_training.{name}.{member}", "enum member removed"))
            elif now is not None and now != value:
                found.append((f"compiled_training.{name}.{member}",
                              f"enum value changed from {value!r} to {now!r}"))
    return found


def cli_breakages(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, what changed) for each incompatible change of the CLI."""
    found = []
    for command, before in old[CLI].items():
        now = new[CLI].get(command)
        name = f"{CLI} {command}"
        if now is None:
            found.append((name, "command removed"))
            continue
        names = [p["name"] for p in now["positionals"]]
        if names[:len(before["positionals"])] != [p["name"] for p in before["positionals"]]:
            found.append((name, f"positional arguments {[p['name'] for p in before['positionals']]}"
                                f" became {names}"))
        for was, positional in zip(before["positionals"], now["positionals"], strict=False):
            found += _argument_breakages(f"{name} {was['name']}", was, positional)
        added = now["positionals"][len(before["positionals"]):]
        if any(p["required"] for p in added):
            found.append((name, f"new required positional argument(s) "
                                f"{[p['name'] for p in added if p['required']]}"))
        for option, was in before["options"].items():
            option_now = now["options"].get(option)
            if option_now is None:
                found.append((f"{name} {option}", "option removed"))
            else:
                found += _argument_breakages(f"{name} {option}", was, option_now)
        for option, option_now in now["options"].items():
            if option not in before["options"] and option_now["required"]:
                found.append((f"{name} {option}", "new required option"))
    return found


def _argument_breakages(name: str, was: dict[str, Any], now: dict[str, Any]
                        ) -> list[tuple[str, str]]:
    """An argument made required, taking a value where it took none (or the reverse), or
    refusing a choice it took."""
    found = []
    if now["required"] and not was["required"]:
        found.append((name, "now required"))
    if was.get("takes_value", True) != now.get("takes_value", True):
        found.append((name, "takes a value where it took none, or the reverse"))
    if now["choices"] is not None and set(was["choices"] or ()) - set(now["choices"]):
        found.append((name, f"choices {sorted(set(was['choices'] or ()) - set(now['choices']))}"
                            f" removed"))
    elif now["choices"] is not None and was["choices"] is None:
        found.append((name, f"now limited to {now['choices']}"))
    return found


def python_breakages(old: griffe.Module, new: griffe.Module) -> list[tuple[str, str]]:
    found = [(breakage.obj.path, breakage.kind.value)
             for breakage in griffe.find_breaking_changes(old, new)]
    before, now = returned_types(old), returned_types(new)
    return found + [(path, f"return type changed from {was} to {now[path]}")
                    for path, was in before.items() if path in now and now[path] != was]


def returned_types(obj: Any) -> dict[str, str]:
    """Each public function's, method's and property's return annotation, by path, as written."""
    found = {}
    for name, member in obj.members.items():
        if member.is_alias or name.startswith("_"):
            continue
        if member.is_function:
            found[member.path] = str(member.returns)
        elif member.is_attribute and "property" in member.labels:
            found[member.path] = str(member.annotation)
        elif member.is_class:
            found |= returned_types(member)
    return found


def recorded_as_breaking(changelog: str) -> set[str]:
    """The names in backticks under ``### Breaking`` in the ``[Unreleased]`` section."""
    unreleased = re.search(r"^## \[Unreleased\]\s*$(.*?)(?=^## )", changelog, re.M | re.S)
    if not unreleased:
        return set()
    breaking = re.search(r"^### Breaking\s*$(.*?)(?=^### |\Z)", unreleased.group(1), re.M | re.S)
    return set(re.findall(r"`([^`]+)`", breaking.group(1))) if breaking else set()


def check(root: Path) -> list[str]:
    """The unrecorded breakages of ``root``'s surface against its baseline, as lines."""
    baseline = root / BASELINE
    old_python = griffe.Module.from_json((baseline / PYTHON_BASELINE).read_text())
    old_cli = json.loads((baseline / CLI_BASELINE).read_text())
    old_values = json.loads((baseline / VALUES_BASELINE).read_text())
    old_required = json.loads((baseline / REQUIRED_BASELINE).read_text())
    recorded = recorded_as_breaking((root / "CHANGELOG.md").read_text())
    found = (python_breakages(old_python, python_surface(root))
             + cli_breakages(old_cli, cli_surface(root))
             + value_breakages(old_values, enum_values(root))
             + required_breakages(old_required, required_props(root)))
    return [f"`{name}`: {what}" for name, what in found if name not in recorded]


def write(root: Path) -> None:
    baseline = root / BASELINE
    baseline.mkdir(exist_ok=True)
    (baseline / PYTHON_BASELINE).write_text(python_surface(root).as_json(indent=1) + "\n")
    (baseline / CLI_BASELINE).write_text(json.dumps(cli_surface(root), indent=1, sort_keys=True)
                                         + "\n")
    (baseline / VALUES_BASELINE).write_text(json.dumps(enum_values(root), indent=1,
                                                       sort_keys=True) + "\n")
    (baseline / REQUIRED_BASELINE).write_text(json.dumps(required_props(root), indent=1,
                                                         sort_keys=True) + "\n")


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--write", action="store_true", help="write the baseline anew (a release)")
    args.add_argument("--root", type=Path, default=ROOT, help="the checkout to read")
    options = args.parse_args()
    if options.write:
        write(options.root)
        print(f"wrote {BASELINE}/ from the public surface")
        return 0
    problems = check(options.root)
    for problem in problems:
        print(f"breaking change not in CHANGELOG.md's [Unreleased] ### Breaking: {problem}",
              file=sys.stderr)
    if problems:
        print("record each under ### Breaking (the name in backticks), or keep the name "
              "compatible", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
