"""The launcher trains only on a network its shaper has measured and found as asked (trainer/network.py)."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, free_port
from trainer.exitcodes import ExitCode

REPORT = {
    "worker": "worker-0",
    "profile": "wan",
    "describe": "wan (rtt +50 ms ±5 ms)",
    "links": [{"peer": "worker-1", "rtt_ms": 12.0, "throughput_mbit": None, "loss": None}],
}


def launch(results, *, join_timeout="30"):
    env = {
        "PATH": os.environ["PATH"],
        "TF_WORKER_HOSTS": "worker-0",
        "TF_TASK_INDEX": "0",
        "TF_RESULTS_DIR": str(results),
        "TF_RENDEZVOUS_PORT": str(free_port()),
        "TF_NETWORK_PROFILE": "wan",
        "TF_JOIN_TIMEOUT": join_timeout,
    }
    command = [sys.executable, "-m", "trainer.launch", "--", sys.executable, "-c", "print('trained')"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_shaping_that_misses_its_profile_stops_the_worker_before_training(tmp_path):
    checks = [{"check": "rtt to worker-1 12.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)", "ok": False}]
    (tmp_path / "network-worker-0.json").write_text(json.dumps({**REPORT, "checks": checks, "ok": False}))
    result = launch(tmp_path)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert "network wan (rtt +50 ms ±5 ms): measured worker-1 rtt 12.00 ms" in result.stdout
    assert (
        "the network shaping misses its profile: rtt to worker-1 12.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)"
        in result.stdout
    )
    assert "trained" not in result.stdout


def test_shaping_as_asked_lets_the_worker_train(tmp_path):
    (tmp_path / "network-worker-0.json").write_text(json.dumps({**REPORT, "checks": [], "ok": True}))
    result = launch(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "trained" in result.stdout


def test_no_shaper_means_no_training_once_the_join_deadline_passes(tmp_path):
    result = launch(tmp_path, join_timeout="1")
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert "no network measurements from this worker's shaper within the 1s join deadline" in result.stdout
    assert "trained" not in result.stdout
