"""The side environments on a small disk: one that would leave the test run too little is not
built, and the tests that need it skip naming the disk, where an unbuilt one fails them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import environments
from tests.environments import (
    CHECKOV,
    ENVS,
    RESERVE_GIB,
    XLA_WITH_GRAD_SCALER,
    built,
    lacks_room,
    named,
    require,
)

GIB = 2**30


def test_an_environment_is_built_only_beside_the_test_runs_reserve():
    env = named(XLA_WITH_GRAD_SCALER)
    enough = int((env.disk_gib + RESERVE_GIB) * GIB)
    assert lacks_room(env, enough) is None
    short = lacks_room(env, enough - 1)
    assert short is not None
    assert short.startswith(f"{XLA_WITH_GRAD_SCALER} (torch-xla with torch_xla.amp.GradScaler "
                            f"(2.8)) is not built: {env.disk_gib + RESERVE_GIB:.1f} GiB free on "
                            "this disk")
    assert f"about {env.disk_gib} GiB beside the {RESERVE_GIB} GiB the test run keeps" in short


def test_the_newest_images_environment_is_built_whatever_the_disk():
    """CI counts a skip of its tests as a failure: no lack of room leaves it unbuilt."""
    newest = named(environments.NEWEST_GPU_IMAGE)
    assert newest.essential and lacks_room(newest, GIB) is None
    assert [env.name for env in ENVS if env.essential] == [environments.NEWEST_GPU_IMAGE]


def test_the_local_runs_environments_are_built_before_the_frozen_images():
    names = [env.name for env in ENVS]
    assert names.index(XLA_WITH_GRAD_SCALER) < names.index("py39-torch1.13.1")
    assert names[:3] == [CHECKOV, environments.IMAGE_CONFIG,  # small, and scans need them
                         environments.NEWEST_GPU_IMAGE]  # the default image, first to get room


def test_an_environment_left_unbuilt_for_lack_of_disk_skips_its_tests(monkeypatch, tmp_path):
    monkeypatch.setattr(environments, "HOME", tmp_path)
    with pytest.raises(AssertionError, match=f"{CHECKOV} is not built: run"):
        require(CHECKOV)  # unbuilt, and nobody said why: the test fails
    monkeypatch.setattr(environments.shutil, "disk_usage", lambda _: SimpleNamespace(free=GIB))
    wheel = tmp_path / "runtime.whl"  # never installed: the checkov environment takes none
    reason = environments.build(named(CHECKOV), wheel)
    assert reason.startswith(f"skipped: {CHECKOV} (checkov, CloudFormation checks run offline "
                             "on cdk.out) is not built: 1.0 GiB free on this disk")
    assert not named(CHECKOV).folder.exists()  # nothing half-built
    with pytest.raises(pytest.skip.Exception, match="1.0 GiB free on this disk"):
        require(CHECKOV)
    with pytest.raises(SystemExit, match="1.0 GiB free on this disk"):
        built(CHECKOV)  # a script (make run-local) says so in one line


def test_a_built_environment_is_used_whatever_an_earlier_lack_of_room_said(monkeypatch,
                                                                            tmp_path):
    monkeypatch.setattr(environments, "HOME", tmp_path)
    env = named(CHECKOV)
    with pytest.raises(SystemExit, match=f"^{CHECKOV} is not built: run `make test-envs`$"):
        built(CHECKOV)
    env.no_room.write_text("an earlier run found no room")
    env.folder.mkdir()
    (env.folder / ".installed").write_text(repr(env))  # as build marks it once installed
    assert require(CHECKOV) == env and built(CHECKOV) == env
