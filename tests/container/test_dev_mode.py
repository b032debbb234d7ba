"""`scripts/run --dev`: an edit of trainer/ reaches the run through a read-only mount, with no build.

The test edits a real file of this checkout and puts it back whatever happens; the image's labels
show that nothing was built meanwhile. It runs alone (the `alone` mark, tests/conftest.py): a run
of another test at the same time would build the edit into the image, or train with it.
"""

import subprocess

import pytest

from tests.container.conftest import ROOT
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(420), pytest.mark.alone]

EDITED = ROOT / "trainer" / "training" / "output.py"


def labels() -> str:
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", "tfcluster:latest"],
        capture_output=True,
        text=True,
        check=True,
    )
    return inspected.stdout


@pytest.fixture
def edited():
    """Appends a line to a trainer file for the test; the original comes back afterwards."""
    original = EDITED.read_text()

    def edit(line: str) -> None:
        EDITED.write_text(original + "\n" + line + "\n")

    yield edit
    EDITED.write_text(original)


def test_an_edit_runs_with_no_build_and_a_broken_edit_fails_the_run(scripts_run, edited):
    before = labels()
    edited('print("tfcluster dev mode: this checkout\'s code", flush=True)')
    project = scripts_run("--dev")
    result = project.finish(timeout=300)
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr[-2000:]
    assert "setup | building" not in result.stderr
    for worker in ("worker-0", "worker-1"):
        assert f"{worker}-1  | tfcluster dev mode: this checkout's code" in result.stdout
    mounts = project.state("worker-0")["Mounts"]
    assert {"Source": str(ROOT / "trainer"), "Destination": "/app/trainer", "RW": False}.items() <= next(
        mount for mount in mounts if mount["Destination"] == "/app/trainer"
    ).items()
    # The injected failure: the same mount, an edit that breaks the trainer, and the verdict says no.
    edited('raise SystemExit("tfcluster dev mode: a broken edit")')
    broken = project.finish(timeout=300)
    assert broken.returncode == ExitCode.VERIFICATION_FAILED, broken.stdout[-3000:]
    assert "tfcluster dev mode: a broken edit" in broken.stdout
    assert "setup | building" not in broken.stderr
    assert labels() == before  # Nothing was built for either edit.
