"""A checkout of the set-up's own, with a `docker` that acts from a state file (fake_docker.py): so
the set-up's decisions (build or not, which base, what fails and how) are tested without an engine,
and the real images are never touched."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tfcluster.setup import wheelhouse

from tests.conftest import ROOT

COPIED = [
    "scripts",
    "trainer",
    "docker/Dockerfile",
    "docker/Dockerfile.shaper",
    "docker/requirements.txt",
    ".dockerignore",
]

# A docker first on PATH: fake_docker.py, run by this Python.
FAKE_DOCKER = '#!/bin/sh\nexec "{python}" "{script}" "$@"\n'


class Machine:
    """The fake engine's state, and the set-up run against it from a copy of the checkout."""

    def __init__(self, base: Path):
        self.root = base / "checkout"
        for name in COPIED:
            source, target = ROOT / name, self.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, target)
        self._wheelhouse()
        self.calls_file = base / "calls"
        self.state_file = base / "state.json"
        self.state = {
            "calls": str(self.calls_file),
            "engine": True,
            "compose": "2.40.3",
            "pull_seconds": 0,
            "images": {"tfcluster-base:bookworm-slim": {"id": "sha256:offline-base", "labels": {}}},
        }
        self.bin = base / "bin"
        self.bin.mkdir()
        (self.bin / "docker").write_text(
            FAKE_DOCKER.format(python=sys.executable, script=Path(__file__).with_name("fake_docker.py"))
        )
        (self.bin / "docker").chmod(0o755)
        # Never the real base image's build, should a test reach it: mmdebstrap fails at once.
        (self.bin / "mmdebstrap").write_text("#!/bin/sh\necho 'fake mmdebstrap: not here' >&2\nexit 97\n")
        (self.bin / "mmdebstrap").chmod(0o755)
        self.environment = {
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(base),
            "PYTHONDONTWRITEBYTECODE": "1",
            "FAKE_DOCKER_STATE": str(self.state_file),
            "LC_ALL": "C",
        }

    def _wheelhouse(self) -> None:
        """A wheelhouse the stamps say is current: the set-up downloads nothing."""
        pins = (self.root / wheelhouse.PINS).read_bytes()
        (self.root / wheelhouse.WHEELHOUSE).mkdir()
        (self.root / wheelhouse.WHEELHOUSE / "six-1.0-py3-none-any.whl").write_bytes(b"wheel")
        stamp = f"{hashlib.sha256(pins).hexdigest()}  {wheelhouse.PINS}\n"
        (self.root / wheelhouse.STAMP).write_text(stamp)
        (self.root / wheelhouse.EXTRA_WHEELHOUSE).mkdir()
        (self.root / wheelhouse.EXTRA_STAMP).parent.mkdir()
        (self.root / wheelhouse.EXTRA_STAMP).write_text(hashlib.sha256(b"\n" + pins).hexdigest() + "\n")

    def start(self, *arguments: str, **variables: str) -> subprocess.Popen:
        json.dump(self.state, self.state_file.open("w"))
        self.calls_file.unlink(missing_ok=True)
        return subprocess.Popen(
            [str(self.root / "scripts" / "setup"), *arguments],
            cwd=self.root,
            env={**self.environment, **variables},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def setup(self, *arguments: str, **variables: str) -> subprocess.CompletedProcess:
        process = self.start(*arguments, **variables)
        stdout, stderr = process.communicate(timeout=60)
        self.state = json.loads(self.state_file.read_text())
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def calls(self) -> list[dict]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def builds(self) -> list[list[str]]:
        return [call["arguments"] for call in self.calls() if "build" in call["arguments"]]


@pytest.fixture
def machine(tmp_path) -> Machine:
    return Machine(tmp_path)
