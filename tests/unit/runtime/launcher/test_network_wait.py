"""The launcher trains only on a network its shaper has measured and found as asked (trainer/contract/shaping.py)."""

import json
import subprocess
import sys
import time

from tests.conftest import ROOT, one_worker_env
from trainer.contract.exitcodes import ExitCode

REPORT = {
    "worker": "worker-0",
    "profile": "wan",
    "describe": "wan (rtt +50 ms ±5 ms)",
    "links": [{"peer": "worker-1", "rtt_ms": 12.0, "throughput_mbit": None, "loss": None}],
}


def launch(results, *, join_timeout="30"):
    env = one_worker_env(results, TF_NETWORK_PROFILE="wan", TF_JOIN_TIMEOUT=join_timeout)
    command = [sys.executable, "-m", "trainer.launcher", "--", sys.executable, "-c", "print('trained')"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def published_run(results) -> str:
    """What the shaper reads first: the run its launcher publishes in its running status."""
    status = results / "worker-0.status"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if status.exists() and (run := json.loads(status.read_text()).get("run")):
            return run
        time.sleep(0.05)  # A stand-in for the shaper, which waits for the file the same way.
    raise AssertionError("the launcher never published its run")


def report_as_shaper(results, **fields) -> None:
    # Whole, by a rename, as the shaper writes it: the launcher may look at any moment, and a
    # file caught half-written is not a report (the launcher then fails on it, exit 1).
    written = results / "network-worker-0.json.tmp"
    written.write_text(json.dumps({**REPORT, "run": published_run(results), **fields}))
    written.rename(results / "network-worker-0.json")


def finish(launcher) -> tuple[int, str]:
    output, _ = launcher.communicate(timeout=60)
    return launcher.returncode, output


def test_shaping_that_misses_its_profile_stops_the_worker_before_training(tmp_path):
    launcher = launch(tmp_path)
    checks = [{"check": "rtt to worker-1 12.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)", "ok": False}]
    report_as_shaper(tmp_path, checks=checks, ok=False)
    code, output = finish(launcher)
    assert code == ExitCode.CONFIG_ERROR
    assert "network wan (rtt +50 ms ±5 ms): measured worker-1 rtt 12.00 ms" in output
    assert (
        "the network shaping misses its profile: rtt to worker-1 12.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)"
        in output
    )
    assert "trained" not in output
    status = json.loads((tmp_path / "worker-0.status").read_text())
    assert status["reason"] == (
        "launcher | worker-0:12345: the network shaping misses its profile: "
        "rtt to worker-1 12.0 ms (expected 40.0 ms to 60.0 ms: OUTSIDE)"
    )


def test_shaping_as_asked_lets_the_worker_train(tmp_path):
    launcher = launch(tmp_path)
    report_as_shaper(tmp_path, checks=[], ok=True)
    code, output = finish(launcher)
    assert code == 0, output
    assert "trained" in output


def test_an_earlier_runs_report_is_not_this_ones(tmp_path):
    # Left by a shaper of the worker's previous container: another network namespace.
    (tmp_path / "network-worker-0.json").write_text(json.dumps({**REPORT, "run": "earlier", "checks": [], "ok": True}))
    code, output = finish(launch(tmp_path, join_timeout="1"))
    assert code == ExitCode.CONFIG_ERROR
    assert "no network measurements from this worker's shaper within the 1s join deadline" in output
    assert "trained" not in output


def test_no_shaper_means_no_training_once_the_join_deadline_passes(tmp_path):
    code, output = finish(launch(tmp_path, join_timeout="1"))
    assert code == ExitCode.CONFIG_ERROR
    assert "no network measurements from this worker's shaper within the 1s join deadline" in output
    assert "trained" not in output
    reason = json.loads((tmp_path / "worker-0.status").read_text())["reason"]
    assert reason.startswith(
        "launcher | worker-0:12345: no network measurements from this worker's shaper within the 1s join deadline"
    )
    assert f"{reason}\n" in output  # The reason is the launcher's printed line.
