"""Chapter 10's safety finding still holds: torchrun's store listens on every interface.

Chapter 10 shows ``torchrun --standalone`` without running it, because with torch 2.13 its
store binds the wildcard address (``0.0.0.0`` / ``::``) even when told 127.0.0.1. This test
checks that claim without exposing anything: it runs torchrun inside a private network
namespace (``unshare -rn``), whose only interface is loopback, and reads that namespace's
listening sockets from ``/proc/net/tcp*``. If a later torch binds loopback only, the test
fails: the chapter can then run its local torchrun demo. Skipped where unprivileged
network namespaces are not available.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ppbook.runtime.context import _decode_address

TORCHRUN = Path(sys.executable).parent / "torchrun"

WORKER = textwrap.dedent(
    """
    import pathlib
    import torch.distributed as dist

    dist.init_process_group("gloo")  # the agent's store is up while this rank runs
    for table in ("tcp", "tcp6"):
        for line in pathlib.Path("/proc/net", table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                print("LISTEN", fields[1], flush=True)
    dist.destroy_process_group()
    """
)


def _namespace_works() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _namespace_works(), reason="needs unprivileged network namespaces")
@pytest.mark.parametrize(
    "flags",
    [
        ["--standalone"],
        ["--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29517"],
    ],
)
def test_torchrun_store_binds_every_interface(tmp_path, flags):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command = " ".join([str(TORCHRUN), *flags, "--nproc-per-node", "1", str(script)])
    run = subprocess.run(
        ["unshare", "-rn", "sh", "-c", f"ip link set lo up && {command}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    hosts = {
        _decode_address(line.split()[1]).rsplit(":", 1)[0]
        for line in run.stdout.splitlines()
        if line.startswith("LISTEN ")
    }
    assert hosts & {"0.0.0.0", "[::]"}, f"torchrun listened on {hosts}: update chapter 10"
