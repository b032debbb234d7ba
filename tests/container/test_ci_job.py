"""The CI container job, run here as a runner runs it: this project's commands inside a job
container (scripts/job-image) that drives the host's engine through its socket, with the
checkout mounted at the same path, as a CI runner's `container:` job or Docker executor does.

The containers it starts are the host's siblings: a bind mount's source is resolved on the
host, which is why the checkout must be at the same path (docs/ci.md, "The container job").
"""

import os
import re
import shutil
import subprocess
from xml.etree import ElementTree

import pytest
import yaml
from tfcluster.cluster.compose import unique_name

from tests.container.conftest import ROOT
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

JOB_IMAGE = "tfcluster-job:bookworm"


@pytest.fixture(scope="module")
def job_image(docker):
    subprocess.run([str(ROOT / "scripts" / "job-image")], check=True, timeout=300)
    return JOB_IMAGE


@pytest.fixture
def in_job(job_image, scripts_run):
    """Runs a command in a job container of its own, as a Compose project of the test's own; both
    are removed afterwards, whatever happened."""
    names = []

    def run(*command: str, environment: dict[str, str] | None = None, at: str = str(ROOT), timeout: float = 300):
        project = scripts_run()  # For its unique name and its teardown; its own command is not used.
        name = unique_name("tfc-test-job")
        names.append(name)
        variables = {"COMPOSE_PROJECT_NAME": project.name, **(environment or {})}
        docker_run = ["docker", "run", "--rm", "--name", name, "-v", "/var/run/docker.sock:/var/run/docker.sock"]
        # As the user who runs the tests, as a runner's job does its own: what the job writes in the
        # checkout must stay the host's user's to overwrite (a CI runner's user is not root).
        docker_run += ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
        docker_run += ["--group-add", str(os.stat("/var/run/docker.sock").st_gid)]
        docker_run += ["-v", f"{ROOT}:{at}", "-w", at]
        for key, value in variables.items():
            docker_run += ["-e", f"{key}={value}"]
        return subprocess.run([*docker_run, job_image, *command], capture_output=True, text=True, timeout=timeout)

    yield run
    for name in names:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)


def test_the_main_job_passes_in_the_job_container_and_its_status_is_the_verdict(in_job, tmp_path):
    passed = in_job("scripts/run")
    assert passed.returncode == ExitCode.OK, passed.stdout[-3000:] + passed.stderr[-2000:]
    assert "verdict: PASS: 2 of 2 workers agree: replicas=2 initial_loss=0.7459 final_loss=0.4168" in passed.stdout
    assert "setup | building" not in passed.stderr  # The host's images were current: nothing was built.
    # The injected failure: a training script of the user's that fails, bind-mounted from the
    # checkout (the host resolves the path), and the job's status is the failed verdict's.
    script = ROOT / ".tfcluster" / f"{unique_name('failing')}.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text('raise SystemExit("tfcluster job test: this training fails")\n')
    try:
        failed = in_job("scripts/run", environment={"TRAINER_SCRIPT": str(script)})
    finally:
        script.unlink()
    assert failed.returncode == ExitCode.VERIFICATION_FAILED, failed.stdout[-3000:] + failed.stderr[-2000:]
    assert "tfcluster job test: this training fails" in failed.stdout
    assert "verdict: FAIL" in failed.stdout


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "module",
    [
        "tests/container/test_harness.py",
        # It edits a file of this checkout (mounted in the job container): with no other test at once.
        pytest.param("tests/container/test_dev_mode.py", marks=pytest.mark.alone),
    ],
)
def test_the_container_tests_of_the_main_job_pass_in_the_job_container(in_job, module):
    # This suite's own tests of scripts/run and of the development mode, run by the job container's
    # pytest (Debian's): every project they start is the host engine's, every bind mount the host's.
    # One module a test, so that the suite's other process waits only for the one that edits. All
    # but the one that downloads a requirement from PyPI: this machine's containers reach no network
    # (a CI runner's job container does; the image has pip for it).
    only = ["-k", "not test_extra_requirements_go_into_an_image_of_their_own"]
    result = in_job("python3", "-m", "pytest", "-p", "no:cacheprovider", "-q", *only, module, timeout=840)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert re.search(r"^\d+ passed", result.stdout.splitlines()[-1]), result.stdout[-2000:]


def test_a_project_mounted_from_the_job_container_trains(in_job):
    result = in_job("scripts/run", "--project", "examples/custom-loop")
    assert result.returncode == ExitCode.OK, result.stdout[-3000:] + result.stderr[-2000:]
    assert "verdict: PASS: 2 of 2 workers agree" in result.stdout


def action_step(inputs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """action.yml's step as the runner would run it: its script, and its env with the inputs in."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    given = {name: inputs.get(name, spec.get("default", "")) for name, spec in action["inputs"].items()}
    step = next(step for step in action["runs"]["steps"] if step.get("id") == "run")
    expression = re.compile(r"^\$\{\{ inputs\.([a-z-]+) \}\}$")
    # The inputs; the project's name is the name step's, which is COMPOSE_PROJECT_NAME when the job
    # sets one, as in_job does.
    inputs_env = {name: value for name, value in step["env"].items() if expression.match(value)}
    assert set(step["env"]) - set(inputs_env) == {"COMPOSE_PROJECT_NAME"}
    return step["run"], {name: given[expression.match(value).group(1)] for name, value in inputs_env.items()}


@pytest.mark.parametrize(("command", "status", "failed"), [("", ExitCode.OK, 0), ("python fails.py", 7, 2)])
def test_the_github_action_runs_in_the_job_container_on_an_example(in_job, command, status, failed):
    # A copy of the example, in the checkout (the job container's workspace) where git ignores it,
    # with a training script that fails for the failing case.
    scratch = ROOT / ".tfcluster" / unique_name("action")
    shutil.copytree(ROOT / "examples" / "custom-loop", scratch / "custom-loop")
    (scratch / "custom-loop" / "fails.py").write_text('raise SystemExit("tfcluster action test: it fails")\n')
    junit, output = scratch / "verdict.xml", scratch / "github-output"
    page = scratch / "report.html"  # Not the input's default, in the checkout's root.
    inputs = {
        "project": str((scratch / "custom-loop").relative_to(ROOT)),
        "command": command,
        "junit": str(junit),
        "report": str(page),
    }
    script, environment = action_step(inputs)
    environment |= {"GITHUB_ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(output)}
    try:
        result = in_job("bash", "-c", script, environment=environment)
        report = ElementTree.fromstring(junit.read_text())
        said = output.read_text()
        paged = page.is_file()
    finally:
        shutil.rmtree(scratch)
    assert result.returncode == status, result.stdout[-3000:] + result.stderr[-2000:]
    assert said == f"status={status}\n"
    assert paged  # The run's report, where the action's input said.
    assert (report.get("tests"), report.get("failures")) == ("5", str(failed))  # Workers, states, data, metrics.


def test_a_checkout_mounted_at_another_path_is_refused_before_anything_starts(in_job):
    # The engine would look /checkout/trainer up on the host, where there is no such folder.
    result = in_job("scripts/run", "--dev", at="/checkout")
    assert result.returncode == ExitCode.CONFIG_ERROR, result.stdout[-3000:] + result.stderr[-2000:]
    assert result.stderr.splitlines()[-1] == (
        "run: --dev /checkout/trainer: the Docker engine does not see it at that path: this runs in a "
        "container that drives the host's engine, which looks a bind mount's source up on the host; mount the "
        'checkout at the same path in the job container (docs/ci.md, "The container job")'
    )
    assert "Attaching to" not in result.stdout  # Nothing was started.


def test_the_job_image_holds_the_client_only(job_image):
    listed = subprocess.run(
        ["docker", "run", "--rm", job_image, "sh", "-c", "command -v docker dockerd; docker compose version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.stdout.splitlines()[0] == "/usr/bin/docker"
    assert "dockerd" not in listed.stdout and "containerd" not in listed.stdout
    assert listed.stdout.splitlines()[-1].startswith("Docker Compose version v2.")
