"""Writes the catalog of Hugging Face ``TrainingArguments`` fields the synth's parser check reads
(``catalog/training-arguments.json``): ``make training-arguments``.

Synthesis has no transformers, so which ``--name`` arguments a script's ``HfArgumentParser``
accepts comes from this file: each class's init fields as the parser turns them into options
(``--name``, ``--na-me``) and the booleans whose default is True (which also get ``--no_name``).
It is read from the transformers of the newest PyTorch image's environment
(``tests/environments.py``), the version recorded in the file; a test holds the file to that
environment's classes.

Run by any Python: it runs itself again in that environment to read the classes.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "constructs" / "compiled_training" / "catalog" / "training-arguments.json"
CLASSES = ("TrainingArguments", "Seq2SeqTrainingArguments")


def read_classes() -> dict[str, Any]:
    """The catalog, read from the transformers this Python imports."""
    import transformers

    classes = {}
    for name in CLASSES:
        fields = [f for f in dataclasses.fields(getattr(transformers, name)) if f.init]
        classes[name] = {
            "fields": sorted(f.name for f in fields),
            "true_booleans": sorted(f.name for f in fields if f.default is True),
        }
    return {"transformers": transformers.__version__,
            "source": "dataclasses.fields() of each class, its init fields, as HfArgumentParser "
                      "reads them", "classes": classes}


def catalog_text(python: str) -> str:
    """The catalog as the file holds it, read by ``python`` (an environment with transformers)."""
    found = subprocess.run([python, __file__, "--read"], capture_output=True, text=True,
                           check=True, timeout=300).stdout
    return json.dumps(json.loads(found), indent=1, sort_keys=True) + "\n"


def main() -> None:
    if sys.argv[1:] == ["--read"]:
        print(json.dumps(read_classes()))
        return
    sys.path.insert(0, str(ROOT))
    from tests.environments import NEWEST_GPU_IMAGE, built

    TARGET.write_text(catalog_text(str(built(NEWEST_GPU_IMAGE).executable)))
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
