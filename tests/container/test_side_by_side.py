"""Runs side by side, a cancelled CI step, an unreadable project (tfcluster/cluster/runs.py,
cancel.py, tfcluster/project/access.py): nothing crosses, nothing hangs, nothing is left."""

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from xml.etree import ElementTree

import pytest
from tfcluster.cluster import runs
from tfcluster.cluster.compose import unique_name

from tests.conftest import ROOT

# How long a cancelled run may take to be gone, its containers included: the launchers stop within
# TF_STOP_GRACE + 2 s (4 s), Compose's stop and down take a few more.
CANCEL_BOUND = 30


def containers(project: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "--all", "--filter", f"label=com.docker.compose.project={project}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def down(project: str) -> None:
    subprocess.run(
        ["docker", "compose", "-p", project, "down", "--volumes", "--remove-orphans", "--timeout", "1"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture
def base_name(docker):
    """A default project name of the test's own (COMPOSE_PROJECT_NAME), and every slot a run may
    have taken from it torn down afterwards, pass or fail."""
    name = unique_name("tfc-test")
    yield name
    for slot in (name, f"{name}-2", f"{name}-3"):
        down(slot)
        runs.remove_folder(ROOT, slot)


def start(arguments: list[str], environment: dict[str, str], *, command: str = "run") -> subprocess.Popen:
    return subprocess.Popen(
        [str(ROOT / "scripts" / command), *arguments],
        cwd=ROOT,
        env={**os.environ, **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class Output:
    """A process's output read as it comes (a thread), to wait on a line of it (an event)."""

    def __init__(self, process: subprocess.Popen):
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._reader.start()

    def _read(self, process):
        for line in process.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, pattern: str, *, timeout: float) -> None:
        with self._changed:
            found = self._changed.wait_for(lambda: any(re.search(pattern, line) for line in self.lines), timeout)
        assert found, f"no line matched {pattern!r} within {timeout}s:\n{self.text()}"

    def text(self) -> str:
        self._reader.join(timeout=5)
        return "".join(self.lines)


def test_two_runs_of_one_checkout_at_once_each_get_their_own_cluster_and_verdict(base_name):
    # The first holds the default name from its start; the second, started while the first trains,
    # takes the next free one, with its own files, worker count and settings.
    environment = {"COMPOSE_PROJECT_NAME": base_name, "TF_RUN_TIMEOUT": "300"}
    first, second = start([], environment), None
    first_output = Output(first)
    try:
        first_output.wait_for(r"worker-0-1 +\| train \| epoch", timeout=300)
        second = start(["--workers", "3"], {**environment, "TRAIN_EPOCHS": "4"})
        second_output = Output(second)
        assert second.wait(timeout=400) == 0, second_output.text()
        assert first.wait(timeout=400) == 0, first_output.text()
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    one, other = first_output.text(), second_output.text()
    assert f"this one is {base_name}-2 (docker compose -p {base_name}-2 ...)" in other
    assert re.search(r"verdict: PASS: 2 of 2 workers agree: replicas=2 .*weights identical at 3 points", one)
    assert re.search(r"verdict: PASS: 3 of 3 workers agree: replicas=3 .*weights identical at 4 points", other)
    # Each cluster is its own: its containers under its own project, none of the other's.
    assert sorted(containers(base_name)) == [
        f"{base_name}-{service}-1" for service in ("verifier", "worker-0", "worker-1")
    ]
    assert len(containers(f"{base_name}-2")) == 4
    assert (ROOT / f".tfcluster/runs/{base_name}-2/compose.workers.yaml").is_file()
    assert not (ROOT / f".tfcluster/runs/{base_name}/compose.workers.yaml").exists()


def test_sigterm_to_the_ci_step_mid_training_stops_the_cluster_and_fails_its_report(base_name, tmp_path):
    report = tmp_path / "verdict.xml"
    environment = {"COMPOSE_PROJECT_NAME": base_name, "TRAIN_EPOCHS": "300", "TFCLUSTER_CI_JUNIT": str(report)}
    step = start([], environment, command="ci-run")
    output = Output(step)
    try:
        output.wait_for(r"worker-0-1 +\| train \| epoch: +2/", timeout=300)
        signalled = time.monotonic()
        step.send_signal(signal.SIGTERM)
        status = step.wait(timeout=CANCEL_BOUND)
        took = time.monotonic() - signalled
    finally:
        if step.poll() is None:
            step.kill()
    text = output.text()
    assert status == 143, text
    assert took < CANCEL_BOUND
    assert "run: received SIGTERM: stopping the cluster" in text
    # Not one container left, and the report fails with how the run ended.
    assert containers(base_name) == []
    suite = ElementTree.fromstring(report.read_text())
    assert suite.get("failures") == "1"
    assert "the run ended with exit status 143 before the verifier gave a verdict" in report.read_text()


def test_a_project_folder_of_mode_0700_is_refused_on_the_host_in_one_line(base_name):
    with tempfile.TemporaryDirectory() as folder:  # Mode 0700, as mktemp -d makes it.
        with open(os.path.join(folder, "train.py"), "w") as script:
            script.write("print('never run')\n")
        if os.stat(folder).st_uid == 1000:
            pytest.skip("the workers' own user reads its 0700 folders")
        owner = _owner(folder)
        started = time.monotonic()
        refused = subprocess.run(
            [str(ROOT / "scripts" / "run"), "--project", folder],
            cwd=ROOT,
            env={**os.environ, "COMPOSE_PROJECT_NAME": base_name},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"run: --project {folder}: a folder of mode 0700 owned by {owner}, which the workers (uid 1000) "
        f"cannot read; make it readable to them: chmod a+rX {folder}"
    ]
    assert refused.stdout == ""
    # Refused before anything started: no set-up (which prints), no container.
    assert containers(base_name) == []
    assert time.monotonic() - started < 10


def _owner(folder: str) -> str:
    import grp
    import pwd

    info = os.stat(folder)
    return f"{pwd.getpwuid(info.st_uid).pw_name}:{grp.getgrgid(info.st_gid).gr_name}"
