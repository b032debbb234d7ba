"""Container tests: each runs its own Compose project and always tears it down."""

import collections
import functools
import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest
from tfcluster import Cluster
from tfcluster.cluster import runs

# scripts/tfcluster/cluster/compose.py (pytest puts scripts/ on the path). Renamed here, since this file's
# ComposeProject is the tests' own kind of it, and its fixture is called compose_project.
from tfcluster.cluster.compose import ComposeProject as SharedComposeProject
from tfcluster.cluster.compose import unique_name

from tests import browser
from tests.conftest import ROOT, flocked


def _docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        return "the Docker engine is not running"
    if subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode != 0:
        return "Compose v2 (`docker compose`) is missing: run scripts/setup"
    return None


@pytest.fixture(scope="session")
def docker():
    """Skips container tests where there is no Docker, except in CI, where that is a failure."""
    problem = _docker_problem()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {problem}")
        pytest.skip(problem)
    # Always: the tests must run the code in this tree, and an unchanged build takes a second. One
    # process at a time (scripts/test runs the suite in several, pytest-xdist): the others wait and
    # then find the images current, rather than building them too.
    with flocked("setup"):
        subprocess.run([str(ROOT / "scripts" / "setup"), "--shaper"], check=True, timeout=900)


class ComposeProject(SharedComposeProject):
    """A test's Compose project: the shared one, with a name of its own and a wait for a log line.

    The unique name (`tfc-test-XXXXXXXX`) keeps tests from touching each other's containers.
    """

    def __init__(self, *override_files: str, environment: dict[str, str] | None = None):
        super().__init__(*override_files, name=unique_name("tfc-test"), environment=environment, cwd=ROOT)

    def wait_for_line(self, service: str, text: str, *, timeout: float = 120) -> None:
        """Follows the service's log until a line contains `text` (an event, not a sleep)."""
        wait_for_line(self.container(service), text, timeout=timeout, name=service)


class ScriptsRun(ComposeProject):
    """`scripts/run ARGUMENTS` as a test's Compose project: its unique name is COMPOSE_PROJECT_NAME.

    The project's files are scripts/run's to choose; the methods of the shared class see only
    compose.yaml's, which name every service the runs share (`down`'s --remove-orphans takes the rest).
    """

    def __init__(self, *arguments: str, environment: dict[str, str] | None = None):
        super().__init__(environment=environment)
        self.arguments = [str(ROOT / "scripts" / "run"), *arguments]

    def finish(self, *, timeout: float = 420) -> subprocess.CompletedProcess:
        """Runs scripts/run to its end; its output is captured as text."""
        return subprocess.run(
            self.arguments, cwd=self.cwd, env=self._run_environment(), capture_output=True, text=True, timeout=timeout
        )

    def start(self) -> subprocess.Popen:
        """scripts/run without waiting for it; its output (stdout and stderr together) is the process's stdout."""
        return subprocess.Popen(
            self.arguments,
            cwd=self.cwd,
            env=self._run_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def container_name(self, service: str) -> str:
        """The name Compose gives the service's container, known before scripts/run has created it."""
        return f"{self.name}-{service}-1"

    def down(self, *, check: bool = False) -> None:
        """The project's containers, networks and volumes, and the run's folder of generated files
        (tfcluster/cluster/runs.py), which a name used once would otherwise leave in the checkout."""
        super().down(check=check)
        runs.remove_folder(ROOT, self.name)

    def _run_environment(self) -> dict[str, str]:
        return {**self.environment, "COMPOSE_PROJECT_NAME": self.name}


class WarmRun(ScriptsRun):
    """`scripts/run --warm ARGUMENTS` on its test module's warm cluster (the `warm_run` fixture).

    For tests about what a run's programs do and what the verdict says of them, not about starting
    containers: the same run, the same output (a warm run's lines are prefixed as Compose's), the
    same verdict, its programs forked by zygotes already up instead of started in new containers.
    tests/container/test_warm_workers.py holds the two equal: a warm run trains a cold run's weights,
    bit for bit, and every edit, failure and Keras change shows in the next run.
    """

    def __init__(self, name: str, *arguments: str, environment: dict[str, str] | None = None):
        super().__init__("--warm", *arguments, environment=environment)
        self.name = name
        self.stuck = False

    def finish(self, *, timeout: float = 420) -> subprocess.CompletedProcess:
        try:
            return super().finish(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stuck = True  # Its programs may still be training in the warm containers.
            raise

    def down(self, *, check: bool = False) -> None:
        """The warm cluster stays up for the module's next test, unless this run never ended."""
        if self.stuck:
            warm_down(self.name)


def warm_down(name: str, environ: dict[str, str] | None = None) -> int:
    """A warm cluster's containers, network and volumes, then its files in the checkout
    (`Cluster.warm_down`, as `scripts/run --warm-down`); Compose's exit status."""
    return Cluster(name=name, environ=dict(os.environ) if environ is None else environ).warm_down()


# tf-keras for `fit`: Keras 3's is broken under MultiWorkerMirroredStrategy.
LEGACY_KERAS = ["--env", "TF_USE_LEGACY_KERAS=1"]
# The tutorial's figures, the same in every run of it: its data and seeds are fixed.
TUTORIAL_FIGURES = "replicas=2 initial_loss=0.7459 final_loss=0.4168 final_accuracy=0.8281"


def verdict_lines(output: str) -> list[str]:
    """The verifier's lines of a `scripts/run` output, without Compose's prefix (`verifier-1  | `);
    not Compose's own lines about it (`verifier-1 exited with code 0`)."""
    return [line.split("| ", 1)[1] for line in output.splitlines() if re.match(r"verifier-1 +\| ", line)]


def problems(output: str) -> list[str]:
    """The verdict's problems, one a line."""
    return [line.removeprefix("  - ") for line in verdict_lines(output) if line.startswith("  - ")]


def run_program(scripts_run, program: str, *arguments: str, folder: str, environment: dict[str, str] | None = None):
    """`scripts/run --project FOLDER --command "python PROGRAM" ARGUMENTS`, run to its end (a test
    module binds its folder of programs with functools.partial)."""
    run = scripts_run("--project", folder, "--command", f"python {program}", *arguments, environment=environment)
    return run.finish()


# The report's colours (tfcluster/report/page.js): the training phase on the timeline, and the
# cross where the workers' model states first differed.
TRAINING = "#2563eb"
DIFFERING = "#b00000"


def report_of(run: "ScriptsRun", stderr: str) -> tuple[dict, browser.Opened]:
    """The run's report, where scripts/run said it wrote it, opened in headless Chromium (tests/browser.py),
    which must have loaded it with no error, no request outside the file, and its charts drawn."""
    path = ROOT / runs.folder_of(run.name) / "report.html"
    assert f"run: report: {path}\n" in stderr, stderr[-2000:]
    return opened_report(path, path.parent / "browser")


def opened_report(path, work) -> tuple[dict, browser.Opened]:
    """The report at `path` opened as above; its data (the JSON it draws from) and what the browser saw."""
    work.mkdir(parents=True, exist_ok=True)
    opened = browser.open_page(path, work)
    body = re.search(r"<body[^>]*>", opened.dom)[0]
    assert 'data-errors=""' in body and int(re.search(r'data-charts="(\d+)"', body)[1]) >= 2, body
    assert opened.requests == [], opened.requests
    assert browser.pixels(opened.screenshot, TRAINING) > 2000, "no training phase drawn on the timeline"
    data = json.loads(re.search(r'<script type="application/json" id="run">(.*?)</script>', path.read_text(), re.S)[1])
    return data, opened


def assert_report_says_what_the_run_printed(data: dict, stdout: str) -> None:
    """The report's verdict line is the verifier's last, and each worker's epochs are those its
    program printed (this project's trainer's epoch lines), figure for figure."""
    assert data["summary"] == next(line for line in reversed(verdict_lines(stdout)) if line.startswith("verdict: "))
    for worker in data["workers"]:
        printed = re.findall(
            rf"^{worker['name']}-1 +\| train \| epoch: +(\d+)/\d+ *\| step: +(\d+) \| loss: (\S+)", stdout, re.M
        )
        drawn = [(str(epoch["epoch"]), str(epoch["step"]), f"{epoch['loss']:.4f}") for epoch in worker["epochs"]]
        assert drawn == printed, (worker["name"], drawn, printed)


def running(project: str) -> list[str]:
    """The ids of the Compose project's running containers."""
    listed = subprocess.run(
        ["docker", "ps", "--quiet", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def override(tmp_path, services: dict[str, dict[str, str]], name="override.yaml") -> str:
    """A Compose override giving each named service extra environment variables."""
    lines = ["services:"]
    for service, variables in services.items():
        lines += [f"  {service}:", "    environment:"]
        lines += [f"      {key}: {value!r}" for key, value in variables.items()]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def wait_until_started(container: str, *, timeout: float = 120) -> None:
    """Returns once the container has started (Docker's `start` event, past or to come).

    `docker logs --follow` on a container that is only created ends at once, with nothing.
    """
    created = subprocess.run(
        ["docker", "inspect", "--format", "{{.Created}}", container], capture_output=True, text=True, check=True
    ).stdout.strip()
    command = ["docker", "events", "--since", created, "--filter", f"container={container}", "--filter", "event=start"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as events:
        try:
            timer = threading.Timer(timeout, events.kill)
            timer.start()
            started = events.stdout.readline()
        finally:
            timer.cancel()
            events.kill()
    if not started:
        raise AssertionError(f"{container} did not start within {timeout}s")


def wait_for_line(container: str, text: str, *, timeout: float = 120, name: str | None = None) -> None:
    """Follows a container's log until a line contains `text` (an event, not a sleep)."""
    wait_until_started(container, timeout=timeout)
    command = ["docker", "logs", "--follow", container]
    last = collections.deque(maxlen=30)  # What it printed instead, for the failure's message.
    ended = True
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as follower:
        deadline = time.monotonic() + timeout
        try:
            for line in follower.stdout:
                if text in line:
                    return
                last.append(line)
                if time.monotonic() > deadline:
                    ended = False
                    break
        finally:
            follower.kill()
    how = "its container stopped first" if ended else f"not within {timeout}s"
    raise AssertionError(f"{name or container} never printed {text!r} ({how}); its last lines:\n{''.join(last)}")


def torn_down(kind):
    """A fixture's factory of `kind` projects, and its teardown: every one made is brought down."""
    made = []

    def make(*arguments: str, environment: dict[str, str] | None = None):
        project = kind(*arguments, environment=environment)
        made.append(project)
        return project

    yield make
    for project in made:
        project.down()


@pytest.fixture
def compose_project(docker):
    """A factory of Compose projects (override files as arguments); every one it made is torn down, pass or fail."""
    yield from torn_down(ComposeProject)


@pytest.fixture
def scripts_run(docker):
    """A factory of `scripts/run` invocations; every project they started is torn down, pass or fail."""
    yield from torn_down(ScriptsRun)


@pytest.fixture(scope="module")
def warm_cluster(docker):
    """The name of the module's warm cluster, taken down (and its files removed) after its last test."""
    name = unique_name("tfc-test")
    yield name
    warm_down(name)
    runs.remove_folder(ROOT, name)


@pytest.fixture
def warm_run(warm_cluster):
    """A factory of `scripts/run --warm` invocations on the module's warm cluster (WarmRun)."""
    yield from torn_down(functools.partial(WarmRun, warm_cluster))
