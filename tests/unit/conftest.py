"""Launchers of one loopback cluster, with stand-in training programs (no TensorFlow, no Docker)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

SLEEPER = [sys.executable, "-c", "print('training', flush=True); import time; time.sleep(120)"]

# A launcher with some of its modules changed first: `{patches}` is Python run before its main().
PATCHED_LAUNCHER = """
import sys
from trainer.launcher import __main__ as launcher, lingering, rendezvous, watchdog
{patches}
sys.exit(launcher.main(sys.argv[1:]))
"""


@pytest.fixture
def cluster():
    """Starts launchers of one loopback cluster; kills whatever is left of them after the test.

    Each worker runs the stand-in program its test gives it, which may differ between workers:
    so their commands are not compared (TFCLUSTER_COMPARE_COMMAND=0) unless a test asks for it.
    """
    ports = [free_port(), free_port()]
    base = free_port(3)  # Side ports of up to three workers on one host: base, base + 1, base + 2.
    launched = []

    def start(index, command=SLEEPER, *, patches=None, **variables):
        env = {
            "PATH": os.environ["PATH"],
            "TF_WORKER_HOSTS": ",".join(f"127.0.0.1:{port}" for port in ports),
            "TF_TASK_INDEX": str(index),
            "TF_RENDEZVOUS_PORT": str(base),
            "TFCLUSTER_COMPARE_COMMAND": "0",
            **variables,
        }
        entry = ["-m", "trainer.launcher"] if patches is None else ["-c", PATCHED_LAUNCHER.format(patches=patches)]
        launcher = subprocess.Popen(
            [sys.executable, *entry, "--", *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        launched.append(launcher)
        return launcher

    start.ports = ports
    start.base = base
    yield start
    for launcher in launched:
        launcher.kill()
        launcher.wait(timeout=10)


def finish(launcher, timeout=30) -> tuple[int, str, float]:
    started = time.monotonic()
    output, _ = launcher.communicate(timeout=timeout)
    return launcher.returncode, output, time.monotonic() - started


def recorded_status(results_dir, host: str) -> dict:
    """The status a launcher that has exited left in its results directory."""
    return json.loads((Path(results_dir) / f"{host}.status").read_text())
