"""Failures that used to be misdiagnosed or to hang, on real containers (docs/failures.md, "Stalls" and
"Out of memory"): a worker out of memory is named as such, by itself and by its peers, and a
cluster whose programs all stopped making progress dumps every worker's stack and stops."""

import datetime
import subprocess

import pytest
import yaml
from tfcluster.cluster import scaling

from tests.container.conftest import ROOT, override
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]

STALL_TIMEOUT = 15


def log_times(project, service: str, text: str) -> list[datetime.datetime]:
    """When the service printed each line holding `text`, by Docker's own timestamps."""
    logs = subprocess.run(
        ["docker", "logs", "--timestamps", project.container(service)], capture_output=True, text=True, check=True
    )
    stamps = [line.split(" ", 1)[0] for line in (logs.stdout + logs.stderr).splitlines() if text in line]
    return [datetime.datetime.fromisoformat(stamp[:26] + "+00:00") for stamp in stamps]


def test_one_worker_of_three_that_stops_calling_collectives_stalls_the_cluster_with_every_stack(
    compose_project, tmp_path
):
    three = tmp_path / "compose.workers.yaml"
    three.write_text(scaling.render(3, base_file=str(ROOT / "compose.yaml")))
    hang = override(tmp_path, {"worker-2": {"TFCLUSTER_FAULT_HANG_AT_STEP": "2"}}, name="hang.yaml")
    project = compose_project(str(three), hang, environment={"TF_STALL_TIMEOUT": str(STALL_TIMEOUT)})
    result = project.verdict(timeout=240)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    for name in ("worker-0", "worker-1", "worker-2"):
        assert project.exit_code(name) == ExitCode.STALLED, project.logs(name)
        log = project.logs(name)
        assert "stalled: " in log
        assert "(most recent call first):" in log  # Every worker's stack, dumped while it waited.
        assert f"{name}: exited 10: launcher | {name}:12345: stalled: " in result.stdout
    verdict = result.stdout
    assert "worker-2: exited 10" in verdict
    assert "its program was waiting at trainer/training/faults.py:" in verdict  # The one that stopped...
    for name in ("worker-0", "worker-1"):  # ...and the ones waiting for it in the all-reduce.
        line = next(line for line in verdict.splitlines() if f"- {name}: " in line)
        assert "its program was waiting at trainer/training/loop.py:" in line, line
        assert "tensorflow/" in line, line
    # The bound: from the moment the worker stopped, the stall timeout, then the dump and the stop.
    (hung_at,) = log_times(project, "worker-2", "waiting forever after step 2")
    ended = max(project.finished_at(name) for name in ("worker-0", "worker-1", "worker-2"))
    assert STALL_TIMEOUT <= (ended - hung_at).total_seconds() < STALL_TIMEOUT + 15


@pytest.mark.parametrize(
    ("limit", "program", "worker_1_says", "worker_0_says"),
    [
        # At 250 MiB TensorFlow's own libraries are evicted and read back again and again, for minutes.
        (
            "250m",
            None,
            "out of memory: thrashing at its 250 MiB memory limit (peak 250 MiB)",
            "worker-1:12345 (exited 9: out of memory at its 250 MiB memory limit (peak 250 MiB))",
        ),
        # A program that takes 400 MiB at once is killed by the kernel at 150 MiB; its peer waits for
        # it. Not the trainer: its import of TensorFlow at 150 MiB was killed in some runs and
        # thrashed 10 s first in others (in suite runs, two clusters on two cores), the case above.
        # The same command on both workers, as the rendezvous wants.
        (
            "150m",
            "import os, time; bytearray(400 * 2**20) if os.environ['TF_TASK_INDEX'] == '1' else time.sleep(300)",
            "out of memory: the kernel killed the training program (signal 9) at its 150 MiB memory limit",
            "its 150 MiB memory limit",
        ),
    ],
    ids=["thrashing", "killed"],
)
def test_a_worker_out_of_memory_is_named_by_itself_and_its_peer(
    compose_project, tmp_path, limit, program, worker_1_says, worker_0_says
):
    services = {"worker-1": {"mem_limit": limit}}
    if program:
        for name in ("worker-0", "worker-1"):
            services.setdefault(name, {})["command"] = ["python", "-c", program]
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"services": services}))
    project = compose_project(str(small))
    result = project.verdict(timeout=240)
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    assert project.exit_code("worker-1") == ExitCode.OUT_OF_MEMORY, project.logs("worker-1")
    said = [line for line in result.stdout.splitlines() if "  - worker-" in line]  # The verdict's problems, whole.
    assert f"worker-1: exited 9: launcher | worker-1:12345: {worker_1_says}" in result.stdout, said
    assert project.exit_code("worker-0") == ExitCode.PEER_LOST, project.logs("worker-0")
    line = next(line for line in result.stdout.splitlines() if "- worker-0: " in line)
    assert worker_0_says in line and "out of memory" in line, line
    # Either of the launcher's lost-peer lines: it stopped the program, or the program failed on
    # its own first (its collective aborted) and the lost peer explains why. Which comes first is a race.
    # (`lost peer(s) worker-1:12345` is also the verifier's clause after an error of the program's own.)
    assert "lost peer(s) worker-1:12345" in line or "after losing peer(s): worker-1:12345" in line, line
    # The peer learns it at its next heartbeat and stops its program a grace later (5 s, then 2 s
    # for the program to end): before, it went on for minutes and blamed the network.
    lag = (project.finished_at("worker-0") - project.finished_at("worker-1")).total_seconds()
    assert lag < 12, lag
