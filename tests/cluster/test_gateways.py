"""Two gateway hosts over the shared stores: a gateway killed (-9) during a multipart upload harms nothing.

The test proves its fault: part 2 was landing on gw1 when gw1 was killed (its
landing file had grown past part 1's size and never reached part 2's), the
client saw that connection drop and gw1 refuse the completion, and gw1's
server died of SIGKILL.  The completion names the parts that were stored, so
without the kill the object would exist and "no object anywhere" would fail.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, Host, available, cluster, remove_stale
from tests.skip_policy import under_ci

MiB = 1 << 20

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.fuse, pytest.mark.postgres]

CLIENT = r"""
import json, sys, threading, time, boto3, botocore.config
ep1, ep2, key, secret, phase = sys.argv[1:6]
cfg = botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30)
def s3(ep, config=cfg):
    return boto3.client("s3", endpoint_url=ep, aws_access_key_id=key, aws_secret_access_key=secret, region_name="us-east-1", config=config)
out = {}
if phase == "upload":
    # one attempt per request: a retry would turn the dropped connection into "could not connect"
    c = s3(ep1, cfg.merge(botocore.config.Config(retries={"total_max_attempts": 1})))
    up = c.create_multipart_upload(Bucket="repo", Key="main/mp.bin")["UploadId"]
    etag = c.upload_part(Bucket="repo", Key="main/mp.bin", UploadId=up, PartNumber=1, Body=b"a" * (5 << 20))["ETag"]
    parts = [{"PartNumber": 1, "ETag": etag}]
    print(json.dumps({"upload_id": up, "part1": True}), flush=True)
    try:
        etag = c.upload_part(Bucket="repo", Key="main/mp.bin", UploadId=up, PartNumber=2, Body=b"b" * (64 << 20))["ETag"]
        parts.append({"PartNumber": 2, "ETag": etag})
        out["part2"] = "stored"
    except Exception as exc:
        out["part2"] = f"{type(exc).__name__}: {exc}"
    try:  # the parts that were stored: this completion succeeds unless gw1 is gone
        c.complete_multipart_upload(Bucket="repo", Key="main/mp.bin", UploadId=up, MultipartUpload={"Parts": parts})
        out["complete"] = "completed"
    except Exception as exc:
        out["complete"] = f"{type(exc).__name__}: {exc}"
else:
    c = s3(ep2)
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="repo", Prefix="main/").get("Contents", [])]
    out["keys"] = keys
    c.put_object(Bucket="repo", Key="main/after.txt", Body=b"after")
    out["after"] = c.get_object(Bucket="repo", Key="main/after.txt")["Body"].read().decode()
print(json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def gw_lake() -> Iterator[tuple[Cluster, str, str]]:
    why = available()
    if why is not None:
        pytest.fail(f"cluster tests cannot run here: {why}") if under_ci() else pytest.skip(why)
    remove_stale()
    with cluster(["db", "s3", "gw1", "gw2", "client"], deadline=900, mounts=["client"]) as c:
        client = c["client"]
        client.lakemount("repo", "create", "lakefs://repo")
        client.lakemount("auth", "users", "create", "--id", "etl")
        client.lakemount("auth", "users", "policies", "attach", "--id", "etl", "--policy", "Admin")
        cred = json.loads(client.lakemount("auth", "users", "credentials", "create", "--id", "etl", "--json").stdout)
        c.start_gateway(c["gw1"])
        c.start_gateway(c["gw2"])
        yield c, cred["access_key_id"], cred["secret_access_key"]


def _landing_sizes(gw: Host) -> list[int]:
    """Sizes of the gateway's landing files (uploads it is receiving into ``<home>/tmp``)."""
    sizes = []
    for p in Path(gw.home, "tmp").glob(".tmp-gw-*"):
        with contextlib.suppress(FileNotFoundError):
            sizes.append(p.stat().st_size)
    return sizes


def test_kill_9_of_a_gateway_during_a_multipart_upload(gw_lake: tuple[Cluster, str, str]) -> None:
    c, key, secret = gw_lake
    client, gw1, gw2 = c["client"], c["gw1"], c["gw2"]
    ep1, ep2 = f"http://{gw1.ip}:8000", f"http://{gw2.ip}:8000"
    servers = [p for p in gw1.procs if "serve" in p.args]
    assert len(servers) == 1 and servers[0].poll() is None, "gw1's gateway is not running"

    log = f"{client.home}/mp.out"
    up = client.spawn(sys.executable, "-c", CLIENT, ep1, ep2, key, secret, "upload", env=c.env(client), log=log)
    end = time.monotonic() + 120
    while '"part1": true' not in open(log).read():
        assert up.poll() is None and time.monotonic() < end, open(log).read()
        time.sleep(0.02)
    # part 2 (64 MiB) is landing on gw1 once a landing file outgrows part 1 (5 MiB)
    while not any(size > 6 * MiB for size in _landing_sizes(gw1)):
        assert up.poll() is None and time.monotonic() < end, open(log).read()
        time.sleep(0.005)
    c.kill_host_processes(gw1)
    assert servers[0].wait(timeout=30) == -signal.SIGKILL
    assert [int(p) for p in subprocess.run(["ip", "netns", "pids", gw1.ns], capture_output=True, text=True).stdout.split()] \
        == [gw1.anchor.pid], "a process on gw1 survived the kill"
    landed = max(_landing_sizes(gw1))
    assert 6 * MiB < landed < 64 * MiB, f"part 2 was not in flight when gw1 died: {landed} bytes landed"
    up.wait(timeout=120)
    result = json.loads(open(log).read().strip().splitlines()[-1])
    # the client saw part 2's connection drop, and gw1 gone when it tried to complete: refused, or accepted
    # by the kernel for a listening socket whose last holder (supervisor or worker) was still dying, then reset
    assert result["part2"].startswith("ConnectionClosedError"), result
    assert result["complete"].startswith(("EndpointConnectionError", "ConnectionClosedError")), result
    # gw2 and the mounts never see the unfinished object; gw2 keeps serving
    try:
        other = json.loads(client.python(CLIENT, ep1, ep2, key, secret, "check", timeout=120).strip().splitlines()[-1])
    except RuntimeError as exc:  # say what gw2 was doing: a flake under load must leave evidence
        tail = Path(f"{gw2.home}/gateway.log").read_text(errors="replace")[-3000:]
        pids = subprocess.run(["ip", "netns", "pids", gw2.ns], capture_output=True, text=True).stdout.split()
        raise AssertionError(f"{exc}\ngw2 processes {pids}; gw2's log: {tail}") from None
    assert "main/mp.bin" not in other["keys"] and other["after"] == "after", other
    assert "mp.bin" not in client.run("ls", "/lake/repo/main/").stdout.split()
    assert client.read("/lake/repo/main/after.txt") == b"after"
    # gw1 comes back on its own stores, no repair needed: a new process serves, reads and writes
    again_server = c.start_gateway(gw1)
    assert again_server.pid != servers[0].pid and again_server.poll() is None
    again = json.loads(client.python(CLIENT, ep2, ep1, key, secret, "check", timeout=120).strip().splitlines()[-1])
    assert "main/mp.bin" not in again["keys"] and again["after"] == "after", again
