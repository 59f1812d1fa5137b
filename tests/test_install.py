"""What the install scripts install: ``up.sh`` only what running lakemount needs, ``test.sh`` the test tools too.

``scripts/install.sh --list`` prints its plan without installing anything;
``up.sh`` and ``test.sh`` are run in a copy of the tree whose ``install.sh``
and ``.venv`` are stand-ins that record how they were called.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_ONLY_APT = ("postgresql", "chromium", "nodejs", "rclone", "s3fs", "hyperfine", "rocksdb-tools")


def plan(*args: str) -> dict[str, str]:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts/install.sh"), "--list", *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return dict(line.split(": ", 1) for line in out.splitlines())


def test_plain_install_leaves_out_the_test_tools_and_the_spark32_venv() -> None:
    p = plan()
    apt = p["apt"].split()
    assert "fuse3" in apt and "openjdk-17-jre-headless" in apt  # the mount, and Spark for import/gc
    assert not set(TEST_ONLY_APT) & set(apt)
    assert p["pip"] == "-e ."
    assert "spark-s3a" not in p and "spark-iceberg" not in p and "npm" not in p  # axe-core is the browser tests' alone


def test_test_install_adds_the_test_tools_extras_and_the_spark32_venv() -> None:
    p = plan("--test")
    assert set(TEST_ONLY_APT) <= set(p["apt"].split())
    assert p["pip"] == "-e .[test]"
    assert "pyspark 3.2.4" in p["spark-s3a"]
    assert "pyspark 3.5.9" in p["spark-iceberg"]
    assert "axe-core" in p["npm"]


def test_install_refuses_an_unknown_option() -> None:
    r = subprocess.run(["bash", str(ROOT / "scripts/install.sh"), "--tset"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "usage: scripts/install.sh [--test] [--list]"


def _stub(path: pathlib.Path, log: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*${{LAKEMOUNT_TEST_TIER:+ [tier $LAKEMOUNT_TEST_TIER]}}" >> {log}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_up_installs_for_running_and_test_installs_for_testing(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "calls"
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    for name in ("up.sh", "test.sh"):
        shutil.copy2(ROOT / "scripts" / name, tree / "scripts" / name)
    _stub(tree / "scripts/install.sh", log)
    _stub(tree / ".venv/bin/lakemount", log)
    _stub(tree / ".venv/bin/python", log)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "LAKEMOUNT_TEST_WORKERS", "LAKEMOUNT_TEST_TIER")}
    subprocess.run([str(tree / "scripts/up.sh"), "--no-mount"], check=True, env=env, timeout=60)
    # the whole suite runs the state machines' full counts even where the caller's environment says fast
    subprocess.run([str(tree / "scripts/test.sh"), "-k", "x"], check=True, env={**env, "LAKEMOUNT_TEST_TIER": "fast"}, timeout=60)
    subprocess.run([str(tree / "scripts/test.sh"), "--fast", "-k", "x"], check=True, env=env, timeout=60)
    subprocess.run([str(tree / "scripts/test.sh"), "-m", "not fuse", "-k", "x"], check=True, env=env, timeout=60)
    subprocess.run([str(tree / "scripts/test.sh"), "--fast", "-k", "x"], check=True, env={**env, "LAKEMOUNT_TEST_WORKERS": "0"},
                   timeout=60)
    assert log.read_text().splitlines() == [
        "install.sh ",
        "lakemount up --no-mount",
        # the cluster harness's tests alone, then the rest on the workers (docs/TESTING.md)
        "install.sh --test",
        "python -m pytest -q -m (cluster) -k x",
        "python -m pytest -q -n 3 -m (not cluster) -k x",
        # the fast tier: a quarter of the state machines' examples (tests/budget.py)
        "install.sh --test [tier fast]",
        "python -m pytest -q -n 3 -m (not spark and not browser and not cluster and not slow) -k x [tier fast]",
        # a caller's -m joins each pass's selection
        "install.sh --test",
        "python -m pytest -q -m (not fuse) and (cluster) -k x",
        "python -m pytest -q -n 3 -m (not fuse) and (not cluster) -k x",
        # no workers: one plain run, as before them
        "install.sh --test [tier fast]",
        "python -m pytest -q -m (not spark and not browser and not cluster and not slow) -k x [tier fast]",
    ]


def test_test_sh_fails_if_either_pass_fails_and_skips_over_a_pass_with_no_test(tmp_path: pathlib.Path) -> None:
    # The stand-in pytest exits $ALONE for the lone pass (-m (cluster)) and $REST for the workers' pass.
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts/test.sh", tree / "scripts/test.sh")
    _stub(tree / "scripts/install.sh", tmp_path / "calls")
    python = tree / ".venv/bin/python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\ncase "$*" in *"-m (cluster)"*) exit $ALONE;; *) exit $REST;; esac\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "LAKEMOUNT_TEST_WORKERS")}
    # (lone pass, workers' pass) -> the script's status; 5 is pytest's "no test selected"
    for alone, rest, status in [(0, 0, 0), (5, 0, 0), (0, 5, 0), (5, 5, 5), (1, 0, 1), (0, 1, 1), (5, 2, 2)]:
        r = subprocess.run([str(tree / "scripts/test.sh")], env={**env, "ALONE": str(alone), "REST": str(rest)}, timeout=60)
        assert r.returncode == status, (alone, rest, r.returncode)
    # the fast tier has no lone pass: its workers' status is the script's
    r = subprocess.run([str(tree / "scripts/test.sh"), "--fast"], env={**env, "ALONE": "1", "REST": "5"}, timeout=60)
    assert r.returncode == 5
