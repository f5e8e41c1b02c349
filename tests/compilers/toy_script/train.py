"""A team's script that reads the toy compiler's switch, and fails without it."""

import os
import sys

level = os.environ.get("TOY_JIT_LEVEL")
if level != "2":
    sys.exit(f"toy-jit switch missing: TOY_JIT_LEVEL={level!r}")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "toy.txt"), "w") as model:
    model.write(f"compiled at level {level}\n")
print(f"toy-jit level {level}")
