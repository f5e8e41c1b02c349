"""torch.compile's warm start in the runtime: counted by the compiler's own cache counters,
never timed (the compile benchmark times it).

Replaced, because it cannot exist here: S3, by a folder (the cache URL's ``file://`` form;
tests/local/test_run.py drives the ``s3://`` path through the local runner's stand-in S3) and
the GPUs, by the CPU (the stand-in ``nvidia-smi`` gives torchrun its count).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from compiled_training import Compiler, Distribution, Framework, InputChannel, TrainingPipeline
from compiled_training_runtime import contract
from compiled_training_runtime.warm_start import ARCHIVE
from tests.environments import NEWEST_GPU_IMAGE, require
from tests.helpers import TINY_BERT, definitions, new_stack, substitute_expressions
from tests.runtime.harness import (
    RUNTIME,
    TORCH_COMPILE,
    direct_env,
    metrics,
    opt_ml,
    run_summary,
    run_with_toolkit,
    toolkit_job,
)

COMPILE = {**TINY_BERT, "max_steps": 1}
SAVED = "compiled-training: compile cache: saved "


def _run(base: Path, url: str, **environment: str) -> tuple[dict, str]:
    """One direct run with the cache at ``url``: its summary's cache report and its logs."""
    import subprocess
    import sys

    env = {**direct_env(base, COMPILE, environment=TORCH_COMPILE),
           contract.ENV_COMPILE_CACHE_URL: url, **environment}
    result = subprocess.run([sys.executable, str(RUNTIME / "train.py")], env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-4000:]
    return metrics(base)[contract.SUMMARY_COMPILE_CACHE], logs


@pytest.fixture(scope="module")
def cold_store(tmp_path_factory) -> tuple[Path, dict]:
    """A cache store after one cold run, and that run's report."""
    root = tmp_path_factory.mktemp("cold")
    report, _ = _run(opt_ml(root / "job", COMPILE), f"file://{root}/store/")
    return root / "store", report


def _copy(store: Path, tmp_path: Path) -> Path:
    shutil.copytree(store, tmp_path / "store")
    return tmp_path / "store"


def _archive(store: Path) -> Path:
    (archive,) = store.rglob(ARCHIVE)
    return archive


def test_a_first_run_compiles_cold_and_saves_what_it_compiled(cold_store):
    store, report = cold_store
    assert report["state"] == "cold" and report["graphs_compiled"] > 0
    assert report["graphs_loaded"] == 0 and report["saved_bytes"] > 0
    # Keyed by what invalidates it: instance (none here), device, backend-mode, versions.
    key = _archive(store).relative_to(store).parts
    assert key[:3] == ("local", "cpu", "inductor-default")
    assert key[3].startswith("torch-") and key[4].startswith("triton-")


def test_a_run_with_another_key_compiles_cold_beside_it(cold_store, tmp_path):
    store = _copy(cold_store[0], tmp_path)

    report, _ = _run(opt_ml(tmp_path / "job", COMPILE), f"file://{store}/",
                     SM_CURRENT_INSTANCE_TYPE="ml.g5.2xlarge")

    assert report["state"] == "cold" and report["graphs_compiled"] == \
        cold_store[1]["graphs_compiled"]
    assert len(list(store.rglob(ARCHIVE))) == 2  # the other key's archive stays


def test_a_corrupt_archive_is_a_warning_and_a_cold_compile_then_replaced(cold_store, tmp_path):
    store = _copy(cold_store[0], tmp_path)
    _archive(store).write_bytes(b"not a tar archive")

    report, logs = _run(opt_ml(tmp_path / "job", COMPILE), f"file://{store}/")

    assert "compile cache: warning: could not restore" in logs and "compiling cold" in logs
    assert report["state"] == "cold" and report["graphs_compiled"] > 0
    assert "restore_error" in report and report["saved_bytes"] > 0


def test_a_cache_that_cannot_be_saved_never_fails_a_finished_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("a folder cannot be made under a file")

    report, logs = _run(opt_ml(tmp_path / "job", COMPILE), f"file://{blocker}/store/")

    assert "compile cache: warning: could not save" in logs
    assert report["state"] == "cold" and "save_error" in report
    assert (tmp_path / "job" / "model" / "model.pt").exists()


def _synthesized_step(source_dir: Path, version: str = "2.9.0") -> dict:
    """The Train step a torch.compile pipeline on two 4-GPU instances synthesizes."""
    stack = new_stack()
    TrainingPipeline(stack, "Ranker", pipeline_name="ranker",
                     framework=Framework.pytorch(version), compiler=Compiler.torch_compile(),
                     instance_type="ml.g5.12xlarge", distribution=Distribution.TORCH_DISTRIBUTED,
                     source_dir=source_dir, entry_point="train.py",
                     channels=[InputChannel("train", "s3://team-data/train/")])
    from aws_cdk.assertions import Template

    (definition,) = definitions(Template.from_stack(stack).to_json())
    (step,) = definition["Steps"]
    return dict(substitute_expressions(step["Arguments"], {}))


@pytest.mark.parametrize("image", ["main", NEWEST_GPU_IMAGE])
def test_a_scheduled_jobs_second_run_loads_the_graphs_the_first_compiled(tmp_path, image):
    """Two ranks under torchrun, as the toolkit launches the synthesized step: this also holds
    torch.compile under DistributedDataParallel (it compiled DDP's forward, which breaks the
    graph, until the model was compiled before the wrap). In this environment's torch 2.9 and
    in the newest image's (torch 2.14 on Python 3.12, with its toolkit)."""
    python = sys.executable if image == "main" else str(require(image).executable)
    step = _synthesized_step(RUNTIME, "2.9.0" if image == "main" else "2.14")
    declared = step["Environment"][contract.ENV_COMPILE_CACHE_URL]
    assert declared.endswith("/ranker/compile-cache/Train/")
    # The job's own environment, its S3 prefix moved to a folder.
    environment = {**step["Environment"], contract.ENV_COMPILE_CACHE_URL:
                   f"file://{tmp_path}/s3/ranker/compile-cache/Train/"}
    runs = []
    for name in ("first", "second"):
        base = toolkit_job(tmp_path / name, step, max_steps=1, model_family="bert")
        result = run_with_toolkit(base, gpus=2, environment=environment, python=python)
        logs = result.stdout + result.stderr
        assert result.returncode == 0, logs[-6000:]
        assert logs.count(SAVED) == 1, logs[-6000:]  # rank 0 alone, once both ranks are done
        runs.append(run_summary(base, logs))

    first, second = (run[contract.SUMMARY_COMPILE_CACHE] for run in runs)
    assert runs[1]["world_size"] == 2
    assert first["state"] == "cold" and first["graphs_compiled"] > 0
    assert second["state"] == "warm" and second["graphs_compiled"] == 0
    assert second["graphs_loaded"] == first["graphs_compiled"]


def test_a_cache_nothing_hit_is_saved_again_without_the_entries_it_restored(cold_store,
                                                                            tmp_path):
    store = _copy(cold_store[0], tmp_path)
    before = _members(_archive(store))
    other_model = {**COMPILE, "hidden_size": 48}  # the same key: another model's graphs

    import subprocess
    import sys

    base = opt_ml(tmp_path / "job", other_model)
    env = {**direct_env(base, other_model, environment=TORCH_COMPILE),
           contract.ENV_COMPILE_CACHE_URL: f"file://{store}/"}
    result = subprocess.run([sys.executable, str(RUNTIME / "train.py")], env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    report = metrics(base)[contract.SUMMARY_COMPILE_CACHE]

    assert report["state"] == "warm" and report["hit"] is False
    assert report["graphs_loaded"] == 0 and report["graphs_compiled"] > 0
    graphs = {name for name in before if name.startswith("fxgraph/")}
    assert graphs and not graphs & _members(_archive(store))  # the old model's graphs went


def _members(archive: Path) -> set[str]:
    import os
    import tarfile

    with tarfile.open(archive) as tar:
        return {os.path.normpath(m.name) for m in tar.getmembers() if m.isfile()}


@pytest.mark.parametrize("entry", ["../outside", "/etc/evil", "link"])
def test_an_archive_that_would_write_outside_its_folder_is_refused(tmp_path, entry):
    import io
    import tarfile

    from compiled_training_runtime.warm_start import CacheError, _unpack

    archive = tmp_path / ARCHIVE
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(entry)
        if entry == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))

    with pytest.raises(CacheError, match="unexpected entry"):
        _unpack(archive, tmp_path / "unpacked")
    assert not (tmp_path / "outside").exists() and not (tmp_path / "unpacked").exists()


def test_s3_tells_a_first_run_from_a_failure_and_encrypts_with_the_jobs_key(tmp_path,
                                                                           monkeypatch):
    """The job's own S3 calls, against moto (AWS itself cannot be reached here)."""
    import boto3
    from moto import mock_aws

    from compiled_training_runtime.warm_start import _S3

    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        kms = boto3.client("kms").create_key()["KeyMetadata"]["Arn"]
        boto3.client("s3").create_bucket(Bucket="outputs")
        store, archive = _S3(kms), tmp_path / ARCHIVE
        archive.write_bytes(b"archive")

        assert store.get("s3://outputs/p/compile-cache/Train/k/x.tar.gz", tmp_path / "a") is False
        with pytest.raises(Exception, match="NoSuchBucket"):  # not a first run: a warning
            store.get("s3://no-such-bucket/p/x.tar.gz", tmp_path / "b")
        store.put(archive, "s3://outputs/p/compile-cache/Train/k/x.tar.gz")
        head = boto3.client("s3").head_object(Bucket="outputs",
                                              Key="p/compile-cache/Train/k/x.tar.gz")

    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == kms


def test_the_cache_key_tells_world_sizes_apart():
    # DDP's graphs differ from one process's: a 2-rank run's archive is not a 1-rank run's.
    from compiled_training_runtime.warm_start import cache_key

    one, two = (cache_key("default", "inductor", {"WORLD_SIZE": size}) for size in ("1", "2"))
    assert one.endswith("/world1") and two.endswith("/world2")
    assert one.removesuffix("/world1") == two.removesuffix("/world2")


REUSE = """
import json, torch, torch._dynamo
from compiled_training_runtime.warm_start import compile_cache
with compile_cache() as cache:
    for _ in range(2):  # the same graph twice: the second compile hits the run's own entry
        torch._dynamo.reset()
        torch.compile(lambda x: torch.sin(x) + 1)(torch.ones(4))
print(json.dumps(cache.summary()))
"""


def test_a_runs_reuse_of_its_own_graphs_is_not_a_warm_start(tmp_path):
    """A fresh cache reported ``hit`` with graphs loaded when the run only reused what it had
    compiled itself: loaded counts the archive's graphs, reuse is apart."""
    import json
    import subprocess
    import sys

    reports = []
    for run in ("cold", "warm"):
        env = {**direct_env(tmp_path / run, {}), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / run),
               contract.ENV_COMPILE_CACHE_URL: f"file://{tmp_path / 'store'}/"}
        result = subprocess.run([sys.executable, "-c", REUSE], env=env, capture_output=True,
                                text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        reports.append(json.loads(result.stdout.strip().splitlines()[-1]))
    cold, warm = reports
    assert (cold["state"], cold["hit"], cold["graphs_loaded"]) == ("cold", False, 0)
    assert cold["graphs_compiled"] == 1 and cold["graphs_reused"] == 1
    assert (warm["state"], warm["hit"], warm["graphs_loaded"]) == ("warm", True, 1)
    assert warm["graphs_compiled"] == 0 and warm["graphs_reused"] == 1
