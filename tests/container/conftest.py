"""Container tests: each runs its own Compose project and always tears it down."""

import datetime
import json
import os
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from tests.conftest import ROOT


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
    # Always: the tests must run the code in this tree, and an unchanged build takes a second.
    subprocess.run([str(ROOT / "scripts" / "setup")], check=True, timeout=900)


class ComposeProject:
    """One Compose project with a unique name, so tests never touch each other's containers."""

    def __init__(self, *override_files: str, environment: dict[str, str] | None = None):
        self.name = f"tfc-test-{uuid.uuid4().hex[:8]}"
        self.files = ["compose.yaml", *override_files]
        self.environment = {**os.environ, **(environment or {})}

    def command(self, *arguments: str) -> list[str]:
        command = ["docker", "compose", "-p", self.name]
        for file in self.files:
            command += ["-f", file]
        return [*command, *arguments]

    def compose(self, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(*arguments), cwd=ROOT, env=self.environment, capture_output=True, text=True, timeout=timeout
        )

    def verdict(self, *, timeout: float = 120) -> subprocess.CompletedProcess:
        """The CI form: workers start as dependencies; the exit status is the verifier's."""
        return self.compose("up", "--exit-code-from", "verifier", "verifier", timeout=timeout)

    def start_verdict(self) -> subprocess.Popen:
        """`verdict()` without waiting for it, so that the test can act on the running cluster.

        The containers are created first, so that they can be named as soon as this returns.
        """
        created = self.compose("create")
        assert created.returncode == 0, created.stderr
        return subprocess.Popen(
            self.command("up", "--exit-code-from", "verifier", "verifier"),
            cwd=ROOT,
            env=self.environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-log-prefix", service).stdout

    def container(self, service: str) -> str:
        return self.compose("ps", "-a", "-q", service).stdout.strip()

    def state(self, service: str) -> dict:
        inspected = subprocess.run(
            ["docker", "inspect", self.container(service)], capture_output=True, text=True, check=True
        )
        return json.loads(inspected.stdout)[0]

    def exit_code(self, service: str, *, timeout: float = 60) -> int:
        """The service's exit code, once it has exited (a container still running has none)."""
        return self.wait_for_exit(service, timeout=timeout)

    def run_seconds(self, service: str) -> float:
        """How long the service's container ran, from Docker's own start and finish times."""
        state = self.state(service)["State"]
        return (_timestamp(state["FinishedAt"]) - _timestamp(state["StartedAt"])).total_seconds()

    def finished_at(self, service: str) -> datetime.datetime:
        return _timestamp(self.state(service)["State"]["FinishedAt"])

    def wait_for_line(self, service: str, text: str, *, timeout: float = 120) -> None:
        """Follows the service's log until a line contains `text` (an event, not a sleep)."""
        wait_for_line(self.container(service), text, timeout=timeout, name=service)

    def wait_for_exit(self, service: str, *, timeout: float = 120) -> int:
        """Blocks until the service's container exits (`docker wait`); returns its exit code."""
        waited = subprocess.run(
            ["docker", "wait", self.container(service)], capture_output=True, text=True, timeout=timeout, check=True
        )
        return int(waited.stdout.strip())

    def down(self) -> None:
        # A paused container can be neither stopped nor removed: unpause first (no-op otherwise).
        self.compose("unpause", timeout=60)
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "1", timeout=120)


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
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as follower:
        deadline = time.monotonic() + timeout
        try:
            for line in follower.stdout:
                if text in line:
                    return
                if time.monotonic() > deadline:
                    break
        finally:
            follower.kill()
    raise AssertionError(f"{name or container} never printed {text!r} within {timeout}s")


def _timestamp(text: str) -> datetime.datetime:
    # Docker gives nanoseconds; Python parses at most microseconds.
    head, _, fraction = text.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(f"{head}.{(fraction + '000000')[:6]}+00:00")


@pytest.fixture
def compose_project(docker):
    """A factory of Compose projects; every one it made is torn down, pass or fail."""
    projects = []

    def make(*override_files: str, environment: dict[str, str] | None = None) -> ComposeProject:
        project = ComposeProject(*override_files, environment=environment)
        projects.append(project)
        return project

    yield make
    for project in projects:
        project.down()
