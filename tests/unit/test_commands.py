"""The host commands' front door: --help, bad arguments, `scripts/run --dry-run`, docs/commands.md.

Every command runs from a copy of the project with a fake `docker` first on PATH, which records
any call and fails: so a command that reached for Docker, set anything up, or wrote a file is
caught, and the real project (its .venv, images and containers) is never touched.
"""

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from tfcluster import paths
from tfcluster.ci import hostpaths
from tfcluster.cluster import build, scaling, steps
from tfcluster.cluster import plan as run_plan
from tfcluster.commands import docs as commands_doc
from tfcluster.commands import run, workers
from tfcluster.project import baking, requirements
from tfcluster.project.options import Project

from tests.conftest import ROOT
from trainer.contract.exitcodes import ExitCode

COMMANDS = [command for command, _purpose in commands_doc.COMMANDS]
# The Compose commands of a run, as they are run.
DOWN, UP, STOP = (("docker", "compose", *arguments) for arguments in (steps.DOWN, steps.UP, steps.STOP))
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


# -- --help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help_at_once_and_touches_nothing(sandbox, command, flag):
    result = sandbox.run(command, flag)
    assert result.returncode == ExitCode.OK, result.stderr
    assert result.stdout.startswith("usage: "), result.stdout
    assert result.stderr == ""
    sandbox.assert_untouched()
    # No virtual environment made on the way (scripts/test's .venv, scripts/benchmark's .venv-bench).
    assert not (sandbox.root / ".venv").exists() and not (sandbox.root / ".venv-bench").exists()


def test_help_comes_first_wherever_it_is_among_the_arguments(sandbox):
    for command, arguments in [
        ("scripts/run", ["--worker", "3", "--help"]),
        ("scripts/partition", ["worker-1", "--now", "-h"]),
        ("scripts/benchmark", ["--runs", "0", "--help"]),
        ("scripts/setup", ["--bogus", "--help"]),
        ("scripts/test", ["tests/unit", "-x", "--help"]),
    ]:
        result = sandbox.run(command, *arguments)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: {command} [-h]"), result.stdout
    sandbox.assert_untouched()


def test_scripts_test_says_its_arguments_go_to_pytest(sandbox):
    text = sandbox.run("scripts/test", "--help").stdout
    assert "passed to pytest" in text
    assert "scripts/test tests/unit -q" in text
    assert "scripts/test -- --help" in text


def exit_status_section(text: str) -> list[tuple[int, str]]:
    """The (code, meaning) lines under the help's `exit status` heading."""
    section = re.search(r"^exit status.*?:\n((?:  .*\n?)+)", text, re.MULTILINE)
    assert section, "no `exit status` section"
    return [(int(code), meaning) for code, meaning in re.findall(r"^  (\d+)\s+(.*)$", section.group(1), re.MULTILINE)]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_examples_and_its_exit_codes(sandbox, command):
    text = sandbox.run(command, "--help").stdout
    assert re.search(r"^examples:\n  scripts/", text, re.MULTILINE), "no examples"
    codes = [code for code, _meaning in exit_status_section(text)]
    assert codes[0] == ExitCode.OK and ExitCode.CONFIG_ERROR in codes


@pytest.mark.parametrize("command", [command for command in COMMANDS if command != "scripts/test"])
def test_exit_codes_are_named_as_in_the_contract(sandbox, command):
    # scripts/test's are pytest's own; every other command says each shared code in the same words.
    for code, meaning in exit_status_section(sandbox.run(command, "--help").stdout):
        if code in set(ExitCode):
            assert meaning.startswith(ExitCode(code).name.lower().replace("_", " ")), (code, meaning)


def test_scripts_benchmark_prints_the_benchmark_commands_own_help(sandbox):
    # The wrapper hands --help to tfcluster.commands.benchmark itself (run by python3: nothing
    # third-party is imported at its top), so the two cannot drift.
    wrapper = sandbox.run("scripts/benchmark", "--help")
    direct = subprocess.run(
        [sys.executable, "-m", "tfcluster.commands.benchmark", "--help"],
        cwd=sandbox.root,
        env={**sandbox.environment, "PYTHONPATH": f"{sandbox.root / 'scripts'}:{sandbox.root}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.returncode == 0, direct.stderr
    assert wrapper.stdout == direct.stdout


def test_scripts_benchmark_accepts_every_option_of_the_benchmark_command(sandbox):
    # The wrapper checks tfcluster.commands.benchmark's arguments before the set-up: it must know the same options.
    # Each known one is followed by a bad one, so that nothing ever gets past the check.
    text = sandbox.run("scripts/benchmark", "--help").stdout
    options = re.findall(r"^  (--[a-z-]+)( N)?", text, re.MULTILINE)
    assert {option for option, _ in options} == {"--runs", "--network", "--observer", "--steps"}
    for option, takes_a_number in options:
        result = sandbox.run("scripts/benchmark", option, *(["2"] if takes_a_number else []), "--not-an-option")
        assert result.returncode == 2
        assert result.stderr.startswith("benchmark: unknown argument '--not-an-option'"), result.stderr
    sandbox.assert_untouched()


# -- docs/commands.md -----------------------------------------------------------------------------


def test_the_commands_page_is_what_the_commands_print(sandbox, monkeypatch):
    # Rendered from the project itself (each --help is shown above to touch nothing), with the
    # fake docker first on PATH all the same.
    monkeypatch.setenv("PATH", sandbox.environment["PATH"])
    assert (ROOT / "docs" / "commands.md").read_text() == commands_doc.render(), (
        "docs/commands.md is out of date: python3 scripts/commands_doc.py"
    )
    assert not sandbox.calls.exists()


def test_every_option_of_the_python_parsers_is_on_the_commands_page():
    page = (ROOT / "docs" / "commands.md").read_text()
    for parser in (run.parser(), workers.parser()):
        for option in parser.option_strings():
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", page), option


# -- Bad arguments --------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("scripts/run", ["--worker", "3"], {}, ["'--worker'", "did you mean --workers?"]),
    ("scripts/run", ["--workers", "17"], {}, ["--workers", "1 to 16", "'17'"]),
    ("scripts/run", ["--workers", "0"], {}, ["--workers", "'0'"]),
    ("scripts/run", ["--workers"], {}, ["run: --workers needs a number"]),
    ("scripts/run", ["--network", "moon"], {}, ["--network 'moon' must be one of lan, wan, lossy, thin"]),
    ("scripts/run", ["--network", "wna"], {}, ["'wna'", "did you mean wan?"]),
    ("scripts/run", ["--network", "wan", "--workers", "3"], {}, ["--network", "not with --workers 3"]),
    ("scripts/run", ["--network", "lan", "--recover"], {}, ["--network and --recover do not go together"]),
    ("scripts/run", ["--dry-run", "--recover=yes"], {}, ["--recover takes no value, got 'yes'"]),
    ("scripts/run", ["--slow", "worker-1"], {}, ["run: --slow 'worker-1' must be NAME=CPUS, such as worker-1=0.25"]),
    ("scripts/run", ["--slow", "worker-1=fast"], {}, ["--slow 'worker-1=fast': CPUS must be a positive", "'fast'"]),
    ("scripts/run", ["--slow", "worker-1=0"], {}, ["--slow 'worker-1=0': CPUS must be a positive number", "got '0'"]),
    ("scripts/run", ["--slow", "worker-1=-1"], {}, ["--slow 'worker-1=-1': CPUS must be a positive number"]),
    ("scripts/run", ["--slow", "worker-1=inf"], {}, ["--slow 'worker-1=inf': CPUS must be a positive number"]),
    ("scripts/run", ["--slow", "worker-1=0.001"], {}, ["CPUS must be at least 0.01 (Docker's least limit)"]),
    ("scripts/run", ["--slow", "worker-2=1"], {}, ["--slow worker-2: no such worker in this run (worker-0, worker-1)"]),
    ("scripts/run", ["--slow", "worker1=0.5"], {}, ["--slow worker1: no such worker", "did you mean worker-1?"]),
    ("scripts/run", ["--workers", "1", "--slow", "worker-1=0.5"], {}, ["no such worker in this run (worker-0)"]),
    ("scripts/run", ["--slow", "worker-1=4096"], {}, ["--slow worker-1=4096: more CPUs than this machine has ("]),
    ("scripts/run", ["--slow", "worker-1=0.5", "--slow", "worker-1=1"], {}, ["worker-1 is given twice (0.5 and 1)"]),
    ("scripts/run", ["--slow"], {}, ["run: --slow needs NAME=CPUS"]),
    ("scripts/run", ["--bogus"], {}, ["'--bogus'", "usage: scripts/run [-h] [--workers N]"]),
    ("scripts/run", ["4"], {}, ["unknown argument '4'"]),
    ("scripts/run", ["--dry-run"], {"TRAINER_SCRIPT": "no/such/train.py"}, ["TRAINER_SCRIPT 'no/such/train.py'"]),
    ("scripts/partition", ["--bogus"], {}, ["partition: unknown argument '--bogus'"]),
    ("scripts/partition", ["worker-x"], {}, ["partition: 'worker-x' is not a worker's name (worker-N)"]),
    ("scripts/partition", ["worker-1", "--now"], {}, ["partition: unknown argument '--now'"]),
    ("scripts/partition", [], {}, ["partition: usage: scripts/partition WORKER [--heal]"]),
    ("scripts/setup", ["--bogus"], {}, ["setup: unknown argument '--bogus'"]),
    ("scripts/benchmark", ["--bogus"], {}, ["benchmark: unknown argument '--bogus'"]),
    ("scripts/benchmark", ["--run", "5"], {}, ["'--run'", "did you mean --runs?"]),
    ("scripts/benchmark", ["--runs", "0"], {}, ["--runs must be a whole number, at least 1, got '0'"]),
    ("scripts/workers.py", ["0"], {}, ["workers.py: the number of workers must be a whole number from 1 to 16"]),
    ("scripts/workers.py", [], {}, ["workers.py: N is missing"]),
    ("scripts/workers.py", ["3", "--target", "kubernets"], {}, ["'kubernets'", "did you mean kubernetes?"]),
    ("scripts/workers.py", ["3", "--bogus"], {}, ["workers.py: unknown argument '--bogus'"]),
    ("scripts/workers.py", ["3", "--output"], {}, ["workers.py: --output needs a file name"]),
]


def bad_argument_cases():
    for command, arguments, variables, expected in BAD_ARGUMENTS:
        yield pytest.param(command, arguments, variables, expected, id=" ".join([command, *arguments]))
    yield pytest.param(
        "scripts/verify",
        ["--timeout", "0", "x.log"],
        {},
        ["--timeout"],
        id="verify --timeout 0",
    )


@pytest.mark.parametrize(("command", "arguments", "variables", "expected"), list(bad_argument_cases()))
def test_a_bad_argument_is_one_line_naming_it_and_exit_2(sandbox, command, arguments, variables, expected):
    result = sandbox.run(command, *arguments, **variables)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    for text in expected:
        assert text in result.stderr
    sandbox.assert_untouched()


# -- scripts/run --dry-run ------------------------------------------------------------------------


def test_the_dry_run_with_a_network_profile_sets_up_the_shaper_too(sandbox):
    result = sandbox.run("scripts/run", "--dry-run", "--network", "wan")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "set-up         scripts/setup --shaper: " in text
    assert "a build of tfcluster:latest (worker-0) and tfcluster-shaper:latest (shaper-0), unless current\n" in text
    assert "  scripts/setup --shaper\n" in text


def test_the_dry_run_of_the_default_cluster(sandbox):
    result = sandbox.run("scripts/run", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "compose files  compose.yaml (COMPOSE_FILE)\n" in text
    assert "project        tfcluster (compose.yaml's name)\n" in text
    # Without a network profile the shaper's image is neither needed nor built.
    assert "a build of tfcluster:latest (worker-0), unless current\n" in text
    assert "tfcluster-shaper" not in text
    assert re.search(r"^  worker-0 +0 +worker-0,worker-1$", text, re.MULTILINE)
    assert re.search(r"^  worker-1 +1 +worker-0,worker-1$", text, re.MULTILINE)
    assert "  TRAIN_EPOCHS=3\n" in text and "  TF_JOIN_TIMEOUT=60\n" in text
    # Exactly the commands of a real run, in order.
    assert (
        "  scripts/setup\n"
        "  docker compose down --volumes --remove-orphans --timeout 1\n"
        "  docker compose up --remove-orphans --attach-dependencies --exit-code-from verifier verifier\n"
        "  docker compose stop --timeout 5\n"
    ) in text
    assert "COMPOSE_FILE=compose.yaml docker compose config" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_three_workers_with_recovery(sandbox):
    result = sandbox.run("scripts/run", "--workers", "3", "--recover", "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.workers.yaml:compose.recovery.yaml (COMPOSE_FILE)\n" in text
    assert "rendered       compose.workers.yaml, by scripts/workers.py 3\n" in text
    for index in range(3):
        assert re.search(rf"^  worker-{index} +{index} +worker-0,worker-1,worker-2$", text, re.MULTILINE)
    assert "(TF_RESTART_LIMIT=3, compose.recovery.yaml)" in text
    assert "worker-0, worker-1, worker-2, the keeper" in text
    assert "  write compose.workers.yaml\n  scripts/setup\n" in text
    # A dry run writes nothing, compose.workers.yaml included.
    sandbox.assert_untouched()


def test_the_dry_run_shows_your_settings_script_and_profile(sandbox, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "train.py").write_text("print('training')\n")
    result = sandbox.run(
        "scripts/run",
        "--network",
        "wan",
        "--dry-run",
        cwd=elsewhere,
        TRAINER_SCRIPT="train.py",
        TRAIN_EPOCHS="5",
        COMPOSE_PROJECT_NAME="tfc-mine",
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.byo.yaml:compose.network.yaml (COMPOSE_FILE)\n" in text
    assert "project        tfc-mine (COMPOSE_PROJECT_NAME)\n" in text
    # The script's path is taken from where the user is, and made absolute for Compose.
    assert f"trainer        {elsewhere.resolve() / 'train.py'}, read-only at /user/train.py" in text
    assert "network        profile wan, applied and measured by shaper-0, shaper-1\n" in text
    assert "  TRAIN_EPOCHS=5\n" in text and "  TF_NETWORK_PROFILE=wan\n" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_one_worker_shows_its_own_pass_mark(sandbox):
    text = sandbox.run("scripts/run", "--workers", "1", "--dry-run").stdout
    assert re.search(r"^  worker-0 +0 +worker-0$", text, re.MULTILINE)
    assert f"  TRAIN_MIN_ACCURACY={scaling.SINGLE_WORKER_MIN_ACCURACY}\n" in text


def test_the_dry_run_shows_each_workers_cpus_and_the_slowed_ones(sandbox):
    text = sandbox.run("scripts/run", "--dry-run").stdout
    assert "cpus           every worker: 2 (TF_WORKER_CPUS); --slow NAME=CPUS limits one\n" in text
    arguments = ["--workers", "3", "--slow", "worker-2=.5", "--slow", "worker-0=1.0", "--dry-run"]
    result = sandbox.run("scripts/run", *arguments, TF_WORKER_CPUS="1.5")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --workers 3 --slow worker-2=0.5,worker-0=1 --dry-run: what it would do")
    assert "compose files  compose.yaml:compose.workers.yaml:.tfcluster/compose.slow.yaml (COMPOSE_FILE)\n" in text
    assert (
        "cpus           worker-2: 0.5, worker-0: 1 (--slow, .tfcluster/compose.slow.yaml); "
        "every other worker: 1.5 (TF_WORKER_CPUS)\n"
    ) in text
    assert "  write compose.workers.yaml\n  write .tfcluster/compose.slow.yaml\n  scripts/setup\n" in text
    sandbox.assert_untouched()


def test_the_slowed_limits_are_one_override_named_last(recorded, tmp_path):
    status, recorder = recorded(["--slow", "worker-1=0.25,worker-0=1.5", "--network", "lan"])
    assert status == 0
    assert recorder.commands[2][0] == UP
    assert recorder.commands[2][1]["env"]["COMPOSE_FILE"] == (
        "compose.yaml:compose.network.yaml:.tfcluster/compose.slow.yaml"
    )
    assert (tmp_path / ".tfcluster/compose.slow.yaml").read_text() == (
        "# Written by `scripts/run --slow worker-1=0.25,worker-0=1.5`: each named worker's CPU limit. Do not edit.\n"
        "services:\n  worker-1:\n    cpus: 0.25\n  worker-0:\n    cpus: 1.5\n"
    )


def test_the_dry_run_of_the_development_mode_names_the_mount_and_the_set_up(sandbox):
    result = sandbox.run("scripts/run", "--workers", "3", "--recover", "--dev", "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --workers 3 --recover --dev --dry-run: what it would do")
    assert (
        "compose files  compose.yaml:compose.workers.yaml:compose.recovery.yaml:.tfcluster/compose.dev.yaml"
    ) in text
    assert (
        "code           this checkout's trainer/, read-only at /app/trainer on worker-0, worker-1, worker-2, "
        "verifier, keeper (--dev)\n"
    ) in text
    assert "unless current (--dev: its code aside)\n" in text
    assert "  write .tfcluster/compose.dev.yaml\n  scripts/setup --dev\n" in text
    sandbox.assert_untouched()


def test_the_development_mode_mounts_this_checkouts_code_on_every_service_of_the_harness(recorded, tmp_path):
    status, recorder = recorded(["--dev", "--slow", "worker-1=0.5"])
    assert status == 0
    assert recorder.commands[0][0] == (str(tmp_path / "scripts" / "setup"), "--dev")
    assert recorder.commands[2][1]["env"]["COMPOSE_FILE"] == (
        "compose.yaml:.tfcluster/compose.dev.yaml:.tfcluster/compose.slow.yaml"
    )
    written = yaml.safe_load((tmp_path / ".tfcluster/compose.dev.yaml").read_text())
    mount = {"type": "bind", "source": str(tmp_path / "trainer"), "target": "/app/trainer", "read_only": True}
    assert written == {"services": {name: {"volumes": [mount]} for name in ("worker-0", "worker-1", "verifier")}}


def test_in_a_container_a_bind_source_the_engine_does_not_see_is_refused_before_anything_starts(
    recorded, monkeypatch, tmp_path
):
    asked = []

    def unseen(sources, image, _environment):
        asked.append((sources, image))
        return ["--dev"]

    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: True)
    monkeypatch.setattr(hostpaths, "unseen", unseen)
    status, recorder = recorded(["--dev"])
    assert status == 2
    assert asked == [({"--dev": str(tmp_path / "trainer")}, "tfcluster:latest")]
    # The set-up ran (the check needs its image); nothing of the cluster did.
    assert [command for command, _ in recorder.commands] == [(str(tmp_path / "scripts" / "setup"), "--dev")]


def test_outside_a_container_or_with_nothing_mounted_nothing_is_checked(recorded, monkeypatch):
    monkeypatch.setattr(hostpaths, "unseen", lambda *_: pytest.fail("checked"))
    assert recorded(["--dev"])[0] == 0
    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: True)
    assert recorded([])[0] == 0


def test_the_bind_sources_of_a_plan_are_what_its_workers_mount(tmp_path):
    project = Project(
        arguments=(), directory="/p", command=("python", "train.py"), data="/d", variables={},
        requirements=(), requirements_file=None, image=None,
    )  # fmt: skip
    assert run_plan.Plan(2, False, None, None, project, dev=True).bind_sources() == {
        "--project": "/p",
        "--data": "/d",
        "--dev": str(paths.ROOT / "trainer"),
    }
    assert run_plan.Plan(2, False, None, "/s/train.py").bind_sources() == {"TRAINER_SCRIPT": "/s/train.py"}
    assert run_plan.Plan(2, False, None, None).bind_sources() == {}


def test_without_the_development_mode_nothing_is_mounted_over_the_code(recorded):
    status, recorder = recorded([])
    assert status == 0
    assert recorder.commands[0][0][1:] == ()
    assert ".tfcluster/compose.dev.yaml" not in recorder.commands[2][1]["env"]["COMPOSE_FILE"]


def test_a_slowed_worker_beyond_the_machines_cores_is_refused_before_anything_starts(sandbox):
    # Not a dry run: Docker would refuse it only at `up`, after the set-up.
    cores = os.cpu_count()
    result = sandbox.run("scripts/run", "--slow", f"worker-0={cores + 0.5}")
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == f"run: --slow worker-0={cores + 0.5}: more CPUs than this machine has ({cores})\n"
    sandbox.assert_untouched()
    assert sandbox.run("scripts/run", "--slow", f"worker-0={cores}", "--dry-run").returncode == 0


# -- scripts/run --project: bad input ------------------------------------------------------------


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


# (arguments, files written into the project first, variables, what the one line must say), run
# from the project's parent folder, so that paths are the user's own, relative to where they are.
PROJECT_BAD_INPUTS = [
    (["--project", "no/such"], {}, {}, "run: --project 'no/such' is not a folder\n"),
    (["--project", "empty"], {}, {}, "run: --project 'empty' has no train.py: give --command\n"),
    (
        ["--project", "mine", "--command", "python missing.py"],
        {},
        {},
        "the script 'missing.py' is not a file of /project",
    ),
    (
        ["--project", "mine", "--command", "python -u ../mine/train.py"],
        {},
        {},
        "'../mine/train.py' leads out of /project",
    ),
    (
        ["--project", "mine", "--command", "python -u -W ignore -X dev gone.py"],
        {},
        {},
        "the script 'gone.py' is not a file",
    ),
    (
        ["--project", "mine", "--command", "python -m model.missing"],
        {},
        {},
        "module 'model.missing' is not in the project",
    ),
    (["--project", "mine", "--command", "python3 -m torch.distributed.run"], {}, {}, "module 'torch.distributed.run'"),
    (["--project", "mine", "--command", "python -m"], {}, {}, "run: --command: python's -m needs a value\n"),
    (["--project", "mine", "--command", "./run.sh"], {}, {}, "the program './run.sh' is not executable"),
    (["--project", "mine", "--command", "./gone.sh"], {}, {}, "the program './gone.sh' is not a file of /project"),
    (["--project", "mine", "--command", "python 'unclosed"], {}, {}, "cannot be split as a shell would"),
    (["--project", "mine", "--command", ""], {}, {}, "run: --command is empty\n"),
    (["--project", "mine", "--data", "no/data"], {}, {}, "run: --data 'no/data' is not a folder\n"),
    (
        ["--project", "mine", "--env", "TF_CONFIG={}"],
        {},
        {},
        "run: --env TF_CONFIG is set by the harness on every worker",
    ),
    (
        ["--project", "mine", "--env", "TFCLUSTER_PROJECT_DIR=/x"],
        {},
        {},
        "run: --env TFCLUSTER_PROJECT_DIR is set by the harness",
    ),
    (["--project", "mine", "--env", "PYTHONPATH=/x"], {}, {}, "run: --env PYTHONPATH is set by the harness"),
    (
        ["--project", "mine", "--env", "TRAIN_EPOCHS=5"],
        {},
        {},
        "run: --env TRAIN_EPOCHS is a setting of the harness: set it in scripts/run's environment instead",
    ),
    (["--project", "mine", "--env", "TF_RUN_TIMEOUT=60"], {}, {}, "TF_RUN_TIMEOUT=... scripts/run ..."),
    (["--project", "mine", "--env", "BATCH"], {}, {}, "run: --env 'BATCH' must be NAME=VALUE"),
    (["--project", "mine", "--env", "MY-VAR=1"], {}, {}, "run: --env 'MY-VAR' is not a variable name"),
    (["--project", "mine", "--env-file", "mine/gone.env"], {}, {}, "run: --env-file 'mine/gone.env' does not exist\n"),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "# mine\nBATCH=64\nTF_WORKER_HOSTS=a,b\n"},
        {},
        "run: --env-file mine/bad.env line 3: TF_WORKER_HOSTS is set by the harness",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "\nexport TRAIN_SEED=1\n"},
        {},
        "run: --env-file mine/bad.env line 2: TRAIN_SEED is a setting of the harness",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "BATCH=64\nGREETING='hello\nworld\nnot an assignment\n"},
        {},
        "run: --env-file mine/bad.env line 2: unterminated quoted value 'hello\n",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "BATCH=64\nnot an assignment\n"},
        {},
        "run: --env-file mine/bad.env line 2: expected NAME=VALUE, got 'not an assignment'\n",
    ),
    (
        ["--project", "mine"],
        {"requirements.txt": "tqdm==4.67.1\n-r more.txt\n"},
        {},
        "run: mine/requirements.txt line 2: '-r more.txt' is an option",
    ),
    (
        ["--project", "mine", "--requirements", "mine/other.txt"],
        {"other.txt": "# mine\n--index-url https://example.org/simple\n"},
        {},
        "run: mine/other.txt line 2: '--index-url https://example.org/simple' is an option",
    ),
    (
        ["--project", "mine", "--requirements", "mine/other.txt"],
        {"other.txt": "tqdm @ https://example.org/tqdm.whl\n"},
        {},
        "run: mine/other.txt line 1: 'tqdm @ https://example.org/tqdm.whl' is a URL or a path",
    ),
    (
        ["--project", "mine", "--requirements", "mine/gone.txt"],
        {},
        {},
        "run: --requirements 'mine/gone.txt' is not a file\n",
    ),
    (
        ["--project", "mine"],
        {"requirements.txt": "tqdm\n"},
        {"EXTRA_REQUIREMENTS": "rich"},
        "run: EXTRA_REQUIREMENTS and mine/requirements.txt do not go together",
    ),
    (
        ["--project", "mine"],
        {},
        {"TRAINER_SCRIPT": "mine/train.py"},
        "run: --project and TRAINER_SCRIPT do not go together",
    ),
    (["--env", "BATCH=64"], {}, {}, "run: --env goes with --project DIR (your training project)\n"),
    (["--data", "data"], {}, {}, "run: --data goes with --project DIR"),
    (["--command", "python train.py"], {}, {}, "run: --command goes with --project DIR"),
    (["--project"], {}, {}, "run: --project needs a folder\n"),
    (["--project", "mine", "--env"], {}, {}, "run: --env needs NAME=VALUE\n"),
    # --bake: the project in an image of its own.
    (["--bake"], {}, {}, "run: --bake goes with --project DIR (your training project)\n"),
    (["--tag", "mine:1"], {}, {}, "run: --tag goes with --bake (the name of the image it builds)\n"),
    (["--project", "mine", "--tag", "mine:1"], {}, {}, "run: --tag goes with --bake"),
    (["--project", "mine", "--bake", "--tag"], {}, {}, "run: --tag needs an image name\n"),
    (["--project", "mine", "--bake", "--tag", "Mine:1"], {}, {}, "run: --tag 'Mine:1' is not an image name"),
    (["--project", "mine", "--bake", "--tag", "mine@sha256:" + "0" * 64], {}, {}, "is not an image name"),
    (
        ["--project", "mine", "--bake", "--tag", "tfcluster:latest"],
        {},
        {},
        "run: --tag 'tfcluster:latest' would replace an image of the harness's own",
    ),
    (["--project", "mine", "--bake", "--tag", "mine:2"], {}, {"TFCLUSTER_IMAGE": "mine:2"}, "harness's own"),
    (
        ["--project", "mine", "--bake"],
        {".dockerignore": "# Not in the image\n*.py\n"},
        {},
        "run: --command: the script 'train.py' is left out of the image by --bake (by the project's .dockerignore",
    ),
    (
        ["--project", "mine", "--bake", "--command", "python -m model.cli"],
        {".dockerignore": "model\n"},
        {},
        "run: --command: module 'model.cli' (model/cli/__main__.py) is left out of the image by --bake",
    ),
    (
        # `*.py` takes back the project's top-level scripts only, not those below a folder left out.
        ["--project", "mine", "--bake", "--command", "python model/train.py"],
        {".dockerignore": "*\n!*.py\n"},
        {},
        "run: --command: the script 'model/train.py' is left out of the image by --bake",
    ),
    (["--project", "mine", "--bake"], {".dockerignore": "*.pyc\n  !  \n"}, {}, ".dockerignore line 2: '!' alone"),
    (["--project", "mine", "--bake"], {".dockerignore": "data[\n"}, {}, ".dockerignore line 1: 'data[' is not a valid"),
    (
        ["--project", "mine", "--bake"],
        {".tfcluster-project.Dockerfile": "FROM scratch\n"},
        {},
        "has a .tfcluster-project.Dockerfile, a name the build context keeps for its own",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "files", "variables", "expected"),
    [
        pytest.param(*case, id=" ".join(case[0]) + "".join(f" [{name}]" for name in case[1]))
        for case in PROJECT_BAD_INPUTS
    ],
)
def test_bad_input_for_your_project_is_one_line_naming_it_and_exit_2(
    sandbox, training_project, arguments, files, variables, expected
):
    for name, text in files.items():
        (training_project / name).write_text(text)
    result = sandbox.run("scripts/run", *arguments, "--dry-run", cwd=training_project.parent, **variables)
    assert result.returncode == ExitCode.CONFIG_ERROR, result.stdout
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("run: ")
    assert expected in result.stderr
    sandbox.assert_untouched()


def test_your_project_is_checked_before_anything_is_set_up(sandbox, training_project):
    # Not a dry run: refused all the same, with nothing written and Docker never called.
    result = sandbox.run("scripts/run", "--project", "mine", "--env", "HOME=/root", cwd=training_project.parent)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == (
        "run: --env HOME is set by the harness on every worker, not by you (docs/bring-your-own.md)\n"
    )
    sandbox.assert_untouched()


# -- scripts/run --project: the dry run ------------------------------------------------------------


def test_the_dry_run_of_your_project_on_the_default_two_workers(sandbox, training_project):
    result = sandbox.run("scripts/run", "--project", "mine", "--dry-run", cwd=training_project.parent)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.project.yaml (COMPOSE_FILE)\n" in text
    # The default command, since the project has a train.py.
    assert "trainer        your command, in /project on every worker: python train.py (compose.project.yaml)\n" in text
    assert f"your project   {training_project}, read-only at /project (TFCLUSTER_PROJECT_DIR=/project)\n" in text
    assert "your data      none" in text
    assert "your variables none (--env, --env-file); .tfcluster/env is written with none\n" in text
    assert "requirements   none (no requirements.txt in the project, no --requirements)\n" in text
    assert "tfcluster:latest (worker-0)" in text
    assert "  write .tfcluster/env\n  scripts/setup\n" in text
    assert f"TFCLUSTER_PROJECT={training_project} TFCLUSTER_COMMAND='python train.py'" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_your_project_data_variables_and_three_workers(sandbox, training_project):
    (training_project / "requirements.txt").write_text("# What the model needs\nTqdm >= 4.0\nrich==15.0.0  # pinned\n")
    result = sandbox.run(
        "scripts/run",
        "--project",
        "mine",
        "--command",
        "python -m model.cli --epochs 2",
        "--data",
        "data",
        "--env-file",
        "mine/cluster.env",
        "--env",
        "BATCH=128",
        "--env",
        "TF_USE_LEGACY_KERAS=1",
        "--workers",
        "3",
        "--dry-run",
        cwd=training_project.parent,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(
        "scripts/run --workers 3 --project mine --command 'python -m model.cli --epochs 2' --data data "
        "--env BATCH=128 --env TF_USE_LEGACY_KERAS=1 --env-file mine/cluster.env --dry-run: what it would do"
    )
    assert "compose files  compose.yaml:compose.workers.yaml (COMPOSE_FILE)\n" in text
    assert "rendered       compose.workers.yaml, by scripts/workers.py 3 --project --data\n" in text
    assert "python -m model.cli --epochs 2 (compose.workers.yaml)\n" in text
    data = training_project.parent / "data"
    assert f"your data      {data}, read-only at /data (TFCLUSTER_DATA_DIR=/data, compose.workers.yaml)\n" in text
    # --env wins over the file; the values are shown, since they are the user's own.
    assert (
        "your variables BATCH=128\n"
        "               GREETING='hello world'\n"
        "               TF_USE_LEGACY_KERAS=1\n"
        "               through .tfcluster/env (env_file), with TFCLUSTER_USER_ENV=BATCH,GREETING,TF_USE_LEGACY_KERAS\n"
    ) in text
    # Normalized, sorted, and named after: an image of their own.
    tag = requirements.image_tag(["rich==15.0.0", "tqdm>=4.0"])
    assert re.fullmatch(r"tfcluster-project:[0-9a-f]{12}", tag)
    assert "requirements   rich==15.0.0 tqdm>=4.0 (EXTRA_REQUIREMENTS)\n" in text
    assert f"in the image {tag} (TFCLUSTER_IMAGE: its name, from requirements)\n" in text
    assert f"then\n               a build of {tag} (worker-0), unless current" in text
    for index in range(3):
        assert re.search(rf"^  worker-{index} +{index} +worker-0,worker-1,worker-2$", text, re.MULTILINE)
    assert "  python3 scripts/workers.py 3 --project --data --output compose.workers.yaml\n" in text
    assert f"TFCLUSTER_DATA={data} EXTRA_REQUIREMENTS='rich==15.0.0 tqdm>=4.0' TFCLUSTER_IMAGE={tag}" in text
    sandbox.assert_untouched()


def test_the_dry_run_with_data_on_two_workers_adds_compose_data_yaml(sandbox, training_project):
    result = sandbox.run(
        "scripts/run", "--project", "mine", "--data", "data", "--recover", "--dry-run", cwd=training_project.parent
    )
    assert result.returncode == 0, result.stderr
    assert (
        "compose files  compose.yaml:compose.project.yaml:compose.data.yaml:compose.recovery.yaml (COMPOSE_FILE)\n"
        in result.stdout
    )


def test_your_own_image_name_wins_over_the_one_made_from_requirements(sandbox, training_project):
    (training_project / "requirements.txt").write_text("tqdm\n")
    result = sandbox.run(
        "scripts/run", "--project", "mine", "--dry-run", cwd=training_project.parent, TFCLUSTER_IMAGE="mine:1"
    )
    assert result.returncode == 0, result.stderr
    assert "in the image mine:1 (TFCLUSTER_IMAGE: yours)\n" in result.stdout
    assert "mine:1 (worker-0)" in result.stdout
    assert "tfcluster-project" not in result.stdout


def test_the_image_tag_depends_on_the_requirements_only():
    tag = requirements.image_tag
    assert tag(["tqdm==4.67.1"]) == tag(["tqdm==4.67.1"])
    assert tag(["tqdm==4.67.1"]) != tag(["tqdm==4.67.0"])


# -- scripts/run's real run, with every command recorded instead of run ---------------------------


class Recorder:
    """Stands in for subprocess.run in scripts/tfcluster/commands/run.py: records each command, returns set codes."""

    def __init__(self, codes: dict[str, int]):
        self.codes = codes
        self.commands: list[tuple[tuple[str, ...], dict]] = []

    def __call__(self, command, **options):
        self.commands.append((tuple(command), options))
        key = "setup" if command[0].endswith("scripts/setup") else command[2]
        return subprocess.CompletedProcess(command, self.codes.get(key, 0))


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    # This machine may itself be a container; a test of whether a run checks its mounts sets its own.
    monkeypatch.setattr(hostpaths, "in_container", lambda _environment: False)

    def start(argv, codes=None, **variables):
        recorder = Recorder(codes or {})
        monkeypatch.setattr(paths, "ROOT", tmp_path)
        monkeypatch.setattr(subprocess, "run", recorder)
        for name in ("TRAINER_SCRIPT", "COMPOSE_FILE", "TF_NETWORK_PROFILE", "EXTRA_REQUIREMENTS", "TFCLUSTER_IMAGE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        return run.main(argv), recorder

    return start


def test_a_run_is_setup_down_up_stop_with_the_verifiers_status(recorded, tmp_path):
    status, recorder = recorded(["--workers", "3", "--recover"], codes={"up": 7})
    assert status == 7
    assert [command for command, _ in recorder.commands] == [
        (str(tmp_path / "scripts" / "setup"),),
        DOWN,
        UP,
        STOP,
    ]
    for _command, options in recorder.commands:
        assert options["cwd"] == tmp_path
        assert options["env"]["COMPOSE_FILE"] == "compose.yaml:compose.workers.yaml:compose.recovery.yaml"
    # The verifier's output is the user's; down's and stop's are not.
    assert "stdout" not in recorder.commands[2][1]
    assert recorder.commands[1][1]["stdout"] == recorder.commands[3][1]["stdout"] == subprocess.DEVNULL
    assert (tmp_path / "compose.workers.yaml").read_text() == scaling.render(3)


def test_a_failed_setup_ends_the_run_with_its_status(recorded):
    status, recorder = recorded([], codes={"setup": 2})
    assert status == 2
    assert len(recorder.commands) == 1


def test_a_verifier_ended_by_a_signal_is_reported_as_a_shell_would(recorded):
    status, _recorder = recorded([], codes={"up": -15})
    assert status == ExitCode.TERMINATED


def test_your_own_trainer_and_a_profile_reach_compose(recorded, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    _status, recorder = recorded(["--network", "thin"], TRAINER_SCRIPT=str(script))
    environment = recorder.commands[0][1]["env"]
    assert environment["COMPOSE_FILE"] == "compose.yaml:compose.byo.yaml:compose.network.yaml"
    assert environment["TRAINER_SCRIPT"] == str(script.resolve())
    assert environment["TF_NETWORK_PROFILE"] == "thin"


def test_your_project_reaches_compose_and_its_variables_the_env_file(recorded, tmp_path):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    (project / "requirements.txt").write_text("tqdm==4.67.1\n")
    status, recorder = recorded(["--project", str(project), "--env", "GREETING=it's $HOME", "--workers", "3"])
    assert status == 0
    environment = recorder.commands[0][1]["env"]
    assert environment["COMPOSE_FILE"] == "compose.yaml:compose.workers.yaml"
    assert environment["TFCLUSTER_PROJECT"] == str(project.resolve())
    assert environment["TFCLUSTER_COMMAND"] == "python train.py"
    assert environment["TFCLUSTER_ENV_FILE"] == str(tmp_path / ".tfcluster" / "env")
    assert environment["EXTRA_REQUIREMENTS"] == "tqdm==4.67.1"
    assert environment["TFCLUSTER_IMAGE"] == requirements.image_tag(["tqdm==4.67.1"])
    assert "TFCLUSTER_DATA" not in environment
    # Written before the set-up, quoted so that Compose reads the value back as it was given.
    assert (
        (tmp_path / ".tfcluster" / "env")
        .read_text()
        .endswith('GREETING="it\'s \\$HOME"\nTFCLUSTER_USER_ENV=GREETING\n')
    )
    assert (tmp_path / "compose.workers.yaml").read_text() == scaling.render(3, project=True)


def test_a_project_without_variables_still_gets_a_fresh_env_file(recorded, tmp_path):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    (tmp_path / ".tfcluster").mkdir()
    (tmp_path / ".tfcluster" / "env").write_text("STALE=1\nTFCLUSTER_USER_ENV=STALE\n")
    _status, recorder = recorded(["--project", str(project)])
    assert recorder.commands[0][1]["env"]["COMPOSE_FILE"] == "compose.yaml:compose.project.yaml"
    assert "STALE" not in (tmp_path / ".tfcluster" / "env").read_text()
    assert (tmp_path / ".tfcluster" / "env").read_text().endswith("\nTFCLUSTER_USER_ENV=\n")


# -- scripts/run --project DIR --bake --------------------------------------------------------------


def test_the_help_offers_baking(sandbox):
    text = sandbox.run("scripts/run", "--help").stdout
    assert "[--bake] [--tag NAME]" in text
    assert re.search(r"^  --bake +with --project: copy DIR into an image of its own", text, re.MULTILINE)
    assert re.search(r"^  --tag NAME +with --bake: the baked image's name", text, re.MULTILINE)
    assert "scripts/run --project examples/custom-loop --bake" in text


def test_the_dry_run_of_a_baked_project_names_its_image_and_mounts_nothing(sandbox, training_project):
    (training_project / ".dockerignore").write_text("*.env\n")
    (training_project / "model" / "__pycache__").mkdir()
    (training_project / "model" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"cached")
    result = sandbox.run("scripts/run", "--project", "mine", "--bake", "--dry-run", cwd=training_project.parent)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --project mine --bake --dry-run: what it would do")
    assert "compose files  compose.yaml:compose.baked.yaml (COMPOSE_FILE)\n" in text
    assert "trainer        your command, in /project on every worker: python train.py (compose.baked.yaml)\n" in text
    assert (
        f"your project   {training_project}, copied into the image at /project, not mounted "
        "(TFCLUSTER_PROJECT_DIR=/project)\n"
    ) in text
    # Named after the files and the base image's id, which only the set-up makes known.
    assert (
        "baked image    tfcluster-baked:HASH, HASH after what is sent and the id of tfcluster:latest\n"
        "               (docker/Dockerfile.project on it), known once the set-up has built that\n"
        # train.py, run.sh and model's three; not cluster.env (.dockerignore) nor the cache.
        "               sent: 5 files and 2 folders, 28 bytes\n"
        "               left out: what .dockerignore names, __pycache__, .git, virtual environments\n"
    ) in text
    # No mount of the project: no compose.project.yaml, no host folder handed to Compose.
    assert "read-only at /project" not in text and "compose.project.yaml" not in text
    assert "TFCLUSTER_PROJECT=" not in text
    assert (
        "  scripts/setup\n"
        "  docker build --quiet --file .tfcluster-project.Dockerfile --tag tfcluster-baked:HASH "
        "--build-arg TFCLUSTER_IMAGE=tfcluster:latest --label tfcluster.project.folder="
    ) in text
    assert (
        "  docker compose down --volumes --remove-orphans --timeout 1\n"
        "  docker image rm (this folder's earlier tfcluster-baked images, if any)\n"
        "  docker image prune --force --filter label=org.opencontainers.image.title=tfcluster-baked\n"
        "  docker compose up "
    ) in text
    assert "COMPOSE_FILE=compose.yaml:compose.baked.yaml TFCLUSTER_BAKED_IMAGE=tfcluster-baked:HASH " in text
    sandbox.assert_untouched()


def test_the_dry_run_of_a_baked_project_named_by_you_with_its_data_inside_on_three_workers(sandbox, training_project):
    (training_project / "data").mkdir()
    (training_project / "data" / "points.csv").write_text("1,2\n")
    result = sandbox.run(
        "scripts/run",
        "--project",
        "mine",
        "--data",
        "mine/data",
        "--bake",
        "--tag",
        "registry.example.com/mine:1",
        "--workers",
        "3",
        "--dry-run",
        cwd=training_project.parent,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.workers.yaml (COMPOSE_FILE)\n" in text
    assert "rendered       compose.workers.yaml, by scripts/workers.py 3 --project --baked --data\n" in text
    assert "baked image    registry.example.com/mine:1 (--tag), docker/Dockerfile.project on tfcluster:latest\n" in text
    # The data stays out of the image, and mounted.
    assert "sent: 6 files and 2 folders, 88 bytes\n" in text
    assert "left out: __pycache__, .git, virtual environments, data/ (--data: mounted instead)\n" in text
    data = training_project / "data"
    assert f"your data      {data}, read-only at /data (TFCLUSTER_DATA_DIR=/data, compose.workers.yaml)\n" in text
    assert "--tag registry.example.com/mine:1 --build-arg TFCLUSTER_IMAGE=tfcluster:latest" in text
    # Your own name is yours: no earlier image is removed.
    assert "docker image rm" not in text
    assert "  python3 scripts/workers.py 3 --project --baked --data --output compose.workers.yaml\n" in text
    assert "TFCLUSTER_BAKED_IMAGE=registry.example.com/mine:1 TFCLUSTER_COMMAND='python train.py' " in text
    assert f"TFCLUSTER_DATA={data} " in text and "TFCLUSTER_PROJECT=" not in text
    sandbox.assert_untouched()


def test_a_baked_run_builds_after_the_setup_and_runs_the_image_unmounted(recorded, tmp_path, monkeypatch):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    baked, removed = [], []

    def bake(plan_project, environment, _root):
        baked.append((plan_project.directory, environment["COMPOSE_FILE"], "TFCLUSTER_BAKED_IMAGE" in environment))
        return "tfcluster-baked:0123456789ab", 0

    monkeypatch.setattr(build, "bake", bake)
    monkeypatch.setattr(
        build, "remove_superseded", lambda _project, current, _environment, _root: removed.append(current)
    )
    status, recorder = recorded(["--project", str(project), "--bake", "--workers", "3"], codes={"up": 7})
    assert status == 7
    assert [command for command, _ in recorder.commands] == [
        (str(tmp_path / "scripts" / "setup"),),
        DOWN,
        UP,
        STOP,
    ]
    # Built after the set-up (which builds the image it is built on), named only then.
    assert baked == [(str(project.resolve()), "compose.yaml:compose.workers.yaml", False)]
    environment = recorder.commands[2][1]["env"]
    assert environment["TFCLUSTER_BAKED_IMAGE"] == "tfcluster-baked:0123456789ab"
    assert "TFCLUSTER_PROJECT" not in environment
    assert (tmp_path / "compose.workers.yaml").read_text() == scaling.render(3, project=True, baked=True)
    assert removed == ["tfcluster-baked:0123456789ab"]


def test_a_failed_bake_ends_the_run_before_compose(recorded, tmp_path, monkeypatch):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    monkeypatch.setattr(build, "bake", lambda _project, _environment, _root: (None, 1))
    status, recorder = recorded(["--project", str(project), "--bake", "--tag", "mine:1"])
    assert status == 1
    assert len(recorder.commands) == 1  # The set-up only.


class KeptBytes(io.BytesIO):
    """A pipe's end: what was written stays readable after close()."""

    def close(self):
        self.kept = self.getvalue()
        super().close()


class FakeBuild:
    """Stands in for `docker build -`'s process: keeps the context it is sent, exits with `status`."""

    status = 0
    errors = b""
    last: "FakeBuild | None" = None

    def __init__(self, command, **options):
        self.command, self.options = command, options
        self.stdin = KeptBytes()
        FakeBuild.last = self

    def wait(self):
        self.options["stderr"].write(self.errors)
        return self.status

    def kill(self):
        pass


@pytest.fixture
def docker_build(monkeypatch):
    """A bake's Docker calls (tfcluster/cluster/build.py), faked: `image inspect` answers an id, `build` a FakeBuild."""
    inspected = []

    def inspect(command, **_options):
        inspected.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="sha256:" + "1" * 64 + "\n", stderr="")

    monkeypatch.setattr(subprocess, "run", inspect)
    monkeypatch.setattr(subprocess, "Popen", FakeBuild)
    monkeypatch.setattr(FakeBuild, "status", 0)
    return inspected


def baked_plan(*arguments: str) -> run_plan.Plan:
    return run.cluster_of(run.parser().parse_args(list(arguments)), {}).plan()


@pytest.fixture
def untidy_project(tmp_path) -> Path:
    """A project as it is on disk while one works on it: caches, Git, a virtual environment, data."""
    folder = tmp_path / "mine"
    files = {
        "train.py": "print('training')\n",
        "run.sh": "#!/bin/sh\n",
        "README.md": "# Mine\n",
        "notes/keep.md": "kept\n",
        "notes/other.md": "left out\n",
        "build/out.bin": "built\n",
        "secret/key": "left out\n",
        "secret/public.txt": "taken back\n",
        "model/__init__.py": "",
        "model/__pycache__/__init__.cpython-311.pyc": "cached",
        "__pycache__/train.cpython-311.pyc": "cached",
        ".git/HEAD": "ref: refs/heads/main\n",
        ".venv/pyvenv.cfg": "home = /usr/bin\n",
        ".venv/lib/site.py": "",
        "data/points.csv": "1,2\n",
        ".dockerignore": "# Docker's own syntax\n**/*.md\n!notes/keep.md\nbuild\nsecret\n!secret/public.txt\n",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "train.py").chmod(0o600)
    (folder / "run.sh").chmod(0o700)
    (folder / "latest").symlink_to("train.py")
    return folder


def test_bake_sends_the_project_as_docker_would_with_caches_git_venvs_and_data_left_out(
    docker_build, untidy_project, capsys
):
    plan = baked_plan("--project", str(untidy_project), "--data", str(untidy_project / "data"), "--bake")
    tag, status = build.bake(plan.project, {"TFCLUSTER_IMAGE": "tfcluster:latest"}, paths.ROOT)
    assert status == 0
    assert re.fullmatch(r"tfcluster-baked:[0-9a-f]{12}", tag)
    assert docker_build == [["docker", "image", "inspect", "--format", "{{.Id}}", "tfcluster:latest"]]
    label = baking.folder_label(str(untidy_project))
    assert FakeBuild.last.command == [
        *("docker", "build", "--quiet", "--file", ".tfcluster-project.Dockerfile", "--tag", tag),
        *("--build-arg", "TFCLUSTER_IMAGE=tfcluster:latest", "--label", f"tfcluster.project.folder={label}", "-"),
    ]
    assert "run | baking " in capsys.readouterr().err
    with tarfile.open(fileobj=io.BytesIO(FakeBuild.last.stdin.kept)) as context:
        members = {member.name: member for member in context.getmembers()}
        assert sorted(members) == [
            ".dockerignore",
            ".tfcluster-project.Dockerfile",
            "latest",
            "model",
            "model/__init__.py",
            "notes",
            "notes/keep.md",
            "run.sh",
            "secret/public.txt",
            "train.py",
        ]
        # Root's, readable by everyone and writable by no one else, whatever the modes on disk.
        assert {(member.uid, member.gid, member.uname) for member in members.values()} == {(0, 0, "root")}
        assert members["train.py"].mode == 0o644 and members["run.sh"].mode == 0o755
        assert members["model"].isdir() and members["model"].mode == 0o755
        assert members["latest"].issym() and members["latest"].linkname == "train.py"
        dockerfile = context.extractfile(".tfcluster-project.Dockerfile").read().decode()
        assert dockerfile == (ROOT / "docker" / "Dockerfile.project").read_text()
        # Yours, with the Dockerfile's name added: the daemon drops the Dockerfile before COPY.
        ignore = context.extractfile(".dockerignore").read().decode()
        assert ignore == (untidy_project / ".dockerignore").read_text() + ".tfcluster-project.Dockerfile\n"


def test_a_project_without_a_dockerignore_sends_one_that_leaves_itself_out(docker_build, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("")
    plan = baked_plan("--project", str(tmp_path / "mine"), "--bake", "--tag", "mine:1")
    assert build.bake(plan.project, {"TFCLUSTER_IMAGE": "tfcluster:latest"}, paths.ROOT) == ("mine:1", 0)
    assert docker_build == []  # Named by you: no id is needed.
    with tarfile.open(fileobj=io.BytesIO(FakeBuild.last.stdin.kept)) as context:
        assert context.extractfile(".dockerignore").read() == b".dockerignore\n.tfcluster-project.Dockerfile\n"
        assert sorted(context.getnames()) == [".dockerignore", ".tfcluster-project.Dockerfile", "train.py"]


def test_a_failed_build_shows_dockers_message_and_its_status(docker_build, monkeypatch, tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("")
    monkeypatch.setattr(FakeBuild, "status", 1)
    monkeypatch.setattr(FakeBuild, "errors", b"pull access denied for nowhere\n")
    plan = baked_plan("--project", str(tmp_path / "mine"), "--bake", "--tag", "mine:1")
    assert build.bake(plan.project, {"TFCLUSTER_IMAGE": "nowhere:1"}, paths.ROOT) == (None, 1)
    error = capsys.readouterr().err
    assert "pull access denied for nowhere\n" in error
    assert error.endswith("run: --bake: docker build of mine:1 failed (exit status 1)\n")


def test_the_baked_images_name_follows_the_files_and_the_base_image_not_the_times(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("print(1)\n")
    project = baking

    def name(base_id: str) -> str:
        context = project.bake_context(str(tmp_path / "mine"), None)
        return project.baked_tag(project.context_digest(context, "FROM base\n", base_id))

    first = name("sha256:a")
    assert re.fullmatch(r"tfcluster-baked:[0-9a-f]{12}", first)
    assert name("sha256:b") != first
    os.utime(tmp_path / "mine" / "train.py", (0, 0))
    assert name("sha256:a") == first
    (tmp_path / "mine" / "train.py").write_text("print(2)\n")
    assert name("sha256:a") != first


# Docker's own examples and rules for .dockerignore (docs.docker.com, "Build context"), and
# moby/patternmatcher's: each (patterns, path, left out).
DOCKERIGNORE_CASES = [
    ("*/temp*", "somedir/temporary.txt", True),
    ("*/temp*", "temp", False),
    ("*/*/temp*", "somedir/subdir/temporary.txt", True),
    ("temp?", "tempa", True),
    ("temp?", "temp", False),
    ("**/*.go", "main.go", True),
    ("**/*.go", "a/b/main.go", True),
    ("*.md\n!README*.md\nREADME-secret.md", "README-secret.md", True),
    ("*.md\n!README*.md\nREADME-secret.md", "README.md", False),
    ("*.md\n!README*.md\nREADME-secret.md", "notes.md", True),
    ("/build/", "build/out.bin", True),
    ("./build", "build", True),
    ("build/**", "build", False),
    ("build/**", "build/a/b", True),
    ("manual", "manual/index.md", True),
    ("manual", "src/manual", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("file.txt", "file-txt", False),
    ("[ab]*", "bcd", True),
    ("\\*x", "*x", True),
]


@pytest.mark.parametrize(("patterns", "path", "left_out"), DOCKERIGNORE_CASES)
def test_the_dockerignore_is_read_as_docker_reads_it(patterns, path, left_out):
    project = baking
    assert project.ignored(path, project.parse_dockerignore(patterns, ".dockerignore")) is left_out
