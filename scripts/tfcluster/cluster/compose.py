"""The one Compose driver: a Compose project on the host, its name, files and environment, and
every `docker compose` command done with it.

A run (tfcluster/cluster/steps.py), the container tests (tests/container/conftest.py) and the
benchmark (tfcluster/benchmark/) all drive Compose through this class, so that they build their
commands, wait for a verdict and tear a project down in one way. Standard library only.

  project = ComposeProject("compose.network.yaml", name="tfc-bench", environment={"TF_NETWORK_PROFILE": "wan"})
  try:
      result = project.verdict(timeout=None)
  finally:
      project.down()
"""

import datetime
import json
import os
import subprocess
import uuid
from pathlib import Path

from tfcluster.cluster import cancel, plain
from tfcluster.paths import ROOT

BASE_FILE = "compose.yaml"
# Long enough for any one Compose command of a two-worker run; callers that time longer work
# (a build, a many-worker run) pass their own, or None for none.
DEFAULT_TIMEOUT = 120
VERDICT_SERVICE = "verifier"


def exit_status(returncode: int) -> int:
    """A command's status as a shell reports it: a process ended by a signal is 128 + the signal."""
    return 128 - returncode if returncode < 0 else returncode


def unique_name(prefix: str) -> str:
    """A project name no other run on this engine uses, so that runs never touch each other's containers."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class ComposeProject:
    """compose.yaml plus `override_files` (in that order), run as the Compose project `name`.

    `environment` is laid over this process's own environment, once, here: every command of the
    project sees the same variables, whichever of them interpolate the files.
    """

    def __init__(
        self,
        *override_files: str | os.PathLike,
        name: str | None,
        environment: dict[str, str] | None = None,
        cwd: str | os.PathLike = ROOT,
    ):
        self.name = name
        self.files = [BASE_FILE, *(str(file) for file in override_files)]
        self.environment = {**os.environ, **(environment or {})}
        self.cwd = Path(cwd)

    @classmethod
    def from_environment(cls, environment: dict[str, str], *, cwd: str | os.PathLike = ROOT) -> "ComposeProject":
        """The project that COMPOSE_FILE and COMPOSE_PROJECT_NAME in `environment` name, as a run
        gives them to Compose (and a user's own `docker compose logs` afterwards finds them)."""
        project = cls(name=None, environment=environment, cwd=cwd)
        project.files = []
        project.environment = dict(environment)
        return project

    def command(self, *arguments: str) -> list[str]:
        """The `docker compose` command line for `arguments`, without running it."""
        command = ["docker", "compose", *(["-p", self.name] if self.name else [])]
        for file in self.files:
            command += ["-f", file]
        return [*command, *arguments]

    def quietly(self, *arguments: str, timeout: float = DEFAULT_TIMEOUT) -> subprocess.CompletedProcess:
        """Runs `docker compose ARGUMENTS` with its output left aside (a run's `down` and `stop`);
        one that outlasts `timeout` is killed and given status 124, as timeout(1) gives it."""
        try:
            return subprocess.run(
                self.command(*arguments),
                cwd=self.cwd,
                env=self.environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(self.command(*arguments), 124)

    def attached(self, *arguments: str) -> subprocess.CompletedProcess:
        """Runs `docker compose ARGUMENTS` with its output the user's (a run's `up`), in a process
        group of its own: a signal to the run reaches Compose as one SIGTERM, on which it stops
        its containers (tfcluster/cluster/cancel.py). Into a file or a CI log, plain text (plain.py)."""
        with plain.streams() as streams:
            # As `--ansi never`, without changing the command line a run shows and records.
            environment = {**self.environment, **({"COMPOSE_ANSI": "never"} if streams else {})}
            return cancel.run(self.command(*arguments), cwd=self.cwd, env=environment, **streams)

    def compose(
        self, *arguments: str, timeout: float | None = DEFAULT_TIMEOUT, check: bool = False
    ) -> subprocess.CompletedProcess:
        """Runs `docker compose ARGUMENTS` to its end; its output is captured as text."""
        return subprocess.run(
            self.command(*arguments),
            cwd=self.cwd,
            env=self.environment,
            capture_output=True,
            text=True,
            errors="replace",  # A program's log may hold bytes that are not UTF-8.
            timeout=timeout,
            check=check,
        )

    def verdict(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> subprocess.CompletedProcess:
        """The CI form: workers start as dependencies; the exit status is the verifier's."""
        return self.compose(*self._verdict_arguments(), timeout=timeout)

    def start_verdict(self) -> subprocess.Popen:
        """`verdict()` without waiting for it, so that the caller can act on the running cluster.

        The containers are created first, so that they can be named as soon as this returns. The
        verdict's output (stdout and stderr together) is the returned process's stdout.
        """
        created = self.compose("create")
        if created.returncode != 0:
            raise RuntimeError(f"`docker compose create` of {self.name} failed:\n{created.stderr}")
        return subprocess.Popen(
            self.command(*self._verdict_arguments()),
            cwd=self.cwd,
            env=self.environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def logs(self, service: str, *, check: bool = False) -> str:
        """The service's log, without Compose's `service  | ` prefixes."""
        return self.compose("logs", "--no-color", "--no-log-prefix", service, check=check).stdout

    def container(self, service: str) -> str:
        """The id of the service's container, running or not; empty if it has none."""
        return self.compose("ps", "-a", "-q", service).stdout.strip()

    def state(self, service: str) -> dict:
        """`docker inspect` of the service's container."""
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

    def wait_for_exit(self, service: str, *, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Blocks until the service's container exits (`docker wait`); returns its exit code."""
        waited = subprocess.run(
            ["docker", "wait", self.container(service)], capture_output=True, text=True, timeout=timeout, check=True
        )
        return int(waited.stdout.strip())

    def down(self, *, check: bool = False) -> None:
        """Removes the project's containers, networks and volumes, and those of services no file names now.

        With `check`, a failed `down` raises (the benchmark must not measure on top of leftovers);
        without, it is left to the next run (a test's teardown must not hide the test's own failure).
        """
        # A paused container can be neither stopped nor removed: unpause first. With nothing paused
        # Compose may report an error, which is why this step is never checked.
        self.compose("unpause", timeout=60)
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "1", timeout=DEFAULT_TIMEOUT, check=check)

    @staticmethod
    def _verdict_arguments() -> list[str]:
        return ["up", "--exit-code-from", VERDICT_SERVICE, VERDICT_SERVICE]


def _timestamp(text: str) -> datetime.datetime:
    # Docker gives nanoseconds; Python parses at most microseconds.
    head, _, fraction = text.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(f"{head}.{(fraction + '000000')[:6]}+00:00")


def resolved_model(*, interpolate: bool) -> dict:
    """compose.yaml as Compose itself resolves it (anchors, merges and, if asked, variables)."""
    arguments = ["config", "--format", "json", *([] if interpolate else ["--no-interpolate"])]
    return json.loads(ComposeProject(name=None).compose(*arguments, check=True).stdout)
