"""A script that ends early, as a team's does: after a line of its own and a progress bar
redrawn in place (tqdm's), killed by a signal (as the out-of-memory killer kills) or raising."""

import argparse
import os
import signal
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--end", choices=["killed", "raises"])
end = parser.parse_known_args()[0].end
print("loaded 150 rows", flush=True)
for step in range(1, 6):
    sys.stdout.write(f"\r 50%|#####     | {step}/10 [00:01<00:01,  4.2it/s]")
    sys.stdout.flush()
if end == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
raise RuntimeError("the team script failed")
