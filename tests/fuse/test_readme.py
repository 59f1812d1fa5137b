"""Issue 14 item 8: README.md's mount example, run as written on the demo repository ``lakemount up`` creates."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.fuse.mounting import cleanup_mountpoint, env_for, lakemount_cmd, needs_fuse

pytestmark = needs_fuse

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(heading: str) -> list[str]:
    """The commands of the first ``sh`` block under ``heading``, comments stripped."""
    text = README.read_text()
    section = text[text.index(heading) :]
    body = re.search(r"```sh\n(.*?)```", section, re.S)
    assert body is not None
    lines = []
    for raw in body.group(1).splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if line:
            lines.append(line)
    return lines


def test_item8_readme_mount_example_runs_as_written(home: str, tmp_path: Path) -> None:
    commands = readme_block("## The mount")
    assert commands[0] == "lakemount mount /lake" and commands[-1] == "lakemount umount /lake"
    env = env_for(home)
    subprocess.run(lakemount_cmd("up", "--no-services"), env=env, check=True, capture_output=True, timeout=120)
    mountpoint = str(tmp_path / "lake")
    os.makedirs(mountpoint)
    work = tmp_path / "work"
    work.mkdir()
    (work / "part.csv").write_text("event_id,user,amount\n2026-11-04-0000,user1,1.00\n")
    # ``lakemount`` is this interpreter's CLI; ``/lake`` is the temporary mountpoint.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "lakemount"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m lakemount.cli.main \"$@\"\n")
    shim.chmod(0o755)
    script = "set -ex\n" + "\n".join(c.replace("/lake", mountpoint) for c in commands) + "\n"
    try:
        p = subprocess.run(
            ["bash", "-c", script], cwd=work, env={**env, "PATH": f"{bindir}:{env['PATH']}"},
            capture_output=True, text=True, timeout=300,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        assert "# demo" in p.stdout  # cat /lake/demo/main~1/README.md
    finally:
        cleanup_mountpoint(mountpoint)
    # What the example did is in the repository: the copied file, its commit, the merge of dev.
    log = subprocess.run(lakemount_cmd("log", "lakefs://demo/main", "--json"), env=env, capture_output=True, text=True,
                         check=True).stdout
    assert '"add Nov 4"' in log and "Merge 'dev' into 'main'" in log
    cat = subprocess.run(lakemount_cmd("fs", "cat", "lakefs://demo/main/events/dt=2026-11-04/part.csv"), env=env,
                         capture_output=True, text=True, check=True)
    assert cat.stdout.startswith("event_id")
