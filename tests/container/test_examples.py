"""The examples (examples/), each a project as a user brings it, run end to end through scripts/run.

Every run has a Compose project name of its own and is taken down whatever happens; the
examples' files are never edited (they are mounted read-only on the workers).
"""

import json
import subprocess
import threading
import time
import uuid

import pytest

from tests.container.conftest import LEGACY_KERAS, TUTORIAL_FIGURES, wait_for_line
from trainer.contract.exitcodes import ExitCode

KERAS_FIT = ["--project", "examples/keras-fit", "--data", "examples/keras-fit/data"]


def wait_until_created(container: str, *, since: str, timeout: float) -> None:
    """Returns once Docker has created the container (its `create` event): scripts/run sets up first."""
    command = ["docker", "events", "--since", since, "--filter", "event=create", "--filter", f"container={container}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as events:
        timer = threading.Timer(timeout, events.kill)
        timer.start()
        try:
            created = events.stdout.readline()
        finally:
            timer.cancel()
            events.kill()
    assert created, f"{container} was not created within {timeout}s"


def final_records(output: str) -> list[dict]:
    """Every worker's final-metrics JSON line (trainer.reporting prints them for the examples)."""
    return [json.loads(line.split("| ", 1)[-1]) for line in output.splitlines() if '| {"event": "final"' in line]


@pytest.mark.parametrize("workers", [2, 3])
def test_the_tutorials_program_runs_unchanged_as_a_project(scripts_run, workers):
    run = scripts_run(
        "--project", "examples/tutorial", "--command", "python multiworker_train.py", "--workers", str(workers)
    )
    result = run.finish()
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert f"verdict: PASS: {workers} of {workers} workers agree: replicas={workers} " in result.stdout
    if workers == 2:
        assert TUTORIAL_FIGURES in result.stdout


@pytest.mark.parametrize("workers", [2, 3])
def test_a_keras_fit_project_with_requirements_data_and_a_setting_passes(scripts_run, workers):
    run = scripts_run(*KERAS_FIT, *LEGACY_KERAS, "--env", "FIT_EPOCHS=3", "--workers", str(workers))
    result = run.finish()
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert f"verdict: PASS: {workers} of {workers} workers agree: replicas={workers} " in result.stdout
    finals = final_records(result.stdout)
    assert sorted(record.pop("worker") for record in finals) == list(range(workers))
    assert all(record == finals[0] for record in finals), finals  # The same figures everywhere.
    assert finals[0]["replicas"] == workers and finals[0]["epochs"] == 3
    assert "Epoch 3/3" in result.stdout  # FIT_EPOCHS from --env reached the program, not config.yaml's 4.
    assert "Epoch 4/" not in result.stdout


def test_keras_3_fit_fails_in_one_line_that_names_the_fix(scripts_run):
    # Without the switch, Keras 3's fit meets the strategy's PerReplica values: the verdict says why.
    result = scripts_run(*KERAS_FIT).finish()
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout[-3000:] + result.stderr
    # Each worker's line, or one for every worker when they failed the same way (trainer/verifier/causes.py).
    reasons = [line for line in result.stdout.splitlines() if "  - worker-" in line or "  - every worker (" in line]
    assert reasons, result.stdout[-3000:]
    assert all("TF_USE_LEGACY_KERAS=1" in line for line in reasons), reasons
    assert all(len(line.split("|", 1)[-1]) < 400 for line in reasons), reasons  # One line, not a tensor dump.


@pytest.mark.parametrize("workers", [2, 3])
def test_a_custom_loop_project_with_its_own_checkpoints_passes(scripts_run, workers):
    result = scripts_run("--project", "examples/custom-loop", "--workers", str(workers)).finish()
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
    assert f"verdict: PASS: {workers} of {workers} workers agree: replicas={workers} " in result.stdout
    assert "custom-loop: epoch 4/4" in result.stdout


def test_a_keras_fit_project_resumes_after_a_worker_is_killed(scripts_run):
    # Long enough epochs that the kill lands mid-training, after epoch 1's backup is written.
    run = scripts_run(*KERAS_FIT, *LEGACY_KERAS, "--env", "FIT_STEPS_PER_EPOCH=60", "--recover")
    since = str(int(time.time()))
    process = run.start()
    try:
        wait_until_created(run.container_name("worker-1"), since=since, timeout=300)
        wait_for_line(run.container_name("worker-1"), "Epoch 2/4", timeout=300, name="worker-1")
        subprocess.run(["docker", "kill", run.container_name("worker-1")], check=True, capture_output=True, timeout=60)
        output, _ = process.communicate(timeout=420)
    finally:
        process.kill()
    assert process.returncode == ExitCode.OK, output[-4000:]
    assert "restarts: 1 of at most 3: 1: worker-1 exited 137 (killed by SIGKILL)" in output
    assert "verdict: PASS: 2 of 2 workers agree (after 1 restart): replicas=2 " in output
    # Resumed, not started over: the restarted workers' first epoch is 2 (BackupAndRestore kept
    # epoch 1), so epoch 1 was trained once in all; a restart from scratch would show it twice.
    for worker in ("worker-0", "worker-1"):
        shown = subprocess.run(
            ["docker", "logs", run.container_name(worker)], capture_output=True, text=True, timeout=60, check=True
        )
        logs = shown.stdout + shown.stderr
        assert logs.count("Epoch 1/4") == 1, logs[-3000:]
        assert "Epoch 4/4" in logs


def test_a_baked_project_runs_from_its_image_with_no_mount_of_its_folder(scripts_run):
    # Named for this run alone and removed whatever happens, so that no image of anyone else's is
    # touched (scripts/run removes superseded images only of its own default names).
    tag = f"tfc-test-baked:{uuid.uuid4().hex[:12]}"
    run = scripts_run("--project", "examples/custom-loop", "--bake", "--tag", tag)
    try:
        result = run.finish()
        assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr
        assert "verdict: PASS: 2 of 2 workers agree: replicas=2 " in result.stdout
        assert "custom-loop: epoch 4/4" in result.stdout
        for worker in ("worker-0", "worker-1"):
            inspected = subprocess.run(
                ["docker", "inspect", run.container_name(worker)],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            (container,) = json.loads(inspected.stdout)
            assert container["Config"]["Image"] == tag
            mounts = container["Mounts"]
            assert not [mount for mount in mounts if mount["Type"] == "bind"], mounts
            assert "/project" not in [mount["Destination"] for mount in mounts], mounts
        # The project is in the image, root's and read-only for the workers' user, without the
        # build context's own Dockerfile or Python's caches.
        listing = subprocess.run(
            [
                *("docker", "run", "--rm", "--network", "none", "--entrypoint", "python", tag, "-c"),
                "import os\n"
                "for folder, _, names in os.walk('/project'):\n"
                "    for name in names:\n"
                "        path = os.path.join(folder, name)\n"
                "        info = os.stat(path)\n"
                "        print(path, info.st_uid, oct(info.st_mode & 0o777), os.access(path, os.W_OK))",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.splitlines()
        files = {line.split()[0]: line.split()[1:] for line in listing}
        assert "/project/train.py" in files and "/project/loopdemo/model.py" in files, listing
        assert not [path for path in files if "__pycache__" in path or path.endswith(".Dockerfile")], listing
        assert all(uid == "0" and writable == "False" for uid, _mode, writable in files.values()), listing
    finally:
        run.down()
        subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, timeout=120)
