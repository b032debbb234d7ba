"""tfcluster installed from this checkout into a fresh virtual environment outside it, and used
from a project folder elsewhere as its users would (issue 29's Done-when): `tfcluster run` in the
folder to a PASS, and the project's own pytest file, through the plugin, to one pass and one
failure (a worker whose weights drift) that shows the verdict's lines, in the JUnit report too.
Nothing of the checkout is on the path: what runs is what the wheel carries."""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from tfcluster.cluster.compose import unique_name

from tests.conftest import FIXTURES, ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

# The user's test file in the copied project (a path of that project, not of this repository).
TEST_FILE = "/".join(("tests", "test_training.py"))


def _leftovers(home) -> list[str]:
    """The containers, networks and volumes of Compose projects run from the installed copy."""
    label = f"label=com.docker.compose.project.working_dir={home}"
    found = []
    for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
        listed = subprocess.run(["docker", *kind, "-q", "--filter", label], capture_output=True, text=True, check=True)
        found += listed.stdout.split()
    return found


def _remove(home) -> None:
    projects = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            f"label=com.docker.compose.project.working_dir={home}",
            "--format",
            '{{.Label "com.docker.compose.project"}}',
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    for name in set(projects):
        subprocess.run(
            ["docker", "compose", "-p", name, "down", "--volumes", "--remove-orphans"],
            capture_output=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(docker, tmp_path_factory):
    """A fresh venv with tfcluster installed from the checkout (pip builds the wheel), and pytest;
    the environment to run it in: its own cache folder, nothing of the checkout's on the path."""
    place = tmp_path_factory.mktemp("installed")
    venv = place / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT), "pytest"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    home = place / "cache" / "tfcluster" / "home"
    # The same pins' wheels the docker fixture's set-up downloaded, linked, not downloaded again:
    # 340 MB from PyPI on every run of this test would test PyPI. The copy's first set-up then
    # finds its image current, the one the checkout built from the same files.
    (home / "docker" / "wheels").mkdir(parents=True)
    for wheel in (ROOT / "docker" / "wheels").iterdir():
        os.link(wheel, home / "docker" / "wheels" / wheel.name)
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("PYTHON", "VIRTUAL_ENV"))}
    environment |= {"XDG_CACHE_HOME": str(place / "cache"), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    environment.pop("COMPOSE_PROJECT_NAME", None)
    yield venv, home, environment
    _remove(home)


@pytest.fixture
def project(tmp_path):
    """examples/custom-loop, copied out, with the user's own tests beside it."""
    folder = tmp_path / "elsewhere" / "my-model"
    shutil.copytree(ROOT / "examples" / "custom-loop", folder)
    shutil.copy(FIXTURES / "synchronization" / "custom_loop.py", folder / "drifting.py")
    shutil.copytree(FIXTURES / "installed" / "trainer", folder / "tests" / "trainer")
    shutil.copy(FIXTURES / "installed" / "users_test_file.py", folder / TEST_FILE)
    return folder


def test_tfcluster_run_in_a_project_folder_elsewhere_trains_it_to_a_pass(installed, project):
    venv, home, environment = installed
    tfcluster = str(venv / "bin" / "tfcluster")
    version = subprocess.run([tfcluster, "--version"], env=environment, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout == "tfcluster 0.1.0\n", version.stdout + version.stderr
    wrong = subprocess.run([tfcluster, "rnu"], env=environment, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2
    assert wrong.stderr == "tfcluster: unknown command 'rnu' (did you mean run?) (one of run, verify, setup, nodes)\n"
    name = unique_name("tfc-test")
    try:
        result = subprocess.run(
            [tfcluster, "run", "--name", name],
            cwd=project,
            env=environment,
            capture_output=True,
            text=True,
            timeout=420,
        )
    finally:
        subprocess.run(
            ["docker", "compose", "-p", name, "down", "--volumes", "--remove-orphans"],
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "verdict: PASS: 2 of 2 workers agree: replicas=2 " in result.stdout
    assert "weights identical at 5 points" in result.stdout
    # It ran from the per-user copy (its Compose files, its set-up), which the checkout is not.
    assert (home / "compose.yaml").read_bytes() == (ROOT / "compose.yaml").read_bytes()
    assert (home / "scripts" / "tfcluster" / "installed" / "plugin.py").is_file()
    assert "building" not in result.stderr, result.stderr[-2000:]  # The image was current.
    assert not _leftovers(home)


def test_the_projects_own_pytest_file_passes_in_sync_and_fails_a_drifting_worker_with_the_verdict(installed, project):
    venv, home, environment = installed
    report = project / "report.xml"
    result = subprocess.run(
        [str(venv / "bin" / "pytest"), "-q", f"--junitxml={report}", "tests"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 failed, 2 passed" in result.stdout, result.stdout[-3000:]
    assert f"FAILED {TEST_FILE}::test_a_worker_whose_weights_drift" in result.stdout
    # The failure is the verdict's own lines, at the test's own line (pytest's E lines).
    failure = [line.removeprefix("E").strip() for line in result.stdout.splitlines() if line.startswith("E ")]
    assert failure[:3] == [
        "AssertionError: the workers did not train in sync, exit status 7 (Compose project tfc-pytest-"
        + failure[0].split("tfc-pytest-")[-1],
        "verdict: FAIL: 1 problem(s)",
        failure[2],
    ], result.stdout[-3000:]
    assert failure[2].startswith("- model state differs at the end (step 12): worker-1 differs from worker-0 in ")
    # Shown at the test's own line, not the plugin's.
    assert any(line.startswith(">") and "tfcluster.run(command=" in line for line in result.stdout.splitlines())
    cases = {case.get("name"): case for case in ElementTree.parse(report).iter("testcase")}
    drifting, in_sync = cases["test_a_worker_whose_weights_drift"], cases["test_trains_in_sync"]
    assert "model state differs at the end" in drifting.find("failure").text
    assert in_sync.find("failure") is None
    verdicts = {
        name: json.loads(case.find("properties/property[@name='tfcluster.verdict']").get("value"))
        for name, case in (("drifting", drifting), ("in_sync", in_sync))
    }
    assert verdicts["in_sync"]["passed"] is True and verdicts["in_sync"]["synchronization"]["proven"]
    assert verdicts["drifting"]["passed"] is False
    # Each test's report: named in its junit properties and, for the failure, in its message; kept
    # after its cluster was taken down, and saying the run's verdict.
    pages = {
        name: case.find("properties/property[@name='tfcluster.report']").get("value")
        for name, case in (("drifting", drifting), ("in_sync", in_sync))
    }
    assert f"report: {pages['drifting']}" in failure, failure
    assert "verdict: FAIL" in Path(pages["drifting"]).read_text()
    assert "verdict: PASS: 2 of 2 workers agree" in Path(pages["in_sync"]).read_text()
    assert not _leftovers(home)  # Every test's cluster was torn down.
