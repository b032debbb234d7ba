"""The fault matrix (docs/failures.md): every fault injected into a real
cluster of containers, asserting each worker's exit code and message, the verdict, and the bound."""

import datetime
import re
import subprocess
import time

import pytest

from tests.container.conftest import override
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(240)]

JOIN = 15  # The join deadline these tests use (the default is 60 s): long enough for one progress line.
SHORT_JOIN = 6  # Where no progress line is asserted.
LONG_TRAINING = {"TRAIN_EPOCHS": "100000"}  # Runs until stopped: about 40 epochs a second.
# A stopped worker exits 143 within TF_STOP_GRACE (2 s: TensorFlow ignores SIGTERM, so its program
# is SIGKILLed then) + 2 s, for the command to deliver the signal and the launcher to end
# (docs/exit-codes.md). Measured here: 2.6 s to 3.3 s, `docker compose stop` the slowest.
STOP_BOUND = 2 + 2


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def seconds_since(moment: datetime.datetime, later: datetime.datetime) -> float:
    return (later - moment).total_seconds()


def verifier_result(project) -> tuple[int, str]:
    code = project.wait_for_exit("verifier", timeout=120)
    return code, project.logs("verifier")


# -- a peer never starts, or its name does not resolve ---------------------------------------------


def test_a_peer_that_never_starts(compose_project):
    project = compose_project(environment={"TF_JOIN_TIMEOUT": str(JOIN)})
    started = project.compose("up", "--detach", "--no-deps", "worker-0", "verifier")
    assert started.returncode == 0, started.stderr
    assert project.wait_for_exit("worker-0") == ExitCode.PEER_NEVER_JOINED
    assert project.run_seconds("worker-0") < JOIN + 10
    log = project.logs("worker-0")
    assert "waiting for worker-1:12345 (name not resolvable) 10s/15s" in log
    assert "peer(s) never joined within the 15s join deadline: worker-1:12345 (name not resolvable)" in log
    code, verdict = verifier_result(project)
    assert code == ExitCode.VERIFICATION_FAILED
    assert "worker-0: exited 4: launcher | worker-0:12345: peer(s) never joined" in verdict
    assert "worker-1: missing: it never started" in verdict


def test_a_typo_in_the_cluster_list_names_the_host(compose_project, tmp_path):
    typo = {"TF_WORKER_HOSTS": "worker-0,worker-l"}
    project = compose_project(
        override(tmp_path, {"worker-0": typo, "worker-1": typo, "verifier": typo}),
        environment={"TF_JOIN_TIMEOUT": str(JOIN)},
    )
    project.compose("up", "--detach")
    assert project.wait_for_exit("worker-0") == ExitCode.PEER_NEVER_JOINED
    assert project.wait_for_exit("worker-1") == ExitCode.PEER_NEVER_JOINED
    for service in ("worker-0", "worker-1"):
        assert project.run_seconds(service) < JOIN + 10
        assert "train | epoch" not in project.logs(service)
    assert "never joined within the 15s join deadline: worker-l:12345 (name not resolvable)" in project.logs("worker-0")
    code, verdict = verifier_result(project)
    assert code == ExitCode.VERIFICATION_FAILED
    assert "worker-0: exited 4" in verdict


# -- topology mismatch -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "worker_0_says"),
    [
        ({"TRAIN_BATCH_SIZE": "32"}, "TRAIN_BATCH_SIZE differs: worker-0:12345 has 16, worker-1:12345 has 32"),
        ({"TRAIN_EPOCHS": "4"}, "TRAIN_EPOCHS differs: worker-0:12345 has 3, worker-1:12345 has 4"),
        ({"TRAIN_STEPS_PER_EPOCH": "5"}, "TRAIN_STEPS_PER_EPOCH differs: worker-0:12345 has 4, worker-1:12345 has 5"),
        ({"TRAIN_SEED": "8"}, "TRAIN_SEED differs: worker-0:12345 has 7, worker-1:12345 has 8"),
        (
            {"TRAIN_LEARNING_RATE": "0.01"},
            "TRAIN_LEARNING_RATE differs: worker-0:12345 has 0.03, worker-1:12345 has 0.01",
        ),
        (
            {"TF_WORKER_PORT": "23456"},
            "port of worker-0 differs: worker-0:12345 has worker-0:12345, worker-1:12345 has worker-0:23456",
        ),
        (
            {"TF_WORKER_HOSTS": "worker-0,worker-1,worker-2"},
            "worker count differs: worker-0:12345 has 2, worker-1:12345 has 3",
        ),
        (
            {"TF_WORKER_HOSTS": "worker-1,worker-0", "TF_TASK_INDEX": "0"},
            "worker 0's host differs: worker-0:12345 has worker-0, worker-1:12345 has worker-1",
        ),
    ],
    ids=["batch-size", "epochs", "steps", "seed", "learning-rate", "port", "worker-count", "cluster-order"],
)
def test_a_topology_mismatch_stops_every_worker_before_training(compose_project, tmp_path, variables, worker_0_says):
    project = compose_project(override(tmp_path, {"worker-1": variables}))
    result = project.verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    for service in ("worker-0", "worker-1"):
        assert project.exit_code(service) == ExitCode.CONFIG_ERROR, project.logs(service)
        log = project.logs(service)
        assert "topology mismatch: " in log
        assert "train | epoch" not in log  # Detected before the first training step.
        assert f"{service}: exited 2: launcher | " in result.stdout
    assert f"topology mismatch: {worker_0_says}" in project.logs("worker-0")


def test_two_workers_with_one_index(compose_project, tmp_path):
    # worker-0 waits for the peer that stopped at its config error until the join deadline: the
    # short one, not the default 60 s (nothing of worker-0's wait is asserted here).
    project = compose_project(
        override(tmp_path, {"worker-1": {"TF_TASK_INDEX": "0"}}), environment={"TF_JOIN_TIMEOUT": str(SHORT_JOIN)}
    )
    result = project.verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert project.exit_code("worker-1") == ExitCode.CONFIG_ERROR
    assert "this host is worker-1, entry 1 of the cluster, but `TF_TASK_INDEX` is 0 (worker-0)" in project.logs(
        "worker-1"
    )
    assert "worker-1: exited 2: trainer: config error: this host is worker-1" in result.stdout


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "line"),
    [
        (
            {"TF_CONFIG": "{not json"},
            "trainer: config error: TF_CONFIG is not valid JSON "
            "(Expecting property name enclosed in double quotes at character 1): '{not json'",
        ),
        ({"TF_TASK_INDEX": "one"}, "trainer: config error: `TF_TASK_INDEX` ('one') must be a non-negative integer"),
        ({"TRAIN_BATCH_SIZE": "0"}, "trainer: config error: `TRAIN_BATCH_SIZE` (0) must be in [1, 1000000]"),
        ({"TF_JOIN_TIMEOUT": "soon"}, "trainer: config error: `TF_JOIN_TIMEOUT` ('soon') must be a number"),
    ],
    ids=["tf-config-json", "index", "batch-size", "join-timeout"],
)
def test_bad_input_is_one_line_and_the_config_exit_code(compose_project, tmp_path, variables, line):
    project = compose_project(
        override(tmp_path, {"worker-1": variables}), environment={"TF_JOIN_TIMEOUT": str(SHORT_JOIN)}
    )
    project.compose("up", "--detach")
    assert project.wait_for_exit("worker-1") == ExitCode.CONFIG_ERROR
    assert project.logs("worker-1") == line + "\n"  # One line, no traceback.
    assert project.run_seconds("worker-1") < 5
    assert project.wait_for_exit("worker-0") == ExitCode.PEER_NEVER_JOINED
    code, verdict = verifier_result(project)
    assert code == ExitCode.VERIFICATION_FAILED
    assert f"worker-1: exited 2: {line}" in verdict


# -- lost peers ------------------------------------------------------------------------------------


def start_long_training(project) -> None:
    project.compose("up", "--detach")
    for service in ("worker-0", "worker-1"):
        project.wait_for_line(service, "train | epoch:   5/")


def pause(container: str, *, tries: int = 5) -> None:
    """`docker pause`, tried again while runc cannot freeze the container in time.

    On cgroup v1 (this machine's engine) runc gives up with "unable to freeze" when a busy
    container's tasks do not all stop within its own retries: runc's comment calls that "a game of
    chances" that only cgroup v2 fixes (opencontainers/runc#2791). One fresh-clone CI run failed
    at this pause; 140 pauses of a training worker by hand here all froze at once.
    """
    for _ in range(tries):
        paused = subprocess.run(["docker", "pause", container], capture_output=True, text=True, timeout=60)
        if paused.returncode == 0:
            return
        if "unable to freeze" not in paused.stderr:
            break
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{json .State}}", container], capture_output=True, text=True, timeout=30
    )
    raise AssertionError(
        f"docker pause {container} exited {paused.returncode}: {paused.stderr.strip()}\n{state.stdout}"
    )


def test_a_peer_killed_mid_training(compose_project):
    project = compose_project(environment=LONG_TRAINING)
    start_long_training(project)
    injected = now()
    subprocess.run(["docker", "kill", project.container("worker-1")], check=True, capture_output=True)
    assert project.wait_for_exit("worker-0") == ExitCode.PEER_LOST
    assert seconds_since(injected, project.finished_at("worker-0")) < 20
    assert "worker-1:12345" in project.logs("worker-0").splitlines()[-1]
    code, verdict = verifier_result(project)
    assert code == ExitCode.VERIFICATION_FAILED
    assert "worker-1: killed without an exit status (SIGKILL or out of memory)" in verdict
    assert "worker-0: exited 5: launcher | worker-0:12345: " in verdict
    assert "worker-1:12345" in verdict.split("worker-0: exited 5:")[1]


@pytest.mark.parametrize("fault", ["pause", "disconnect"])
def test_a_peer_frozen_or_cut_off_mid_training(compose_project, fault):
    project = compose_project(environment=LONG_TRAINING)
    start_long_training(project)
    injected = now()
    if fault == "pause":
        pause(project.container("worker-1"))
        # The launcher's heartbeats find it first, or TensorFlow fails the program first and the
        # launcher says which peer it had lost by then: a race (seen both ways), exit 5 either way.
        lost = {
            "worker-0": r"lost peer worker-1:12345: resolvable, no answer within 2s \(3 heartbeats missed\)"
            r"|after losing peer\(s\): worker-1:12345 \(resolvable, no answer within \ds\)"
        }
    else:
        network = f"{project.name}_cluster"
        subprocess.run(["docker", "network", "disconnect", network, project.container("worker-1")], check=True)
        # Cut off, each side has lost the other, and says so (docs/failures.md): exit 5 on both.
        lost = {
            "worker-0": re.escape("lost peer worker-1:12345: name not resolvable (3 heartbeats missed)"),
            "worker-1": re.escape("lost peer worker-0:12345: name not resolvable (3 heartbeats missed)"),
        }
    for service, peer in lost.items():
        assert project.wait_for_exit(service) == ExitCode.PEER_LOST, project.logs(service)
        assert seconds_since(injected, project.finished_at(service)) < 30
        assert re.search(peer, project.logs(service)), project.logs(service)[-2000:]


# -- stopping --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "how"),
    [("waiting", "stop"), ("training", "stop"), ("training", "interrupt"), ("training", "compose-down")],
)
def test_a_stopped_worker_exits_at_once_with_a_clear_line(compose_project, phase, how):
    project = compose_project(environment=LONG_TRAINING)
    if phase == "waiting":
        project.compose("up", "--detach", "--no-deps", "worker-0")
        project.wait_for_line("worker-0", "waiting for 1 peer(s)")
    else:
        start_long_training(project)
    container = project.container("worker-0")
    signalled = now()
    if how == "stop":
        subprocess.run(["docker", "stop", container], check=True, capture_output=True, timeout=30)
    elif how == "interrupt":  # What Ctrl-C sends to a worker run in the foreground.
        subprocess.run(["docker", "kill", "--signal", "INT", container], check=True, capture_output=True)
        project.wait_for_exit("worker-0", timeout=30)
    else:
        project.compose("stop", timeout=60)
    assert project.exit_code("worker-0") == ExitCode.TERMINATED
    # From just before the signal to Docker's own finish time: TF_STOP_GRACE, then the launcher's end.
    assert seconds_since(signalled, project.finished_at("worker-0")) < STOP_BOUND
    signal_name = "SIGINT" if how == "interrupt" else "SIGTERM"
    log = project.logs("worker-0")
    assert f"launcher | worker-0:12345: received {signal_name}, stopping" in log
    assert f"launcher | worker-0:12345: stopped by {signal_name}" in log


# -- the verifier's own cases and the run deadline ----------------------------------------------


FINAL = "worker={index} replicas=2 initial_loss=0.7459 final_loss={loss} final_accuracy=0.8281"


def stand_in(tmp_path, commands: dict[str, str], verifier: dict[str, str] | None = None) -> str:
    """An override replacing each worker's training program by a shell command (a stand-in trainer).

    The commands differ between workers on purpose, so the launchers are told not to compare them.
    """
    lines = ["services:"]
    for service, command in commands.items():
        lines += [f"  {service}:", f"    command: [sh, -c, {command!r}]"]
        lines += ["    environment:", "      TFCLUSTER_COMPARE_COMMAND: '0'"]
    if verifier:
        lines += ["  verifier:", "    environment:"] + [f"      {k}: {v!r}" for k, v in verifier.items()]
    path = tmp_path / "stand-in.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_worker_that_exits_0_without_final_metrics(compose_project, tmp_path):
    project = compose_project(
        stand_in(tmp_path, {"worker-0": f"echo '{FINAL.format(index=0, loss=0.4168)}'", "worker-1": "echo done"})
    )
    result = project.verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert project.exit_code("worker-1") == 0
    # A program that never imported TensorFlow left no record of a model: nothing proves it trained in sync.
    assert "worker-1: no record of its model state: the observer recorded nothing" in result.stdout


def test_metrics_that_differ(compose_project, tmp_path):
    commands = {
        "worker-0": f"echo '{FINAL.format(index=0, loss=0.4168)}'",
        "worker-1": f"echo '{FINAL.format(index=1, loss=0.4170)}'",
    }
    result = compose_project(stand_in(tmp_path, commands)).verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert "final_loss differs: worker-0=0.4168 worker-1=0.4170" in result.stdout


def test_fewer_workers_than_the_verifier_expects(compose_project, tmp_path):
    commands = {
        service: f"echo '{FINAL.format(index=index, loss=0.4168)}'"
        for index, service in enumerate(["worker-0", "worker-1"])
    }
    expect_three = {"TF_WORKER_HOSTS": "worker-0,worker-1,worker-2", "TF_JOIN_TIMEOUT": "5"}
    result = compose_project(stand_in(tmp_path, commands, verifier=expect_three)).verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert "worker-2: missing: it never started" in result.stdout
    # The stand-ins import no TensorFlow: their printed replicas=2 is not what decides, their missing state is.
    assert "worker-0: no record of its model state: the observer recorded nothing" in result.stdout


def test_the_run_deadline_stops_everything_and_the_verdict_names_who_was_running(compose_project):
    project = compose_project(environment={**LONG_TRAINING, "TF_RUN_TIMEOUT": "20"})
    started = time.monotonic()
    result = project.verdict(timeout=120)
    assert result.returncode == ExitCode.VERIFICATION_FAILED
    assert time.monotonic() - started < 20 + 30
    for service in ("worker-0", "worker-1"):
        assert project.exit_code(service) == ExitCode.DEADLINE_EXCEEDED
        assert (
            f"{service}: exited 6: launcher | {service}:12345: still running at the 20s run deadline: stopped"
            in result.stdout
        )
