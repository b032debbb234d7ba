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
import yaml
from tfcluster.cluster import runs
from tfcluster.cluster.compose import unique_name

from tests.conftest import ROOT
from tests.container.conftest import running, warm_down

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
    # A session of its own, as a runner's step is: its whole tree can be killed as a runner kills it.
    return subprocess.Popen(
        [str(ROOT / "scripts" / command), *arguments],
        cwd=ROOT,
        env={**os.environ, **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL to the step and every process under it (its session), as a runner ends a job."""
    subprocess.run(["pkill", "-KILL", "--session", str(process.pid)], check=False)
    process.wait(timeout=30)


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
        kill_left(first, second)
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


def ci_step_training(name: str, report) -> tuple[subprocess.Popen, Output]:
    """scripts/ci-run of 300 epochs as the Compose project `name`, its JUnit file at `report`, once
    its second epoch has begun."""
    environment = {"COMPOSE_PROJECT_NAME": name, "TRAIN_EPOCHS": "300", "TFCLUSTER_CI_JUNIT": str(report)}
    step = start([], environment, command="ci-run")
    output = Output(step)
    try:
        output.wait_for(r"worker-0-1 +\| train \| epoch: +2/", timeout=300)
    except BaseException:
        kill_left(step)
        raise
    return step, output


def kill_left(*processes: subprocess.Popen | None) -> None:
    """Whatever a test started and is still running, killed with its tree."""
    for process in processes:
        if process is not None and process.poll() is None:
            kill_tree(process)


def test_sigterm_to_the_ci_step_mid_training_stops_the_cluster_and_fails_its_report(base_name, tmp_path):
    report = tmp_path / "verdict.xml"
    step, output = ci_step_training(base_name, report)
    try:
        status, took, _sent = play(((0.0, signal.SIGTERM),), step)
    finally:
        kill_left(step)
    text = output.text()
    assert status == 143, text
    assert took < CANCEL_BOUND
    assert "run: received SIGTERM: stopping the cluster" in text
    # Not one container left, and the report fails with how the run ended.
    assert containers(base_name) == []
    suite = ElementTree.fromstring(report.read_text())
    assert suite.get("failures") == "1"
    assert "the run ended with exit status 143 before the verifier gave a verdict" in report.read_text()


# GitHub's cancellation of a job: SIGINT to the step's process, SIGTERM 7.5 s later if it has not
# ended, SIGKILL of its whole tree 2.5 s after that.
GITHUB_CANCEL = ((0.0, signal.SIGINT), (7.5, signal.SIGTERM), (10.0, signal.SIGKILL))


def play(sequence, process: subprocess.Popen) -> tuple[int, float, list[str]]:
    """The runner's signals at their times, until the process ends: its status, how long it took
    from the first signal, and the signals sent."""
    began, sent = time.monotonic(), []
    for at, signal_number in sequence:
        try:
            process.wait(timeout=max(0.0, began + at - time.monotonic()))
            break
        except subprocess.TimeoutExpired:
            sent.append(signal_number.name)
            if signal_number == signal.SIGKILL:
                kill_tree(process)
            else:
                process.send_signal(signal_number)
    status = process.wait(timeout=CANCEL_BOUND)
    return status, time.monotonic() - began, sent


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_run_whose_reader_goes_away_is_cancelled_as_by_sigpipe_and_leaves_nothing_running(base_name, tmp_path, warm):
    # `scripts/run | head -1`. Before: cold, a BrokenPipeError traceback and exit 255 (Compose died
    # on its own SIGPIPE); warm, the threads that forward the launchers' output died with one each.
    report, said = tmp_path / "verdict.xml", tmp_path / "stderr"
    arguments = [*(["--warm"] if warm else []), "--junit", str(report)]
    with open(said, "w") as stderr:
        process = subprocess.Popen(
            [str(ROOT / "scripts" / "run"), *arguments],
            cwd=ROOT,
            env={**os.environ, "COMPOSE_PROJECT_NAME": base_name, "TRAIN_EPOCHS": "300"},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        # Its launchers' first lines, then the reader goes, as `head` does once it has its lines:
        # from there the 300 epochs print on, so the next write finds it gone.
        read = next((line for line in iter(process.stdout.readline, "") if "| launcher |" in line), "")
        process.stdout.close()
        status = process.wait(timeout=CANCEL_BOUND)
        left = running(f"{base_name}-warm" if warm else base_name)
    finally:
        kill_left(process)
        if warm:
            warm_down(base_name)
    text = said.read_text()
    assert read, text
    assert status == 128 + signal.SIGPIPE, text
    stopped = "the warm cluster " if warm else "the cluster"
    assert f"run: received SIGPIPE (the reader of its output is gone): stopping {stopped}" in text, text
    assert "Traceback" not in text and "BrokenPipeError" not in text, text
    assert left == []
    assert "the run ended with exit status 141 before the verifier gave a verdict" in report.read_text()


def test_githubs_cancel_sequence_mid_training_leaves_nothing_and_a_failing_report_within_its_budget(
    base_name, tmp_path
):
    report = tmp_path / "verdict.xml"
    step, output = ci_step_training(base_name, report)
    try:
        status, took, sent = play(GITHUB_CANCEL, step)
    finally:
        kill_left(step)
    text = output.text()
    # Gone on the SIGINT alone, inside the 7.5 s before GitHub's SIGTERM, with nothing left.
    assert (status, sent) == (130, ["SIGINT"]), text
    assert took < 7.0, f"{took:.1f}s from SIGINT to the end\n{text}"
    assert containers(base_name) == []
    assert "the run ended with exit status 130 before the verifier gave a verdict" in report.read_text()


@pytest.mark.timeout(600)  # Three clusters on two cores: the killed one's, a live run's and the next job's.
def test_a_ci_step_killed_outright_leaves_a_cluster_the_next_job_removes_and_never_a_live_runs(base_name, tmp_path):
    killed_name, live_name, next_name = base_name, f"{base_name}-2", f"{base_name}-3"
    report = tmp_path / "killed.xml"
    killed, killed_output = ci_step_training(killed_name, report)
    live = following = None
    try:
        kill_tree(killed)
        # The bug: nothing of the run is left to stop its cluster, which trains on.
        assert len(running(killed_name)) == 3, killed_output.text()
        # What it leaves: a failing report, never none or an earlier run's.
        assert "it was killed before it could write its verdict" in report.read_text()
        live = start([], {"COMPOSE_PROJECT_NAME": live_name, "TRAIN_EPOCHS": "40"})
        live_output = Output(live)
        live_output.wait_for(r"worker-0-1 +\| train \| epoch: +1/", timeout=300)
        # Its JUnit file (and the report beside it) in the test's folder, not the checkout's.
        following = start(
            [], {"COMPOSE_PROJECT_NAME": next_name, "TFCLUSTER_CI_JUNIT": str(tmp_path / "next.xml")}, command="ci-run"
        )
        following_output = Output(following)
        assert following.wait(timeout=400) == 0, following_output.text()
        assert live.wait(timeout=400) == 0, live_output.text()
    finally:
        kill_left(killed, live, following)
    said = following_output.text()
    assert f"ci-run: removed the Compose project {killed_name} of a run that was killed (pid {killed.pid}" in said, said
    assert containers(killed_name) == []
    # The live run's cluster was not touched: it trained to its own PASS.
    assert live_name not in said
    assert re.search(
        r"verdict: PASS: 2 of 2 workers agree: replicas=2 .*weights identical at 40 points", live_output.text()
    )


def action_project_name(**variables: str) -> str:
    """The Compose project action.yml's first step names a job's cluster, from the runner's variables."""
    step = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"][0]["run"]
    named = subprocess.run(
        ["bash", "-c", step.replace("$GITHUB_OUTPUT", "/dev/stdout")],
        env={"PATH": os.environ["PATH"], **variables},
        capture_output=True,
        text=True,
        check=True,
    )
    return named.stdout.strip().removeprefix("project=")


@pytest.mark.timeout(600)
def test_two_legs_of_a_matrix_at_once_on_one_engine_each_get_their_own_cluster_and_verdict(tmp_path):
    # One workflow run, one job, two matrix legs (epochs 3 and 5: the built-in trainer's check wants 3
    # at least) on two runners of one host.
    job = {"GITHUB_RUN_ID": unique_name("run"), "GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "train"}
    legs = {epochs: action_project_name(**job, RUNNER_NAME=f"host-runner-{epochs}") for epochs in ("3", "5")}
    assert len(set(legs.values())) == 2, legs
    processes, outputs = {}, {}
    try:
        for epochs, project in legs.items():
            environment = {
                "COMPOSE_PROJECT_NAME": project,
                "TRAIN_EPOCHS": epochs,
                "TFCLUSTER_CI_JUNIT": str(tmp_path / f"{epochs}.xml"),
            }
            processes[epochs] = start([], environment, command="ci-run")
            outputs[epochs] = Output(processes[epochs])
        statuses = {epochs: process.wait(timeout=500) for epochs, process in processes.items()}
    finally:
        kill_left(*processes.values())
        for epochs in processes:
            down(legs[epochs])
            runs.remove_folder(ROOT, legs[epochs])
    assert statuses == {"3": 0, "5": 0}, {epochs: output.text()[-3000:] for epochs, output in outputs.items()}
    for epochs in legs:
        # Each ran as its own project, and its verdict is its own leg's: 3 or 5 points compared.
        assert "another run is using the Compose project" not in outputs[epochs].text()
        suite = ElementTree.parse(tmp_path / f"{epochs}.xml").getroot()
        assert suite.get("failures") == "0", ElementTree.tostring(suite, encoding="unicode")
        assert re.search(
            rf"verdict: PASS: 2 of 2 workers agree: .*weights identical at {epochs} points", outputs[epochs].text()
        )


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
