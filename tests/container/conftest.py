"""Container tests: each runs its own Compose project and always tears it down."""

import json
import os
import shutil
import subprocess
import uuid

import pytest

from tests.conftest import ROOT

IMAGE = "tfcluster:latest"


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
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        subprocess.run([str(ROOT / "scripts" / "setup")], check=True, timeout=900)


class ComposeProject:
    """One Compose project with a unique name, so tests never touch each other's containers."""

    def __init__(self, *override_files: str, environment: dict[str, str] | None = None):
        self.name = f"tfc-test-{uuid.uuid4().hex[:8]}"
        self.files = ["compose.yaml", *override_files]
        self.environment = {**os.environ, **(environment or {})}

    def compose(self, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = ["docker", "compose", "-p", self.name]
        for file in self.files:
            command += ["-f", file]
        return subprocess.run(
            [*command, *arguments], cwd=ROOT, env=self.environment, capture_output=True, text=True, timeout=timeout
        )

    def verdict(self, *, timeout: float = 120) -> subprocess.CompletedProcess:
        """The CI form: workers start as dependencies; the exit status is the verifier's."""
        return self.compose("up", "--exit-code-from", "verifier", "verifier", timeout=timeout)

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-log-prefix", service).stdout

    def state(self, service: str) -> dict:
        container = self.compose("ps", "-a", "-q", service).stdout.strip()
        inspected = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True)
        return json.loads(inspected.stdout)[0]

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "1", timeout=120)


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
