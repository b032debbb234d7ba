import contextlib
import fcntl
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
# The locks of the suite's processes (scripts/test runs two, pytest-xdist) over this checkout.
LOCKS = ROOT / ".tfcluster" / "tests"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked `alone` runs with no other test of the suite at once: it changes what every
    test reads (a file of this checkout, which a concurrent run would build into the image).

    Each test holds a shared lock for its whole protocol (set-up, call, teardown), an `alone` one
    the exclusive lock; a turnstile in front lets a waiting `alone` test in before the other
    process's next test. Outside pytest-xdist (one process; or the suite's own tests rerun in the
    CI job container, inside an `alone` test that holds the lock) there is nothing to share.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with _turn(alone=item.get_closest_marker("alone") is not None):
        yield


@contextlib.contextmanager
def flocked(name: str):
    """One process of the suite at a time holds the lock `name` (released when its file closes, or
    when the process ends, however it ends)."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    with open(LOCKS / name, "w") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _turn(*, alone: bool):
    with contextlib.ExitStack() as held:
        with flocked("turnstile"):  # Let go once the test holds its lock on the tests.
            tests = held.enter_context(open(LOCKS / "tests", "w"))
            fcntl.flock(tests, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield


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
