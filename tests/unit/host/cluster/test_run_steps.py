"""scripts/run's real run, every command recorded instead of run: set-up, down, up, stop, and what reaches Compose."""

import subprocess

import pytest
from tfcluster.cluster import scaling, steps
from tfcluster.project import requirements

from tests.unit.host.conftest import DOWN, STOP, UP
from trainer.contract.exitcodes import ExitCode

# The run's own folder of generated files, for the default project (tfcluster/cluster/runs.py).
RUN_FOLDER = ".tfcluster/runs/tfcluster"


def test_a_run_is_down_with_the_setup_then_up_stop_with_the_verifiers_status(recorded, tmp_path):
    status, recorder = recorded(["--workers", "3", "--recover"], codes={"up": 7})
    assert status == 7
    # The last run's `down` begins first, in the background, and the set-up runs meanwhile
    # (tests/unit/host/cluster/test_background.py); the recorder runs it at once.
    assert [command for command, _ in recorder.commands] == [
        DOWN,
        (str(tmp_path / "scripts" / "setup"), "--image-id-file", f"{RUN_FOLDER}/image"),
        UP,
        STOP,
    ]
    for _command, options in recorder.commands:
        assert options["cwd"] == tmp_path
        assert options["env"]["COMPOSE_FILE"] == f"compose.yaml:{RUN_FOLDER}/compose.workers.yaml:compose.recovery.yaml"
        assert options["env"]["COMPOSE_PROJECT_NAME"] == "tfcluster"
    # The verifier's output is the user's (not a terminal here: through a pipe, as plain text); down's and
    # stop's are not.
    assert recorder.commands[2][1].get("stdout") not in (subprocess.DEVNULL, subprocess.PIPE)
    assert recorder.commands[2][1]["env"]["COMPOSE_ANSI"] == "never"
    assert recorder.commands[0][1]["stdout"] == recorder.commands[3][1]["stdout"] == subprocess.DEVNULL
    assert (tmp_path / RUN_FOLDER / "compose.workers.yaml").read_text() == scaling.render(3)


@pytest.mark.parametrize(
    ("left", "commands"),
    [
        ((), [UP]),  # A name not used before, and every worker ended with the verdict.
        (("volume",), [DOWN, UP]),  # Anything of the project's left: a volume of a run killed outright.
        (("container", "running"), [DOWN, UP, STOP]),  # A worker outlived the verdict.
    ],
)
def test_down_and_stop_run_only_where_the_engine_has_something_of_the_project_for_them(recorded, left, commands):
    status, recorder = recorded([], left=left)
    assert status == 0
    assert [command for command, _ in recorder.commands if command[0] == "docker"] == commands
    # Asked before down until one kind is found, and before stop.
    kinds = ["container", "network", "volume"]
    before_down = kinds[: kinds.index(left[0]) + 1] if left else kinds
    assert recorder.asked == [(kind, "tfcluster") for kind in [*before_down, "running"]]


@pytest.mark.parametrize(("ended", "commands"), [(True, [DOWN, UP]), (False, [DOWN, UP, STOP])])
def test_stop_runs_only_for_workers_still_running_once_they_have_had_a_second_to_end(recorded, ended, commands):
    status, recorder = recorded([], left=("container", "running"), ended=ended)
    assert status == 0
    assert [command for command, _ in recorder.commands if command[0] == "docker"] == commands
    assert recorder.waited == [("tfcluster", steps.ENDING)]


class Engine:
    """`docker ps` of the running containers and `docker wait`, as ended_within asks them."""

    def __init__(self, monkeypatch, running, wait=None):
        self.waits = []
        monkeypatch.setattr(steps.engine, "listed", lambda kind, name: running if kind == "running" else None)
        monkeypatch.setattr(steps.subprocess, "run", self.run)
        self.wait = wait

    def run(self, command, **options):
        self.waits.append((command, options["timeout"]))
        if isinstance(self.wait, BaseException):
            raise self.wait
        return subprocess.CompletedProcess(command, self.wait)


@pytest.mark.parametrize(
    ("running", "wait", "ended", "waited"),
    [
        ([], None, True, False),  # Nothing running: nothing to wait for.
        (None, None, False, False),  # The engine cannot say: stop, as before.
        (["a1", "b2"], 0, True, True),  # Both ended within the bound.
        (["a1"], subprocess.TimeoutExpired("docker", 1.0), False, True),  # One outlives it: stop.
        (["a1"], 1, False, True),  # docker wait failed (a container removed meanwhile, say): stop.
    ],
    ids=["none", "unknown", "ended", "outlives", "failed"],
)
def test_ended_within_waits_for_the_running_containers_with_the_bound(monkeypatch, running, wait, ended, waited):
    engine = Engine(monkeypatch, running, wait)
    assert steps.ended_within("proj", 1.0) is ended
    assert engine.waits == ([(["docker", "wait", *running], 1.0)] if waited else [])


def test_a_failed_setup_ends_the_run_with_its_status(recorded):
    status, recorder = recorded([], codes={"setup": 2})
    assert status == 2
    # Only the last run's `down`, begun with it, besides: no cluster is brought up.
    assert [command[2] if command[0] == "docker" else "setup" for command, _ in recorder.commands] == ["down", "setup"]


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
    assert environment["COMPOSE_FILE"] == f"compose.yaml:{RUN_FOLDER}/compose.workers.yaml"
    assert environment["TFCLUSTER_PROJECT"] == str(project.resolve())
    assert environment["TFCLUSTER_COMMAND"] == "python train.py"
    assert environment["TFCLUSTER_ENV_FILE"] == str(tmp_path / RUN_FOLDER / "env")
    assert environment["EXTRA_REQUIREMENTS"] == "tqdm==4.67.1"
    assert environment["TFCLUSTER_IMAGE"] == requirements.image_tag(["tqdm==4.67.1"])
    assert "TFCLUSTER_DATA" not in environment
    # Written before the set-up, quoted so that Compose reads the value back as it was given.
    assert (
        (tmp_path / RUN_FOLDER / "env").read_text().endswith('GREETING="it\'s \\$HOME"\nTFCLUSTER_USER_ENV=GREETING\n')
    )
    assert (tmp_path / RUN_FOLDER / "compose.workers.yaml").read_text() == scaling.render(3, project=True)


def test_a_project_without_variables_still_gets_a_fresh_env_file(recorded, tmp_path):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    (tmp_path / RUN_FOLDER).mkdir(parents=True)
    (tmp_path / RUN_FOLDER / "env").write_text("STALE=1\nTFCLUSTER_USER_ENV=STALE\n")
    _status, recorder = recorded(["--project", str(project)])
    assert recorder.commands[0][1]["env"]["COMPOSE_FILE"] == "compose.yaml:compose.project.yaml"
    assert "STALE" not in (tmp_path / RUN_FOLDER / "env").read_text()
    assert (tmp_path / RUN_FOLDER / "env").read_text().endswith("\nTFCLUSTER_USER_ENV=\n")


def test_a_bake_builds_on_the_trainer_image_by_name_and_compose_runs_it_by_id(tmp_path):
    # A Dockerfile's FROM needs a name (BuildKit takes no image id there); Compose gets the id the
    # set-up found current, so that another checkout's build of that name is not what runs.
    from tfcluster.cluster.steps import Execution

    execution = Execution(
        plan=None, environment={"TFCLUSTER_IMAGE": "tfcluster-project:abc"}, image_id="sha256:" + "1" * 64
    )
    execution.pin_image()
    assert execution.environment["TFCLUSTER_IMAGE"] == "sha256:" + "1" * 64
    assert execution.by_name()["TFCLUSTER_IMAGE"] == "tfcluster-project:abc"
    execution.environment.pop("TFCLUSTER_IMAGE")  # As the bake's environment may leave it.
    execution.pin_image()
    assert execution.by_name()["TFCLUSTER_IMAGE"] == "tfcluster-project:abc"


@pytest.mark.parametrize(
    ("answer", "has"),
    [
        (subprocess.CompletedProcess([], 0, "", ""), False),
        (subprocess.CompletedProcess([], 0, "3f2a\n", ""), True),
        (subprocess.CompletedProcess([], 1, "", "Cannot connect to the Docker daemon"), True),
        (FileNotFoundError("docker"), True),
    ],
)
def test_what_the_engine_cannot_answer_it_may_have(monkeypatch, answer, has):
    """Where the engine does not say it has nothing, down and stop run as they always did."""
    asked = []

    def fake_run(command, **_options):
        asked.append(command)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(steps.engine.subprocess, "run", fake_run)
    assert steps.of_project("running", "mine") is has
    assert asked == [["docker", "ps", "--quiet", "--filter", "label=com.docker.compose.project=mine"]]
    asked.clear()
    steps.of_project("volume", "mine")
    assert asked == [["docker", "volume", "ls", "--quiet", "--filter", "label=com.docker.compose.project=mine"]]
