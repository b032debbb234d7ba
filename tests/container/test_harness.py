"""The core harness end to end: two worker containers, the verifier, the tutorial's figures."""

import os
import re
import subprocess
import uuid

import pytest

from tests.conftest import ROOT, run_python
from tests.container.conftest import verdict_lines
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

FIGURES = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"
# TensorFlow's C++ log lines (absl's form) and the line absl prints before the first of them.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] ")
ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def test_two_workers_train_in_sync_and_the_verifier_passes(compose_project):
    project = compose_project()
    result = project.verdict()
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verdict: PASS: 2 of 2 workers agree: {FIGURES}" in result.stdout
    # No straggler in a normal run (a slowed one is named: tests/container/test_slow_worker.py).
    assert "slowest worker" not in result.stdout
    for index in (0, 1):
        log = project.logs(f"worker-{index}")
        assert f"worker={index} {FIGURES}" in log
        assert "train | epoch:   3/3   | step:     12 | loss: 0.4168 | accuracy: 0.8281" in log
        assert not [line for line in log.splitlines() if CPP_LOG_LINE.match(line)]  # Quiet by default.
        assert ABSL_PREAMBLE not in log
        assert project.exit_code(f"worker-{index}") == 0
        state = project.state(f"worker-{index}")
        assert state["Config"]["Hostname"] == f"worker-{index}"
        assert state["Config"]["User"] == "1000:1000"
        assert state["HostConfig"]["ReadonlyRootfs"] is True
        assert state["HostConfig"]["PortBindings"] in (None, {})
    network = subprocess.run(
        ["docker", "network", "inspect", "-f", "{{.Internal}}", f"{project.name}_cluster"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert network.stdout.strip() == "true"


def test_tensorflows_startup_lines_are_shown_when_asked_for(compose_project):
    project = compose_project(environment={"TF_STARTUP_LOGS": "1"})
    result = project.verdict()
    assert result.returncode == 0, result.stdout + result.stderr
    for index in (0, 1):
        log = project.logs(f"worker-{index}")
        assert ABSL_PREAMBLE in log
        assert f"Started server with target: grpc://worker-{index}:12345" in log
        assert len([line for line in log.splitlines() if CPP_LOG_LINE.match(line)]) >= 3, log


@pytest.mark.parametrize("count", [1, 3, 4])
def test_any_number_of_workers_trains_in_sync(compose_project, tmp_path, count):
    override = tmp_path / "workers.yaml"
    rendered = run_python("scripts/workers.py", str(count), "--output", str(override))
    assert rendered.returncode == 0, rendered.stderr
    # The rendered file names compose.yaml relative to itself: point it at the project's.
    override.write_text(override.read_text().replace("file: compose.yaml", f"file: {ROOT / 'compose.yaml'}"))
    project = compose_project(str(override))
    result = project.verdict(timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verdict: PASS: {count} of {count} workers agree: replicas={count} " in result.stdout
    assert "slowest worker" not in result.stdout
    finals = {}
    for index in range(count):
        assert project.state(f"worker-{index}")["Config"]["Hostname"] == f"worker-{index}"
        (line,) = [line for line in project.logs(f"worker-{index}").splitlines() if line.startswith("worker=")]
        finals[index] = line.split(" ", 1)[1]
    # Identical figures on every worker (only the worker number differs), for as many as were asked.
    assert len(set(finals.values())) == 1, finals
    assert finals[0].startswith(f"replicas={count} ")


def test_plain_compose_up_ends_with_the_verdict_in_the_logs(compose_project):
    project = compose_project()
    result = project.compose("up", timeout=120)
    assert result.returncode == 0, result.stderr
    verifier_lines = verdict_lines(result.stdout)
    assert f"verdict: PASS: 2 of 2 workers agree: {FIGURES}; weights identical at " in verifier_lines[-1]
    assert f"worker-0-1  | worker=0 {FIGURES}" in result.stdout


def test_a_worker_failing_its_training_check_fails_the_verdict(compose_project):
    project = compose_project("tests/fixtures/compose/strict-worker-1.yaml")
    result = project.verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout + result.stderr
    assert "verdict: FAIL: 1 problem(s)" in result.stdout
    assert (
        "worker-1: exited 3: trainer: training check failed: final_accuracy (0.8281) is not above 0.99" in result.stdout
    )
    assert project.exit_code("worker-1") == ExitCode.TRAINING_CHECK_FAILED
    assert project.exit_code("worker-0") == 0


def test_the_tutorials_unchanged_program_runs_and_verifies_from_its_saved_logs(compose_project, tmp_path):
    # Bring your own trainer (compose.byo.yaml): the tutorial's program, byte for byte as published.
    script = "./examples/tutorial/multiworker_train.py"
    project = compose_project("compose.byo.yaml", environment={"TRAINER_SCRIPT": script})
    result = project.verdict()
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"verdict: PASS: 2 of 2 workers agree: {FIGURES}" in result.stdout

    logs = []
    for index in (0, 1):
        path = tmp_path / f"worker-{index}.log"
        path.write_text(project.logs(f"worker-{index}"))
        assert f"worker={index} {FIGURES}" in path.read_text()
        logs.append(str(path))
    # With the workers' exit codes, as CI keeps them beside the logs (docs/verifier.md).
    codes = tmp_path / "exit-codes.txt"
    codes.write_text(
        project.compose("ps", "-a", "--format", "{{.Service}} {{.ExitCode}}", "worker-0", "worker-1").stdout
    )
    assert codes.read_text().split() == ["worker-0", "0", "worker-1", "0"]
    # The host entry point, from any folder.
    verify = [str(ROOT / "scripts" / "verify"), "--exit-codes-from", str(codes), *logs]
    saved = subprocess.run(verify, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert saved.returncode == 0, saved.stdout
    assert f"verdict: PASS: 2 of 2 workers agree: {FIGURES}" in saved.stdout
    # Without them, agreeing logs do not say that each worker exited 0.
    unknown = subprocess.run(verify[:1] + logs, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert unknown.returncode == ExitCode.VERIFICATION_FAILED
    assert "worker-0: exit status unknown" in unknown.stdout

    tampered = tmp_path / "worker-1.log"
    tampered.write_text(tampered.read_text().replace("final_loss=0.4168", "final_loss=0.4170"))
    differing = subprocess.run(verify, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert differing.returncode == ExitCode.VERIFICATION_FAILED
    assert "final_loss differs: worker-0=0.4168 worker-1=0.4170" in differing.stdout


def test_bring_your_own_trainer_names_the_missing_setting(compose_project):
    project = compose_project("compose.byo.yaml", environment={"TRAINER_SCRIPT": ""})
    result = project.verdict(timeout=60)
    assert result.returncode != 0
    assert "set TRAINER_SCRIPT to the path of your training script" in result.stderr


def test_the_image_holds_nothing_training_never_opens(docker):
    # The slimming of docker/Dockerfile: a rebuilt image that brought any of these back would be
    # both larger and slower to rebuild (docs/benchmark.md).
    site = "/opt/venv/lib/python3.11/site-packages"
    script = (
        f"for path in {site}/tensorflow/include {site}/clang {site}/pip {site}/setuptools {site}/wheel "
        f"{site}/uv /opt/venv/bin/pip /opt/venv/bin/uv /usr/share/man/man1 /usr/share/locale/de; "
        "do test -e $path && echo present: $path; done; "
        f"find {site} -type d -name tests | sed 's/^/present: /'; "
        f"test -s {site}/tensorflow/libtensorflow_cc.so.2 || echo missing: libtensorflow_cc"
    )
    listed = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", "tfcluster:latest", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "", listed.stdout


def test_extra_requirements_go_into_an_image_of_their_own(docker):
    # A bring-your-own trainer's packages, downloaded on the host and installed offline in the image.
    image = f"tfcluster-test-extra:{uuid.uuid4().hex[:8]}"
    environment = {**os.environ, "TFCLUSTER_IMAGE": image, "EXTRA_REQUIREMENTS": "tqdm==4.70.1"}
    try:
        subprocess.run([str(ROOT / "scripts" / "setup")], env=environment, check=True, timeout=900)
        version = "import tqdm; print(tqdm.__version__)"
        extra = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", version],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert extra.stdout.strip() == "4.70.1", extra.stderr
        default = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python", "tfcluster:latest", "-c", version],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert default.returncode == 1 and "No module named 'tqdm'" in default.stderr
    finally:
        subprocess.run(["docker", "image", "rm", "--force", image], capture_output=True, timeout=60)
