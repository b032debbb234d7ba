"""The results protocol between a worker's launcher and the verifier, with real processes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, one_worker_env, run_python
from tests.observations import records
from trainer.contract.exitcodes import ExitCode
from trainer.contract.resultsdir import Recorder, WorkerFiles, live_status, recorded_exit_code, wait_for_exit
from trainer.launcher.peers import recorded_exits


@pytest.fixture
def launch():
    """Starts single-worker launchers; kills whatever is left of them after the test."""
    launched = []

    def start(results_dir, command, name="worker-0", **variables):
        env = one_worker_env(results_dir, name, **variables)
        launcher = subprocess.Popen(
            [sys.executable, "-m", "trainer.launcher", "--", *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
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
    alive = live_status(files)
    assert alive["state"] == "running" and alive["workers"] and alive["run"]
    launcher.kill()  # SIGKILL: the launcher gets no chance to write an exit status.
    launcher.wait(timeout=10)
    # Its `running` status stays behind; a shaper started again must not take it for a live run's.
    assert json.loads(files.status.read_text())["run"] == alive["run"]
    assert live_status(files) is None
    started = time.monotonic()
    record = wait_for_exit(files, started + 10, time.monotonic)
    assert record.state == "killed"
    assert record.exit_code is None
    assert "started" in record.log
    assert time.monotonic() - started < 1.0  # The released lock is the event; nothing waits out a timer.
    # The next launcher's recorder removes it before it takes the lock: live, it is the new run's.
    files.progress.write_text('{"steps": 12}')
    recorder = Recorder(files, run="next")
    assert live_status(files) == {"state": "running", "pid": os.getpid(), "run": "next"}
    assert not files.progress.exists()
    recorder.finish(0)
    assert live_status(files) is None


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


# On SIGTERM it takes a while to save, as TensorFlow's PreemptionCheckpointHandler does, then ends.
SAVES_ON_SIGTERM = """
import os, signal, sys, time
def save(*_):
    time.sleep(1.5)
    os.write(1, b"saved\\n")  # Not print(): the signal may come while print() holds stdout.
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
print("up", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(("grace", "saved"), [("6", True), ("0.5", False)])
def test_the_stop_grace_is_how_long_a_stopped_program_may_take_to_end(tmp_path, launch, grace, saved):
    launcher = launch(tmp_path, [sys.executable, "-c", SAVES_ON_SIGTERM], TF_STOP_GRACE=grace)
    read_until(launcher.stdout, "up\n")
    started = time.monotonic()
    launcher.send_signal(signal.SIGTERM)  # As `docker compose stop` does: the launcher passes it on.
    assert launcher.wait(timeout=10) == ExitCode.TERMINATED
    output = launcher.stdout.read()
    # With the shorter grace, SIGKILL comes before the save is done.
    assert ("saved\n" in output) is saved, output
    assert time.monotonic() - started < 5


def test_a_bad_stop_grace_is_a_config_error(tmp_path, launch):
    launcher = launch(tmp_path, [sys.executable, "-c", "print('never')"], TF_STOP_GRACE="0")
    assert launcher.wait(timeout=30) == ExitCode.CONFIG_ERROR
    assert launcher.stderr.read() == "trainer: config error: `TF_STOP_GRACE` (0.0) must be in (0, 3600] seconds\n"
    assert launcher.stdout.read() == ""


def test_a_peers_recorded_exit_is_read_only_from_an_exit_status_of_this_run(tmp_path):
    files = WorkerFiles(tmp_path, "worker-1")
    assert recorded_exit_code(files) is None  # No status at all.
    files.status.write_text('{"state": "running", "pid": 7}')
    assert recorded_exit_code(files) is None
    files.status.write_text('{"state": "exited", "exit_code": 0}')
    assert recorded_exit_code(files) == 0
    assert recorded_exit_code(files, written_since=time.time() + 60) is None  # An earlier run's.
    files.status.write_text('{"state": "exited", "exit_code": 5, "reason": "lost peer"}')
    assert recorded_exit_code(files) == 5
    files.status.write_text("{not json")
    assert recorded_exit_code(files) is None


def test_peers_exits_are_read_from_a_shared_results_directory_but_never_this_workers_own(tmp_path):
    since = time.time() - 1
    for name, exit_code in (("worker-0", 3), ("worker-1", 0)):
        WorkerFiles(tmp_path, name).status.write_text(f'{{"state": "exited", "exit_code": {exit_code}}}')
    recorded = recorded_exits(str(tmp_path), own_host="worker-0", since=since)
    assert recorded("worker-1:12345") == 0
    assert recorded("worker-2:12345") is None
    assert recorded("worker-0:2222") is None  # Another process on this host: the status file is this one's.
    assert recorded_exits(None, own_host="worker-0", since=since)("worker-1:12345") is None


def test_verify_waits_on_a_results_directory(tmp_path):
    # A stand-in for a TensorFlow program: it prints its metrics and appends what the observer would
    # record to the file the launcher names; the launcher copies that into the log the verifier reads.
    program = (
        'import os; print(\'{"event": "final", "worker": 0, "replicas": 1, "final_loss": 0.5}\'); '
        f'open(os.environ["TFCLUSTER_OBSERVER"], "a").write({records(0, workers=1)!r})'
    )
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


def test_a_full_results_volume_stops_the_run_at_once_naming_the_volume_and_loses_no_status(tmp_path, launch):
    # /dev/full answers every write with ENOSPC, as a full tmpfs does; the launcher's log is there.
    os.symlink("/dev/full", tmp_path / "worker-0.log")
    program = "import time; print('a line', flush=True); time.sleep(120); print('never')"
    started = time.monotonic()
    launcher = launch(tmp_path, [sys.executable, "-c", program])
    stdout, _stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == ExitCode.VOLUME_FULL
    # Promptly: the program is stopped at the first line that did not fit, not at its deadline.
    assert time.monotonic() - started < 30
    # Its output still reaches its own stdout (docker logs), and the launcher says why, once.
    assert "a line" in stdout
    stopping = [line for line in stdout.splitlines() if "the results volume" in line and not line.startswith("{")]
    assert len(stopping) == 2  # When it found out, and its final reason (and that as data, the failed event).
    assert f"the results volume {tmp_path} is full (" in stopping[0] and ", TF_RESULTS_SIZE): " in stopping[0]
    assert "Traceback" not in stdout + _stderr
    # The status, written in the room kept for it, says what happened.
    status = json.loads((tmp_path / "worker-0.status").read_text())
    assert status["exit_code"] == ExitCode.VOLUME_FULL
    assert status["volume_full"] == "no space left"
    assert "the results volume" in status["reason"]
    assert not (tmp_path / "worker-0.reserve").exists()
    # (Not read back through wait_for_exit: it reads the log, and /dev/full reads as endless zeros.)
    assert recorded_exit_code(WorkerFiles(tmp_path, "worker-0")) == ExitCode.VOLUME_FULL


def test_a_volume_full_before_the_launcher_starts_is_named_as_full_and_nothing_trains(tmp_path, launch):
    # A keeper's restart after a chatty run: the very first status write finds no room (/dev/full
    # answers ENOSPC, as a full tmpfs does). Before, a traceback.
    os.symlink("/dev/full", tmp_path / "worker-0.status.tmp")
    launcher = launch(tmp_path, [sys.executable, "-c", "print('trained', flush=True)"])
    stdout, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == ExitCode.VOLUME_FULL, stderr
    assert "Traceback" not in stdout + stderr and "trained" not in stdout
    [line] = stderr.splitlines()
    assert line.startswith(f"launcher | worker-0: the results volume {tmp_path} is full (")
    assert line.endswith(
        ", TF_RESULTS_SIZE) before this worker started: its status and log cannot be kept there, so it does not train"
    )
    assert json.loads(stdout.splitlines()[-1]) == {"event": "failed", "exit_code": ExitCode.VOLUME_FULL, "reason": line}


def test_a_chief_as_tfjob_names_it_runs_and_its_program_gets_tf_config_in_that_form(tmp_path, launch):
    tf_config = '{"cluster":{"chief":["chief-0:12345"]},"task":{"type":"chief","index":0}}'
    program = "import os; print('TF_CONFIG=' + os.environ['TF_CONFIG'])"
    launcher = launch(tmp_path, [sys.executable, "-c", program], name="chief-0", TF_CONFIG=tf_config)
    assert launcher.wait(timeout=30) == 0
    record = wait_for_exit(WorkerFiles(tmp_path, "chief-0"), time.monotonic() + 5, time.monotonic)
    assert (record.state, record.exit_code) == ("exited", 0)
    assert f"TF_CONFIG={tf_config}" in record.log
