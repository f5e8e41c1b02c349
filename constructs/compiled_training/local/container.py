"""What a job's container looks like from inside, on this machine: SageMaker's ``/opt/ml`` and
the job's own home, temporary and cache folders, all inside the job's folder of the workdir.

Each job's process runs in a private mount namespace (``unshare``) where an overlay over
``/opt`` holds ``/opt/ml``, bound to the job's ``opt_ml`` folder: code that names
``/opt/ml/...`` absolutely reads and writes the job's folder, and the host's ``/opt`` is
untouched. Its ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are its own and gone when it ends, as
in a container. Where no namespace can be made (no ``unshare``, or no right to mount), the
toolkit's ``SAGEMAKER_BASE_DIR`` points training at the folder, and the run says so before it
starts.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from compiled_training.catalog.aws_names import partition

OPT_ML = "/opt/ml"
REASON_MAX = 1024
"""SageMaker keeps this much of a job's failure or exit message."""
LOG_LINES_ON_FAILURE = 3
_TOOLKIT = "sagemaker-training-toolkit"
_TOOLKIT_ERROR = f"{_TOOLKIT} ERROR"
_INVOKING = "Invoking script with the following command:"  # the next line is the command
# SDK v3's drivers (sm_train.sh and its basic script driver): the script's command, its
# report of the script's failure, and bash's trace of the shell script's own lines.
_V3_INVOKING = "Executing command: "
_REPORTS = ("Command failed with exit code ",)
_XTRACE = re.compile(r"^\++ ")

# Inside the namespace: /opt overlaid (its files stay readable, writes go to the job's
# folder), /opt/ml bound to the job's opt_ml; /tmp, /var/tmp and /dev/shm the job's own, empty
# (as a container's), with the host folders it must reach ($4: colon-separated, under /tmp or
# /var/tmp: its workdir, its Python) bound back from a holder under /opt; then the command.
_ENTER = ('set -ef; mount -t overlay overlay -o "lowerdir=/opt,upperdir=$1,workdir=$2" /opt; '
          'mkdir -p /opt/ml; mount --bind "$3" /opt/ml; keep="$4"; shift 4; '
          'for base in /tmp /var/tmp; do [ -d "$base" ] || continue; '
          'mkdir -p "/opt/.host$base"; mount --rbind "$base" "/opt/.host$base"; '
          'mount -t tmpfs tmpfs "$base"; done; '
          '[ -d /dev/shm ] && mount -t tmpfs tmpfs /dev/shm; '
          'IFS=:; for path in $keep; do mkdir -p "$path"; '
          'mount --rbind "/opt/.host$path" "$path"; done; unset IFS; '
          'for base in /tmp /var/tmp; do [ -d "/opt/.host$base" ] || continue; '
          'umount -l "/opt/.host$base"; done; exec "$@"')
_PRIVATE = (Path("/tmp"), Path("/var/tmp"))
"""The temporary folders a job gets its own of (and /dev/shm, which nothing needs back)."""
# Variables of this machine's own AWS set-up that must not reach a job: its calls go to the
# run's stand-in AWS only.
_HOST_AWS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
             "AWS_CA_BUNDLE")
# The library's variables (its switches, the compile cache's URL): a job has the step's own.
_LIBRARY_PREFIX = "COMPILED_TRAINING_"


def _unshare() -> list[str]:
    command = ["unshare", "--mount", "--propagation", "private"]
    return command if os.geteuid() == 0 else [*command, "--user", "--map-root-user"]


@functools.cache  # one answer a process: the machine does not change during a run
def isolation_problem() -> str | None:
    """Why jobs cannot get their own ``/opt/ml`` here (a mount namespace), or None; tried in a
    temporary folder that is removed afterwards."""
    if shutil.which("unshare") is None:
        return "no unshare command (util-linux)"
    with tempfile.TemporaryDirectory(prefix="compiled-training-probe-") as scratch:
        folders = [Path(scratch) / name for name in ("upper", "work", "opt_ml")]
        for folder in folders:
            folder.mkdir()
        probe = subprocess.run([*_unshare(), "sh", "-c", _ENTER, "sh", *map(str, folders),
                                kept([scratch]), "sh", "-c", f"touch {OPT_ML}/probe"],
                               capture_output=True, text=True, check=False)
        if probe.returncode == 0 and (folders[2] / "probe").is_file():
            return None
        lines = (probe.stderr or probe.stdout).strip().splitlines()
        return f"unshare could not lay /opt/ml over /opt: {lines[-1] if lines else 'no output'}"


def kept(paths: list[str]) -> str:
    """The host folders under /tmp and /var/tmp a job must still reach inside its own (each
    path's first folder there, as the host resolves it), colon-separated for `_ENTER`."""
    found: set[str] = set()
    for text in paths:
        if not text.startswith("/"):
            continue
        for path in {Path(os.path.normpath(text)), Path(os.path.realpath(text))}:
            base = next((b for b in _PRIVATE if path.is_relative_to(b) and path != b), None)
            if base is not None and ":" not in str(path):
                found.add(str(base / path.relative_to(base).parts[0]))
    # Only folders that exist can be bound back: a stray variable naming a file is left out.
    return ":".join(sorted(path for path in found if Path(path).is_dir()))


@dataclass(frozen=True)
class Job:
    """One training or processing job's folder and how its process is started."""

    folder: Path
    """``<workdir>/steps/<step>``: the job's ``opt_ml`` and everything else it writes."""
    name: str
    isolated: bool
    """Its process runs in its own mount namespace, where ``/opt/ml`` is ``opt_ml``."""

    @property
    def opt_ml(self) -> Path:
        return self.folder / "opt_ml"

    def host_path(self, path: str) -> Path:
        """Where a container path under ``/opt/ml`` lies in the job's folder."""
        if path != OPT_ML and not path.startswith(f"{OPT_ML}/"):
            raise ValueError(f"{path} is not under {OPT_ML}")
        return self.opt_ml / Path(path).relative_to(OPT_ML)

    def seen(self, path: str) -> str:
        """A container path as the job's process can open it."""
        return path if self.isolated else str(self.host_path(path))

    def make(self, folders: tuple[str, ...]) -> None:
        """The job's folder afresh, with the container folders (``/opt/ml/...``) it starts with."""
        shutil.rmtree(self.folder, ignore_errors=True)
        for path in folders:
            self.host_path(path).mkdir(parents=True, exist_ok=True)
        for name in ("home", "tmp", "cache", "cwd", "overlay/upper", "overlay/work"):
            (self.folder / name).mkdir(parents=True, exist_ok=True)

    def environment(self, *, python: str, region: str, endpoint: str | None,
                    variables: Mapping[str, str], access_key: str = "local") -> dict[str, str]:
        """The process's environment: this machine's, less its AWS set-up and the library's
        switches (the step sets its own), with the job's own folders, the stand-in AWS (called
        with ``access_key``, its role's) and ``variables`` (the step's and the image's)."""
        cache = self.folder / "cache"
        env = {key: value for key, value in os.environ.items()
               if key not in _HOST_AWS and not key.startswith(_LIBRARY_PREFIX)}
        env.update({
            "PATH": os.pathsep.join([str(Path(python).parent), env.get("PATH", "")]),
            "HOME": str(self.folder / "home"), "TMPDIR": str(self.folder / "tmp"),
            # The interpreter's own bytecode is read, as an image's is, and none is written.
            "XDG_CACHE_HOME": str(cache), "PYTHONDONTWRITEBYTECODE": "1",
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "inductor" / "triton"),
            "MPLCONFIGDIR": str(cache / "matplotlib"), "HF_HOME": str(cache / "huggingface"),
            # A job's pip installs (a requirements.txt) stay in its folder, not in --python.
            "PIP_TARGET": str(cache / "site-packages"), "PIP_NO_CACHE_DIR": "1",
            "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_SESSION_TOKEN": "local", "AWS_DEFAULT_REGION": region, "AWS_REGION": region,
            "AWS_CONFIG_FILE": str(self.folder / "home" / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.folder / "home" / "aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_PARTITION": partition(region),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(cache / "site-packages"),
                                                        env.get("PYTHONPATH")])),
        })
        if endpoint:  # every service the job's boto3 or AWS CLI calls: the run's stand-in AWS
            env["AWS_ENDPOINT_URL"] = endpoint
        env.update(variables)
        return env

    def launch(self, command: list[str], env: Mapping[str, str], log: Path) -> int:
        """Runs ``command`` as the job's process, its output in ``log``; its exit code."""
        if self.isolated:
            overlay = self.folder / "overlay"
            needed = [str(self.folder), *command, *(part for value in env.values()
                                                    for part in value.split(os.pathsep))]
            command = [*_unshare(), "sh", "-c", _ENTER, "sh", str(overlay / "upper"),
                       str(overlay / "work"), str(self.opt_ml), kept(needed), *command]
        with log.open("w") as out:
            return subprocess.run(command, env=dict(env), cwd=self.folder / "cwd", stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  check=False).returncode

    def written(self, path: str) -> str:
        """The text the job left in a container file (its first `REASON_MAX` characters, on
        one line), or ``""``."""
        file = self.host_path(path)
        return " ".join(file.read_text(errors="replace").split())[:REASON_MAX] \
            if file.is_file() else ""

    @staticmethod
    def failure(code: int, log: Path, reason: str) -> str:
        """Why a process that exited ``code`` failed, as SageMaker says it: the ``reason`` the
        job wrote beside the script's last line, else the log's last lines. Progress bars are
        no line of their own here, and a script killed by a signal is said to be."""
        printed = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        # A bar left unfinished runs into the next line printed: what follows it is kept.
        lines = [kept for line in printed if (kept := _PROGRESS_BAR.sub("", line).strip())] or [
            "no output"]
        if not reason:
            last = " | ".join(line.strip() for line in lines[-LOG_LINES_ON_FAILURE:])
            return f"AlgorithmError: {last} ({_ended(code)}; log: {log})"
        # The script's own last words, before the toolkit's report of them.
        reported = next((i for i, line in enumerate(lines)
                         if line.startswith(_REPORTS) or _TOOLKIT_ERROR in line), len(lines))
        invoked = next((i + 2 for i, line in enumerate(lines) if _INVOKING in line),
                       next((i + 1 for i, line in enumerate(lines)
                             if line.startswith(_V3_INVOKING)), 0))
        own = [line for line in lines[invoked:reported]
               if _TOOLKIT not in line and not _XTRACE.match(line)] or [
            "none but progress bars" if len(lines) < len(printed) else "none"]
        killed = _KILLED.search(reason)
        if killed:  # the script's signal, in the toolkit's words; the toolkit then exits 1
            reason = _KILLED.sub(f"the script was {_ended(int(killed.group(1)))}", reason)
        ended = f"the toolkit exited {code}" if killed else _ended(code)
        return (f"AlgorithmError: {reason} ({ended}; the script's last line: "
                f"{own[-1].strip()}; log: {log})")


# tqdm's bar (`` 40%|████      | 4/10 [00:01<00:02, 3.9it/s]``), redrawn on one line with \r.
_PROGRESS_BAR = re.compile(r"\d+%\|[^|]*\|[^\]]*\]?")
# The toolkit's report of a script a signal ended (subprocess's negative return code).
_KILLED = re.compile(r"ExitCode (-\d+)")
_OUT_OF_MEMORY = "; often the kernel's out-of-memory killer's"


def _ended(code: int) -> str:
    """How a process ended, from its return code: negative is the signal that killed it."""
    if code >= 0:
        return f"exit code {code}"
    number = -code
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return (f"killed by {name} (signal {number}"
            + (_OUT_OF_MEMORY if number == signal.SIGKILL else "") + ")")
