"""The results protocol between a worker's launcher and the verifier, with real processes."""

import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, one_worker_env, run_python
from trainer.contract.resultsdir import WorkerFiles, wait_for_exit


@pytest.fixture
def launch():
    """Starts single-worker launchers; kills whatever is left of them after the test."""
    launched = []

    def start(results_dir, command, name="worker-0"):
        env = one_worker_env(results_dir, name)
        launcher = subprocess.Popen(
            [sys.executable, "-m", "trainer.launcher", "--", *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        launched.append(launcher)
        return launcher

    yield start
    for launcher in launched:
        launcher.kill()
        launcher.wait(timeout=10)


def read_until(stream, expected: str) -> None:
    for line in stream:
        if line == expected:
            return
    raise AssertionError(f"{expected!r} never came")


def test_an_exited_worker_reports_its_exit_code_and_log(tmp_path, launch):
    program = "import os; print('TF_CONFIG=' + os.environ['TF_CONFIG']); raise SystemExit(3)"
    launcher = launch(tmp_path, [sys.executable, "-c", program])
    assert launcher.wait(timeout=30) == 3
    record = wait_for_exit(WorkerFiles(tmp_path, "worker-0"), time.monotonic() + 5, time.monotonic)
    assert (record.state, record.exit_code) == ("exited", 3)
    assert "reason" not in record.details  # The program's own failure: its log says why.
    assert 'TF_CONFIG={"cluster":{"worker":["worker-0:12345"]},"task":{"type":"worker","index":0}}' in record.log


def test_a_killed_worker_is_told_apart_from_an_exited_one(tmp_path, launch):
    launcher = launch(tmp_path, [sys.executable, "-c", "print('started', flush=True); import time; time.sleep(60)"])
    read_until(launcher.stdout, "started\n")
    files = WorkerFiles(tmp_path, "worker-0")
    still_running = wait_for_exit(files, time.monotonic() + 0.5, time.monotonic)
    assert still_running.state == "running"
    launcher.kill()  # SIGKILL: the launcher gets no chance to write an exit status.
    launcher.wait(timeout=10)
    started = time.monotonic()
    record = wait_for_exit(files, started + 10, time.monotonic)
    assert record.state == "killed"
    assert record.exit_code is None
    assert "started" in record.log
    assert time.monotonic() - started < 1.0  # The released lock is the event; nothing waits out a timer.


def test_a_worker_that_never_started_is_missing(tmp_path):
    record = wait_for_exit(WorkerFiles(tmp_path, "worker-9"), time.monotonic() + 0.3, time.monotonic)
    assert record.state == "missing"


def test_sigterm_stops_a_program_that_ignores_it_within_the_grace_period(tmp_path, launch):
    ignores_sigterm = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    )
    launcher = launch(tmp_path, [sys.executable, "-c", ignores_sigterm])
    read_until(launcher.stdout, "up\n")
    started = time.monotonic()
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=10) == 143
    assert time.monotonic() - started < 5
    assert "received SIGTERM" in launcher.stdout.read()
    record = wait_for_exit(WorkerFiles(tmp_path, "worker-0"), time.monotonic() + 5, time.monotonic)
    assert (record.state, record.exit_code) == ("exited", 143)
    assert record.details["reason"] == "launcher | worker-0:12345: stopped by SIGTERM"
    assert "launcher | worker-0:12345: stopped by SIGTERM\n" in record.log


def test_verify_waits_on_a_results_directory(tmp_path):
    program = 'print(\'{"event": "final", "worker": 0, "replicas": 1, "final_loss": 0.5}\')'
    env = one_worker_env(tmp_path, "solo")
    subprocess.run(
        [sys.executable, "-m", "trainer.launcher", "--", sys.executable, "-c", program],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=30,
    )
    result = run_python("-m", "trainer.verifier", "--results", str(tmp_path), "--workers", "solo", "--timeout", "5")
    assert result.returncode == 0, result.stdout
    assert "verdict: PASS: 1 of 1 workers agree: replicas=1 final_loss=0.5000" in result.stdout
