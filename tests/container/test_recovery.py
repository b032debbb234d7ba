"""Recovery (docs/recovery.md): a worker lost mid-training restarts the whole cluster, which
resumes from the chief's newest checkpoint and ends with the metrics of an uninterrupted run."""

import json
import re
import subprocess
import time

import pytest

from tests.conftest import ROOT
from tests.container.conftest import ComposeProject, opened_report, override
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

RECOVERY = "compose.recovery.yaml"
# Long enough epochs (about 2 s each) that a kill sent after epoch 1's line lands in epoch 2.
STEPS = "250"
SLOW = {"TRAIN_STEPS_PER_EPOCH": STEPS}


def finals(project: ComposeProject) -> dict[str, dict]:
    """Each worker's last final-metrics record, without the field that names the worker."""
    records = {}
    for service in ("worker-0", "worker-1"):
        lines = [line for line in project.logs(service).splitlines() if line.startswith('{"event": "final"')]
        assert lines, f"{service} printed no final metrics"
        record = json.loads(lines[-1])
        record.pop("worker")
        records[service] = record
    return records


def kill(project: ComposeProject, service: str) -> None:
    subprocess.run(["docker", "kill", project.container(service)], check=True, capture_output=True, timeout=30)


def verdict_killing(project: ComposeProject, service: str, *, when: str) -> tuple[int, str]:
    """The verdict's exit code and output, `service` killed once worker-0 prints `when`."""
    running = project.start_verdict()
    try:
        try:
            project.wait_for_line("worker-0", when)
        except AssertionError as missed:
            raise AssertionError(f"{missed}\n{what_each_container_was(project, running)}") from None
        kill(project, service)
        output, _ = running.communicate(timeout=180)
        return running.returncode, output
    finally:
        running.kill()


def what_each_container_was(project: ComposeProject, running) -> str:
    """For a run that never got where a test waited: every service's output as Compose showed it,
    and each worker container's state and networks (a peer once stayed unresolvable by name for
    a whole join deadline, in suite runs only: the Swarm test's `docker swarm leave` beside it, which
    now runs alone, docs/swarm.md)."""
    running.kill()
    output, _ = running.communicate(timeout=30)
    states = []
    for service in ("worker-0", "worker-1", "keeper"):
        try:
            state = project.state(service)
        except subprocess.CalledProcessError:
            states.append(f"{service}: no container")
            continue
        networks = {name: network.get("IPAddress") for name, network in state["NetworkSettings"]["Networks"].items()}
        states.append(f"{service}: {json.dumps(state['State'])} restarts {state['RestartCount']} networks {networks}")
    return "the run's output:\n" + output[-6000:] + "\n" + "\n".join(states)


@pytest.fixture(scope="module")
def uninterrupted(docker) -> dict:
    """The final metrics of the same training with nothing killed, under the keeper too."""
    project = ComposeProject(RECOVERY, environment=SLOW)
    try:
        result = project.verdict(timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "restarts: none (limit 3)" in result.stdout
        records = finals(project)
    finally:
        project.down()
    assert records["worker-0"] == records["worker-1"]
    return records["worker-0"]


def test_a_worker_killed_in_epoch_2_restarts_the_cluster_which_resumes_to_identical_metrics(
    compose_project, uninterrupted, tmp_path
):
    project = compose_project(RECOVERY, environment=SLOW)
    # Once epoch 1's checkpoint is committed: the kill lands early in epoch 2.
    code, output = verdict_killing(project, "worker-1", when="checkpoint | step 250 saved")

    assert code == 0, output
    # Resumed from epoch 1's checkpoint: the kill landed in epoch 2, and the restart really happened.
    # The killed worker is named first; worker-0 may have ended too (exit 5) by the time the keeper looked.
    assert re.search(
        r"^verifier-1  \| restarts: 1 of at most 3: 1: worker-1 exited 137 \(killed by SIGKILL\)"
        r"(, worker-0 exited 5)?, resumed from step 250$",
        output,
        re.MULTILINE,
    ), output
    assert "verdict: PASS: 2 of 2 workers agree (after 1 restart)" in output
    assert "keeper | restart 1 of at most 3: worker-1 exited 137 (killed by SIGKILL)" in project.logs("keeper")
    for service in ("worker-0", "worker-1"):
        assert "checkpoint | resuming from step 250 (/checkpoints/step-00000250)" in project.logs(service)
    # Bit for bit: the JSON carries every metric at full precision.
    assert finals(project) == {"worker-0": uninterrupted, "worker-1": uninterrupted}
    assert project.exit_code("keeper") == 0
    # Its report, made from the Compose project's containers: the restart on each worker's timeline,
    # and each resumed from step 250.
    made = subprocess.run(
        [str(ROOT / "scripts" / "report"), "--project", project.name, str(tmp_path)], capture_output=True, text=True
    )
    assert made.returncode == 0 and made.stdout == f"{tmp_path / 'report.html'}\n", made.stderr
    data, _opened = opened_report(tmp_path / "report.html", tmp_path / "browser")
    for worker in data["workers"]:
        kinds = [mark["kind"] for mark in worker["marks"]]
        assert "restart" in kinds and "resumed from step 250" in [mark["label"] for mark in worker["marks"]], kinds
        assert [phase["phase"] for phase in worker["phases"]].count("training") == 2, worker["phases"]
    assert data["verdict"]["restarts"][0]["resumed_from_step"] == 250


def test_a_chief_killed_while_writing_a_checkpoint_resumes_from_the_one_before(
    tmp_path, compose_project, uninterrupted
):
    # The chief waits 2 s between writing each checkpoint and committing it: the kill lands there.
    delay = override(tmp_path, {"worker-0": {"TFCLUSTER_FAULT_COMMIT_DELAY": "2"}})
    project = compose_project(RECOVERY, delay, environment=SLOW)
    code, output = verdict_killing(project, "worker-0", when="checkpoint | step 500 written, committing in 2s")

    assert code == 0, output
    assert re.search(
        r"1: worker-0 exited 137 \(killed by SIGKILL\)(, worker-1 exited 5)?, resumed from step 250", output
    )
    log = project.logs("worker-0")
    # The half-made step 500 was never loaded, and the next chief removed it.
    assert "checkpoint | removing .partial-step-00000500, left by a save that never finished" in log
    assert "checkpoint | resuming from step 250 (/checkpoints/step-00000250)" in log
    assert finals(project) == {"worker-0": uninterrupted, "worker-1": uninterrupted}


def test_a_resume_in_the_middle_of_an_epoch_starts_at_its_step_and_ends_as_an_uninterrupted_run(
    compose_project, uninterrupted
):
    # A checkpoint every 100 steps of 250-step epochs: the one at step 300 is in epoch 2's middle.
    project = compose_project(RECOVERY, environment={**SLOW, "TRAIN_CHECKPOINT_STEPS": "100"})
    code, output = verdict_killing(project, "worker-1", when="checkpoint | step 300 saved")

    assert code == 0, output
    assert re.search(
        r"1: worker-1 exited 137 \(killed by SIGKILL\)(, worker-0 exited 5)?, resumed from step 300", output
    )
    for service in ("worker-0", "worker-1"):
        log = project.logs(service)
        assert "checkpoint | resuming from step 300 (/checkpoints/step-00000300)" in log
        # Epoch 1 was trained once, before the kill; the restart began in epoch 2, not at step 0.
        assert log.count("epoch:   1/3") == 1, log[-3000:]
    # The epoch's loss so far and its accuracy came back with the checkpoint: bit for bit the same.
    assert finals(project) == {"worker-0": uninterrupted, "worker-1": uninterrupted}


def test_workers_offered_different_steps_to_resume_from_are_refused_not_trained_out_of_step(tmp_path, compose_project):
    # Worker 1 gets a checkpoints volume of its own, which the chief never writes to: after its
    # crash at step 6 the chief resumes from step 4 and worker 1 from nothing.
    separate = tmp_path / "separate.yaml"
    separate.write_text(
        "services:\n"
        "  worker-1:\n"
        "    environment:\n"
        "      TFCLUSTER_FAULT_EXIT_AT_STEP: '6'\n"
        "    volumes: !override [results:/results, elsewhere:/checkpoints]\n"
        "volumes:\n"
        "  elsewhere:\n"
        "    driver_opts: {type: tmpfs, device: tmpfs, o: 'uid=1000,gid=1000,mode=0700,size=16m'}\n"
    )
    project = compose_project(RECOVERY, str(separate))
    result = project.verdict(timeout=180)

    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    assert project.exit_code("keeper") == ExitCode.GAVE_UP
    assert "a configuration error, which a restart would only repeat" in result.stdout
    reason = (
        "the workers would resume from different steps (this one from {}, the mean is 2): every worker "
        "must see the chief's TF_CHECKPOINT_DIR"
    )
    assert reason.format(4) in project.logs("worker-0")
    assert reason.format(0) in project.logs("worker-1")
    # Neither trained a step out of step: both stopped at the agreement, before step 5.
    assert "checkpoint | resuming from step 4" in project.logs("worker-0")
    assert "checkpoint | none in /checkpoints: starting at step 0" in project.logs("worker-1")


def test_a_failure_that_keeps_coming_back_ends_at_the_restart_limit(tmp_path, compose_project):
    # Worker 1 crashes after step 6 every time: resumed from step 4, it gets there again.
    crash = override(tmp_path, {"worker-1": {"TFCLUSTER_FAULT_EXIT_AT_STEP": "6"}})
    project = compose_project(RECOVERY, crash, environment={"TF_RESTART_LIMIT": "1"})
    started = time.monotonic()
    result = project.verdict(timeout=180)
    elapsed = time.monotonic() - started

    # Twice in CI's fresh clones the first run of the cluster failed otherwise: worker-1 found no
    # worker-0 by name for its whole join deadline (exit 4) and the restart went to that. Every
    # service's whole log on a failure, to tell where worker-0 was.
    logs = {service: project.logs(service) for service in ("keeper", "worker-0", "worker-1")}
    every_log = "\n".join(f"--- {service}:\n{log}" for service, log in logs.items())
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    assert project.exit_code("keeper") == ExitCode.GAVE_UP
    keeper_log = logs["keeper"]
    # The first run failed as the second did: worker-1's crash (worker-0 may have lost it by then).
    assert re.search(r"keeper \| restart 1 of at most 1: (worker-0 exited 5, )?worker-1 exited 1\b", keeper_log), (
        every_log
    )
    assert "after 1 restart(s) (TF_RESTART_LIMIT=1); stopping every worker" in keeper_log
    assert "  - keeper: exited 8: keeper | gave up: " in result.stdout
    assert "worker-1 exited 1" in result.stdout
    # Two runs of the cluster, each crashing at the same step, and then no third.
    assert logs["worker-1"].count("fault | exiting 1 after step 6") == 2, every_log
    assert elapsed < 120
    for service in ("worker-0", "worker-1"):
        assert not project.state(service)["State"]["Running"]
