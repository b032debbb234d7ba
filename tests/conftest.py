import os
import random
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def run_python(*arguments, env=None, timeout=30):
    """Runs a Python entry point of the project as a user would, from the project root."""
    return subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive TCP ports that nothing uses right now.

    Taken below Linux's ephemeral range (32768 and up), where the launchers' own outgoing
    connections would otherwise land on a port a test is about to listen on.
    """
    for _ in range(1000):
        first = random.randrange(20000, 32000 - count)
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports in [20000, 32000)")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def one_worker_env(results_dir, host: str = "worker-0", **variables: str) -> dict[str, str]:
    """The environment of a one-worker launcher that reports to `results_dir`, on a free side port."""
    return {
        "PATH": os.environ["PATH"],
        "TF_WORKER_HOSTS": host,
        "TF_TASK_INDEX": "0",
        "TF_RESULTS_DIR": str(results_dir),
        "TF_RENDEZVOUS_PORT": str(free_port()),
        **variables,
    }
