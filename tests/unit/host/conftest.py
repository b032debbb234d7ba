"""What the host commands' tests share: a sandbox to run them in, a project of one's own, a recorded run.

Every command runs from a copy of the project with a fake `docker` first on PATH, which records
any call and fails: so a command that reached for Docker, set anything up, or wrote a file is
caught, and the real project (its .venv, images and containers) is never touched.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tfcluster import paths
from tfcluster.ci import hostpaths
from tfcluster.cluster import cancel, runs, steps
from tfcluster.commands import docs as commands_doc
from tfcluster.commands import run
from tfcluster.report import engine

from tests.conftest import ROOT

# The Compose commands of a run, as they are run.
DOWN, UP, STOP = (("docker", "compose", *arguments) for arguments in (steps.DOWN, steps.UP, steps.STOP))
# The dry run's line for the last run's `down`, begun with the set-up.
DOWN_BEGUN = f"{' '.join(DOWN)} (unless nothing left), in the background"
COPIED = [
    "scripts",
    "trainer",
    "docker/Dockerfile.project",
    "docker/requirements.txt",
    "compose.yaml",
    "compose.byo.yaml",
    "compose.project.yaml",
    "compose.baked.yaml",
    "compose.data.yaml",
    "compose.recovery.yaml",
    "compose.network.yaml",
]
FAKE_DOCKER = """#!/bin/sh
echo "docker $*" >> "{calls}"
exit 99
"""


@pytest.fixture(autouse=True)
def claims_apart(tmp_path_factory, monkeypatch):
    """The runs of these tests keep their names' records on this host (tfcluster/cluster/runs.py)
    apart from real runs', in this process and in the commands it starts."""
    folder = tmp_path_factory.mktemp("claims")
    monkeypatch.setattr(runs, "CLAIMS", folder)
    monkeypatch.setenv("TFCLUSTER_CLAIMS", str(folder))


class Sandbox:
    """A copy of the project's commands, run with a fake docker; it notes what they touched."""

    def __init__(self, base: Path):
        self.root = base / "project"
        for name in COPIED:
            source, target = ROOT / name, self.root / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        self.calls = base / "docker-calls"
        fake = base / "bin" / "docker"
        fake.parent.mkdir()
        fake.write_text(FAKE_DOCKER.format(calls=self.calls))
        fake.chmod(0o755)
        # Only what the commands need, so that no setting of the machine running the tests
        # (TRAIN_EPOCHS, COMPOSE_FILE, TRAINER_SCRIPT, ...) changes what they print.
        self.environment = {
            "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(base),
            "PYTHONDONTWRITEBYTECODE": "1",
            "COLUMNS": commands_doc.COLUMNS,
        }
        self.before = self.files()

    def files(self) -> set[str]:
        return {str(path.relative_to(self.root)) for path in self.root.rglob("*")}

    def run(self, command: str, *arguments: str, cwd: Path | None = None, **variables: str):
        return subprocess.run(
            [str(self.root / command), *arguments],
            cwd=cwd or self.root,
            env={**self.environment, **variables},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def assert_untouched(self) -> None:
        assert not self.calls.exists(), f"Docker was called: {self.calls.read_text()}"
        assert self.files() == self.before, f"files appeared or went: {self.files() ^ self.before}"


@pytest.fixture
def sandbox(tmp_path) -> Sandbox:
    return Sandbox(tmp_path)


@pytest.fixture
def training_project(tmp_path) -> Path:
    """A project of one's own, outside the sandbox (so that what the sandbox holds stays as it was)."""
    folder = tmp_path / "mine"
    (folder / "model" / "cli").mkdir(parents=True)
    (folder / "train.py").write_text("print('training')\n")
    (folder / "model" / "__init__.py").write_text("")
    (folder / "model" / "train.py").write_text("")
    (folder / "model" / "cli" / "__main__.py").write_text("")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "cluster.env").write_text("# Settings of my own\nexport BATCH=64\nGREETING='hello world'\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "empty").mkdir()
    return folder


# -- scripts/run's real run, with every command recorded instead of run ---------------------------


class Recorder:
    """Stands in for subprocess.run in scripts/tfcluster/commands/run.py: records each command, returns set codes."""

    def __init__(self, codes: dict[str, int]):
        self.codes = codes
        self.commands: list[tuple[tuple[str, ...], dict]] = []
        self.asked: list[tuple[str, str]] = []  # What the engine was asked it has of the project.
        self.waited: list[tuple[str, float]] = []  # For running containers to end, before `stop`.

    def __call__(self, command, **options):
        self.commands.append((tuple(command), options))
        key = "setup" if command[0].endswith("scripts/setup") else command[2]
        return subprocess.CompletedProcess(command, self.codes.get(key, 0))


def begun_at_once(monkeypatch) -> None:
    """A step begun in the background (steps.Begin: the last run's `down`, with the set-up) runs at
    once where it begins, so that the commands recorded keep one order; test_background.py tests
    it running alongside."""
    monkeypatch.setattr(steps.Begin, "run", lambda begin, execution: begin.step.run(execution))


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    # This machine may itself be a container; a test of whether a run checks its mounts sets its own.
    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: False)
    begun_at_once(monkeypatch)

    def start(argv, codes=None, left=("container", "network", "volume", "running"), ended=False, **variables):
        recorder = Recorder(codes or {})
        monkeypatch.setattr(paths, "ROOT", tmp_path)
        # The run takes its default project name from compose.yaml, as Compose does.
        shutil.copy(ROOT / "compose.yaml", tmp_path / "compose.yaml")
        monkeypatch.setattr(subprocess, "run", recorder)
        # The children a run can cancel (tfcluster/cluster/cancel.py) are recorded the same way.
        monkeypatch.setattr(cancel, "run", recorder)
        # No other checkout's containers: the engine is not asked.
        monkeypatch.setattr(runs, "foreign_checkouts", lambda _name, _root: [])
        # What the engine has of the project (containers, networks, volumes; "running" containers):
        # by default all, so that `down` and `stop` run.
        monkeypatch.setattr(steps, "of_project", lambda kind, name: recorder.asked.append((kind, name)) or kind in left)
        # Nor whether running containers end on their own before `stop` (by default they do not).
        monkeypatch.setattr(
            steps, "ended_within", lambda name, seconds: recorder.waited.append((name, seconds)) or ended
        )
        # Nor for the report's containers (tests/unit/host/report/ test what it makes of them).
        monkeypatch.setattr(engine, "containers", lambda _project: {})
        for name in ("TRAINER_SCRIPT", "COMPOSE_FILE", "TF_NETWORK_PROFILE", "EXTRA_REQUIREMENTS", "TFCLUSTER_IMAGE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        return run.main(argv), recorder

    return start


TUTORIAL_LOGS = ROOT / "tests" / "fixtures" / "logs" / "tutorial"


def verifier_log(exits: dict[str, int]) -> str:
    """The verifier service's log of a run of the tutorial whose workers exited with `exits`: its
    waiting line, its verdict's record and its table, made by the real verifier (on the saved
    logs, whose record is the live one's), not written by hand."""
    codes = ",".join(f"{worker}={code}" for worker, code in exits.items())
    logs = [str(TUTORIAL_LOGS / f"{worker}.log") for worker in exits]
    judge = [sys.executable, "-m", "trainer.verifier", *logs, "--exit-codes", codes]
    environment = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}
    record = subprocess.run([*judge, "--json"], cwd=ROOT, env=environment, capture_output=True, text=True).stdout
    table = subprocess.run(judge, cwd=ROOT, env=environment, capture_output=True, text=True).stdout
    assert record.startswith('{"event": "verdict"'), record
    return f"verify | waiting up to 3690s for {', '.join(exits)}\n{record}{table}"
